// EtcdCoordinator against a real etcd that this binary starts itself on free loopback ports
// (ctest label "integration"): the Coordinator conformance suite plus etcd-specific tests. Every
// test skips when /usr/bin/etcd is missing.
#include "gnomon/etcd_coordinator.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <thread>

#include "src/coord/coordinator_conformance.h"
#include "src/coord/coordinator_util.h"
#include "src/coord/etcd/etcd_client.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_test_util.h"

namespace gnomon::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

#define SKIP_WITHOUT_ETCD()                                              \
  do {                                                                   \
    if (!HaveEtcd()) GTEST_SKIP() << kEtcdBinary << " is not installed"; \
  } while (false)

// The server the tests share (each test uses its own key prefix), started on first use and
// killed (its directory removed) when the test program ends.
struct SharedEtcd {
  TempDir dir;
  std::unique_ptr<EtcdMember> member;
};
std::unique_ptr<SharedEtcd>& SharedSlot() {
  static auto* slot = new std::unique_ptr<SharedEtcd>();
  return *slot;
}
EtcdMember* SharedServer() {
  std::unique_ptr<SharedEtcd>& slot = SharedSlot();
  if (!slot) {
    slot = std::make_unique<SharedEtcd>();
    slot->member = std::make_unique<EtcdMember>("default", slot->dir.path());
    EXPECT_TRUE(slot->member->Spawn()) << "etcd did not start";
    EXPECT_TRUE(slot->member->WaitHealthy()) << "etcd did not become healthy";
  }
  return slot->member.get();
}

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedSlot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment);

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return "t" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1)) + "/";
}

EtcdOptions OptionsFor(int port, Clock* clock) {
  EtcdOptions o;
  o.endpoints = {{"127.0.0.1", port}};
  o.prefix = UniquePrefix();
  o.clock = clock;
  return o;
}

std::unique_ptr<EtcdCoordinator> OpenOrFail(const EtcdOptions& o) {
  Result<std::unique_ptr<EtcdCoordinator>> c = EtcdCoordinator::Open(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  return std::move(*c);
}

std::vector<CoordinatorFactory> EtcdFactories() {
  if (!HaveEtcd()) return {};  // nothing to run against: the suite is not instantiated
  return {{"Etcd", [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
             return OpenOrFail(OptionsFor(SharedServer()->client_port(), clock));
           }}};
}

// Not GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE: its Values() cannot be empty when etcd is
// missing; ValuesIn of an empty vector leaves the suite uninstantiated (allowed below).
INSTANTIATE_TEST_SUITE_P(Etcd, CoordinatorConformanceTest, ::testing::ValuesIn(EtcdFactories()),
                         CoordinatorFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoordinatorConformanceTest);

FireKey Fire(const std::string& job, Instant at) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  return f;
}

ClaimRequest Req(const FireKey& fire, const std::string& node,
                 OverlapPolicy overlap = OverlapPolicy::kAllow) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = node;
  r.overlap = overlap;
  return r;
}

// --- ParseEtcdUrl ------------------------------------------------------------------------------

// A job's state key is backend data: fields of the wrong type read as absent, never throw, and
// a well-formed one round-trips with its prune cutoff.
TEST(EtcdKeyspaceTest, AStateKeyReadsFieldsOfTheWrongTypeAsAbsent) {
  using coord::etcd::DecodeState;
  using coord::etcd::StateRec;
  const StateRec bad =
      DecodeState(R"({"paused":"yes","reason":7,"fails":"3","last":"12","pruned":1.5,"extra":[]})");
  EXPECT_FALSE(bad.paused);
  EXPECT_EQ(bad.reason, "");
  EXPECT_EQ(bad.fails, 0);
  EXPECT_FALSE(bad.last.has_value());
  EXPECT_FALSE(bad.pruned.has_value());
  EXPECT_EQ(DecodeState(R"({"fails":-4})").fails, 0);
  StateRec good;
  good.paused = true;
  good.reason = "api";
  good.fails = 2;
  good.last = 1772323200000;
  good.pruned = 1772236800000;
  const StateRec back = DecodeState(coord::etcd::Encode(good));
  EXPECT_TRUE(back.paused);
  EXPECT_EQ(back.reason, "api");
  EXPECT_EQ(back.fails, 2);
  EXPECT_EQ(back.last, good.last);
  EXPECT_EQ(back.pruned, good.pruned);
}

TEST(ParseEtcdUrlTest, AcceptsEndpointsCredentialsAndPrefix) {
  Result<EtcdOptions> o = ParseEtcdUrl("etcd://h1:2379,h2:2380,h3/prod/gnomon");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->endpoints.size(), 3u);
  EXPECT_EQ(o->endpoints[0], (std::pair<std::string, int>("h1", 2379)));
  EXPECT_EQ(o->endpoints[1], (std::pair<std::string, int>("h2", 2380)));
  EXPECT_EQ(o->endpoints[2], (std::pair<std::string, int>("h3", 2379)));
  EXPECT_EQ(o->prefix, "prod/gnomon/");
  EXPECT_TRUE(o->user.empty());

  o = ParseEtcdUrl("etcd://gnomon:p%40ss%3Aw@10.0.0.1:2379");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->user, "gnomon");
  EXPECT_EQ(o->password, "p@ss:w");
  EXPECT_EQ(o->prefix, "gnomon/default/");  // the default is kept
  ASSERT_EQ(o->endpoints.size(), 1u);
  EXPECT_EQ(o->endpoints[0].first, "10.0.0.1");

  EtcdOptions base;
  base.io_timeout = seconds(1);
  o = ParseEtcdUrl("etcd://localhost/p/", base);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->io_timeout, seconds(1));
  EXPECT_EQ(o->prefix, "p/");
}

TEST(ParseEtcdUrlTest, RejectsMalformedUrlsWithoutLeakingThePassword) {
  for (const char* url : {"redis://h:1", "etcd://", "etcd://:2379", "etcd://h:0", "etcd://h:65536",
                          "etcd://h:x", "etcd://h1,,h2", "etcd://h/", "etcd://u:pw@h/with space",
                          "etcd://:secret@h", "etcd://u:se%zzcret@h", "etcd://u:secret@h:99999"}) {
    Result<EtcdOptions> o = ParseEtcdUrl(url);
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_EQ(o.status().message().find("secret"), std::string::npos) << o.status().ToString();
  }
}

TEST(EtcdCoordinatorTest, OpenRejectsBadOptions) {
  EtcdOptions o;
  o.endpoints.clear();
  EXPECT_EQ(EtcdCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = EtcdOptions();
  o.prefix = "has space";
  EXPECT_EQ(EtcdCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = EtcdOptions();
  o.reconnect_backoff_max = milliseconds(1);
  EXPECT_EQ(EtcdCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// --- Against the server ------------------------------------------------------------------------

TEST(EtcdCoordinatorTest, JobIdsThatArePrefixesOfOthersAreIsolated) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  auto c = OpenOrFail(OptionsFor(SharedServer()->client_port(), &clock));
  ASSERT_NE(c, nullptr);
  const Instant t0 = clock.Now();
  // A live run of j10 does not count as an overlap of j1.
  ASSERT_EQ(c->Claim(Req(Fire("j10", t0 - minutes(1)), "n"))->result, R::kClaimed);
  EXPECT_EQ(c->Claim(Req(Fire("j1", t0), "n", OverlapPolicy::kForbid))->result, R::kClaimed);
  Result<RunPage> j1 = c->ListRuns(RunQuery{.job_id = "j1"});
  ASSERT_TRUE(j1.ok()) << j1.status().ToString();
  ASSERT_EQ(j1->runs.size(), 1u);
  EXPECT_EQ(j1->runs[0].job_id, "j1");
  ASSERT_TRUE(c->SetPaused("j1", true, "api").ok());
  EXPECT_FALSE(c->GetJobState("j10")->paused);
  ASSERT_TRUE(c->PruneHistory("j1", 1, hours(1)).ok());
  EXPECT_EQ(c->ListRuns(RunQuery{.job_id = "j10"})->runs.size(), 1u);
}

TEST(EtcdCoordinatorTest, PrefixesThatArePrefixesOfOthersAreIsolated) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions a = OptionsFor(SharedServer()->client_port(), &clock);
  EtcdOptions b = a;
  a.prefix = UniquePrefix() + "p1";  // gets its '/': "p1/" vs "p10/"
  b.prefix = a.prefix + "0";
  auto ca = OpenOrFail(a);
  auto cb = OpenOrFail(b);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(cb->PutJob("job", "{}", 0).ok());
  ASSERT_TRUE(cb->RecordSkipped(Fire("job", clock.Now()), "n", "misfire").ok());
  EXPECT_TRUE(ca->ListJobs()->empty());
  EXPECT_TRUE(ca->ListRuns(RunQuery{})->runs.empty());
  EXPECT_EQ(ca->Claim(Req(Fire("job", clock.Now()), "n"))->result, R::kClaimed);
}

TEST(EtcdCoordinatorTest, FailsOverToTheNextEndpoint) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), &clock);
  const int dead = FreeLoopbackPort();  // nothing listens there
  o.endpoints = {{"127.0.0.1", dead}, {"127.0.0.1", SharedServer()->client_port()}};
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 5; ++i) {
    Result<ClaimOutcome> out = c->Claim(Req(Fire("j", clock.Now() - seconds(i)), "n"));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->result, R::kClaimed);
  }
}

TEST(EtcdCoordinatorTest, UnreachableClusterIsUnavailableWithoutBlocking) {
  SKIP_WITHOUT_ETCD();
  EtcdOptions o;
  o.endpoints = {{"127.0.0.1", FreeLoopbackPort()}, {"127.0.0.1", FreeLoopbackPort()}};
  o.password = "secret-pw";
  o.user = "u";
  const Duration start = SystemClock::Get().SteadyNow();
  Result<std::unique_ptr<EtcdCoordinator>> c = EtcdCoordinator::Open(o);
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.status().message().find("secret-pw"), std::string::npos);
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, seconds(2));
}

// --- etcd leases ---------------------------------------------------------------------------------

// A plain client of the server on `port`, to read and write keys behind the backend's back.
std::unique_ptr<coord::EtcdClient> RawClient(int port) {
  coord::EtcdClientOptions co;
  co.endpoints = {{"127.0.0.1", port}};
  return std::make_unique<coord::EtcdClient>(co);
}

// The stored kv of `key` (absent: an empty object), read with a plain range request.
nlohmann::json RawKv(int port, const std::string& key) {
  Result<nlohmann::json> r =
      RawClient(port)->Call("/v3/kv/range", {{"key", coord::Base64Encode(key)}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->contains("kvs")) return nlohmann::json::object();
  return (*r)["kvs"][0];
}
int64_t Field(const nlohmann::json& kv, const char* name) {
  return kv.contains(name) ? std::stoll(kv[name].get<std::string>()) : 0;
}

// Audit records written by the releases that stored an HTTP status list with its result, and a
// record written now keeps the number (and the prefix) an older release reads the same way.
TEST(EtcdAuditTest, RecordsOfEarlierReleasesListWithTheirResults) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), &clock);
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  std::unique_ptr<coord::EtcdClient> client = RawClient(SharedServer()->client_port());
  auto put = [&](const std::string& key, const nlohmann::json& value) {
    Result<nlohmann::json> r =
        client->Call("/v3/kv/put", {{"key", coord::Base64Encode(o.prefix + key)},
                                    {"value", coord::Base64Encode(value.dump())}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  put("audit/00000000000000000001", {{"seq", 1},
                                     {"at", 1000},
                                     {"who", "ops"},
                                     {"action", "delete"},
                                     {"target", "a"},
                                     {"status", 204},
                                     {"before", "{}"},
                                     {"after", ""}});
  put("auditfail/00000000000000000002", {{"seq", 2},
                                         {"at", 2000},
                                         {"who", "ci"},
                                         {"action", "create"},
                                         {"target", "b"},
                                         {"status", 413},
                                         {"before", ""},
                                         {"after", ""}});
  put("auditseq", 2);
  Result<std::vector<AuditRecord>> all = c->ListAudit(10, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].result, AuditResult::kInvalid);
  EXPECT_EQ((*all)[1].result, AuditResult::kOk);
  EXPECT_EQ((*all)[1].before, "{}");
  AuditRecord unavailable;
  unavailable.who = "ci";
  unavailable.result = AuditResult::kUnavailable;
  Result<int64_t> seq = c->AppendAudit(unavailable, 10);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  EXPECT_EQ(*seq, 3);
  const nlohmann::json kv =
      RawKv(SharedServer()->client_port(), o.prefix + "auditfail/00000000000000000003");
  ASSERT_FALSE(kv.empty());
  Result<std::string> value = coord::Base64Decode(kv["value"].get<std::string>());
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*value)["status"], 503);
}

TEST(EtcdLeaseTest, TheClaimIsAttachedToALeaseAndItsTokenIsTheClaimRevision) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), &clock);
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  const FireKey fire = Fire("j", clock.Now());
  Result<ClaimOutcome> out = c->Claim(Req(fire, "n"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->result, R::kClaimed);
  const int64_t token = out->claim->fencing_token;
  // Key tails: "<job>/<ms + bias, 17 digits> <shard, 10 digits>".
  const std::string tail =
      "j/0" + std::to_string(fire.scheduled_at.unix_millis() + 5'000'000'000'000'000LL) +
      " 0000000000";
  // The fire marker was created by the claim's txn, and the live key with it, on a lease.
  const nlohmann::json marker = RawKv(SharedServer()->client_port(), o.prefix + "fire/" + tail);
  const nlohmann::json live = RawKv(SharedServer()->client_port(), o.prefix + "live/" + tail);
  ASSERT_FALSE(marker.empty());
  ASSERT_FALSE(live.empty());
  EXPECT_EQ(Field(marker, "create_revision"), token);
  EXPECT_EQ(Field(live, "create_revision"), token);
  EXPECT_NE(Field(live, "lease"), 0);
  EXPECT_EQ(Field(marker, "lease"), 0);  // the marker outlives the lease
  // The history shows the same token, while running and once reported.
  EXPECT_EQ(c->GetRun(fire.RunId())->at(0).fencing_token, token);
  Claim claim = *out->claim;
  RunRecord done = coord::NewRecord(fire, 1, token, "n", clock.Now(), RunOutcome::kSucceeded);
  done.finished_at = clock.Now();
  ASSERT_TRUE(c->Report(claim, done, true).ok());
  EXPECT_EQ(c->GetRun(fire.RunId())->at(0).fencing_token, token);
  EXPECT_TRUE(RawKv(SharedServer()->client_port(), o.prefix + "live/" + tail).empty());
  EXPECT_FALSE(RawKv(SharedServer()->client_port(), o.prefix + "fire/" + tail).empty());
}

// The backend clock is frozen (a FakeClock nobody advances), so no deadline passes: only etcd
// can end a lease. A claim that keeps renewing (keepalives) outlives its 2-s TTL; one that does
// not is listed as expired once etcd drops its lease, and is then fenced off.
TEST(EtcdLeaseTest, EtcdEndsTheLeaseOfAClaimThatStopsRenewing) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  auto c = OpenOrFail(OptionsFor(SharedServer()->client_port(), &clock));
  ASSERT_NE(c, nullptr);
  ClaimRequest kept_req = Req(Fire("kept", clock.Now()), "n");
  ClaimRequest dropped_req = Req(Fire("dropped", clock.Now()), "n");
  kept_req.lease_ttl = dropped_req.lease_ttl = seconds(2);
  Result<ClaimOutcome> kept = c->Claim(kept_req);
  Result<ClaimOutcome> dropped = c->Claim(dropped_req);
  ASSERT_TRUE(kept.ok() && kept->claim);
  ASSERT_TRUE(dropped.ok() && dropped->claim);
  const Duration start = SystemClock::Get().SteadyNow();
  std::vector<ExpiredFire> expired;
  // etcd checks expiry every 500 ms; allow 15 s for a loaded machine.
  while (expired.empty() && SystemClock::Get().SteadyNow() - start < seconds(15)) {
    ASSERT_TRUE(c->Renew(*kept->claim, seconds(2)).ok());
    std::this_thread::sleep_for(milliseconds(300));
    Result<std::vector<ExpiredFire>> e = c->ListExpired(10);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    expired = *e;
  }
  EXPECT_GE(SystemClock::Get().SteadyNow() - start, milliseconds(1500));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].fire.job_id, "dropped");
  EXPECT_EQ(expired[0].fencing_token, dropped->claim->fencing_token);
  EXPECT_EQ(c->Renew(*dropped->claim, seconds(2)).code(), StatusCode::kLeaseLost);
  EXPECT_TRUE(c->Renew(*kept->claim, seconds(2)).ok());
  Result<std::optional<Claim>> rerun =
      c->ResolveLost(expired[0], "m", LostPolicy::kRerun, seconds(30));
  ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
  ASSERT_TRUE(rerun->has_value());
  EXPECT_GT((*rerun)->fencing_token, dropped->claim->fencing_token);
  EXPECT_EQ((*rerun)->attempt, 2);
}

TEST(EtcdCoordinatorTest, HistoryIsBoundedPerJobAndInTotalButKeepsRunningRecords) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), &clock);
  o.max_records_per_job = 5;
  o.max_records_total = 8;
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  const Instant base = clock.Now() - hours(1);
  // The oldest fire of "a" stays running: it is never trimmed.
  Result<ClaimOutcome> running = c->Claim(Req(Fire("a", base), "n"));
  ASSERT_TRUE(running.ok() && running->result == R::kClaimed);
  for (int i = 1; i <= 12; ++i) {
    ASSERT_TRUE(c->RecordSkipped(Fire("a", base + seconds(i)), "n", "misfire").ok());
  }
  Result<RunPage> a = c->ListRuns(RunQuery{.job_id = "a", .limit = 100});
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->runs.size(), 5u);
  EXPECT_EQ(a->runs.front().scheduled_at, base + seconds(12));
  EXPECT_EQ(a->runs.back().scheduled_at, base);  // the running one
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(c->RecordSkipped(Fire("b", base + seconds(i)), "n", "misfire").ok());
  }
  Result<RunPage> all = c->ListRuns(RunQuery{.limit = 100});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->runs.size(), 8u);
  EXPECT_EQ(all->runs.back().scheduled_at, base);  // still there
  // A trimmed fire still cannot be claimed twice.
  EXPECT_EQ(c->Claim(Req(Fire("a", base + seconds(1)), "n"))->result, R::kAlreadyClaimed);
}

TEST(EtcdCoordinatorTest, AChangeByAnotherNodeWakesAWaiter) {
  SKIP_WITHOUT_ETCD();
  FakeClock clock;
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), &clock);
  auto waiter = OpenOrFail(o);
  auto writer = OpenOrFail(o);
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(writer, nullptr);
  const int64_t v0 = *waiter->JobsVersion();
  Result<int64_t> woke = InternalError("not run");
  const Duration start = SystemClock::Get().SteadyNow();
  std::thread t([&] { woke = waiter->WaitJobsChange(v0, seconds(30)); });
  RealWait(milliseconds(200));
  ASSERT_TRUE(writer->PutJob("j", "{}", 0).ok());
  t.join();
  ASSERT_TRUE(woke.ok()) << woke.status().ToString();
  EXPECT_EQ(*woke, *writer->JobsVersion());
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, seconds(10));
}

TEST(EtcdCoordinatorTest, AuthenticatesAndNeverLeaksThePassword) {
  SKIP_WITHOUT_ETCD();
  TempDir dir;
  EtcdMember member("auth", dir.path());
  ASSERT_TRUE(member.Spawn());
  ASSERT_TRUE(member.WaitHealthy());
  {
    coord::EtcdClientOptions co;
    co.endpoints = {{"127.0.0.1", member.client_port()}};
    coord::EtcdClient raw(co);
    ASSERT_TRUE(raw.Call("/v3/auth/role/add", {{"name", "root"}}).ok());
    ASSERT_TRUE(raw.Call("/v3/auth/user/add", {{"name", "root"}, {"password", "s3cret"}}).ok());
    ASSERT_TRUE(raw.Call("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}}).ok());
    ASSERT_TRUE(raw.Call("/v3/auth/enable", nlohmann::json::object()).ok());
  }
  FakeClock clock;
  EtcdOptions o = OptionsFor(member.client_port(), &clock);
  o.user = "root";
  o.password = "wrong-s3cret";
  Result<std::unique_ptr<EtcdCoordinator>> refused = EtcdCoordinator::Open(o);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message().find("s3cret"), std::string::npos)
      << refused.status().ToString();
  o.password = "s3cret";
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Claim(Req(Fire("j", clock.Now()), "n"))->result, R::kClaimed);
  // Without credentials the same server refuses.
  o.user.clear();
  o.password.clear();
  Result<std::unique_ptr<EtcdCoordinator>> anonymous = EtcdCoordinator::Open(o);
  EXPECT_FALSE(anonymous.ok());
}

// --- The member clock estimate (no EtcdOptions::clock) -----------------------------------------

TEST(EtcdClockTest, OpenCalibratesToTheMembersClockQuickly) {
  SKIP_WITHOUT_ETCD();
  EtcdOptions o = OptionsFor(SharedServer()->client_port(), nullptr);
  const Duration start = SystemClock::Get().SteadyNow();
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, milliseconds(2500));
  // Same host, same clock: the estimate agrees with it to about the loopback round trip.
  ASSERT_TRUE(c->ClockUncertainty().has_value());
  EXPECT_LE(*c->ClockUncertainty(), milliseconds(25));
  const int64_t off = (*c->Now() - SystemClock::Get().Now()).count();
  EXPECT_LT(std::abs(off), 50) << off << " ms";
}

// An HTTP proxy to etcd whose Date headers read this host's clock + `skew_ms` (etcd, a Go
// program, ignores libfaketime, so the member's clock is skewed on the wire).
class SkewedProxy {
 public:
  SkewedProxy(int etcd_port, int64_t skew_ms) : port_(FreeLoopbackPort()), skew_ms_(skew_ms) {
    server_.Post(".*", [this, etcd_port](const httplib::Request& req, httplib::Response& res) {
      httplib::Client up("127.0.0.1", etcd_port);
      httplib::Result r = up.Post(req.path, req.body, "application/json");
      if (!r) {
        res.status = 502;
        return;
      }
      res.status = r->status;
      res.set_content(r->body, "application/json");
      const int64_t ms = SystemClock::Get().Now().unix_millis() + skew_ms_.load();
      const time_t secs = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
      std::tm tm{};
      gmtime_r(&secs, &tm);
      char date[64];
      std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
      res.set_header("Date", date);
    });
    GNOMON_CHECK(server_.bind_to_port("127.0.0.1", port_));
    thread_ = std::jthread([this] { server_.listen_after_bind(); });
  }
  ~SkewedProxy() { server_.stop(); }
  int port() const { return port_; }
  void set_skew_ms(int64_t ms) { skew_ms_ = ms; }

 private:
  httplib::Server server_;
  int port_;
  std::atomic<int64_t> skew_ms_;
  std::jthread thread_;  // last: joined before server_ goes
};

TEST(EtcdClockTest, NowLeasesAndTheEarlyGuardFollowTheMembersClock) {
  SKIP_WITHOUT_ETCD();
  SkewedProxy proxy(SharedServer()->client_port(), 30'000);
  EtcdOptions o = OptionsFor(proxy.port(), nullptr);
  auto c = OpenOrFail(o);
  ASSERT_NE(c, nullptr);
  auto offset_ms = [&] { return (*c->Now() - SystemClock::Get().Now()).count(); };
  EXPECT_NEAR(static_cast<double>(offset_ms()), 30'000.0, 50.0);
  // (The proxy adds a connection per request to the round trip.)
  EXPECT_LE(*c->ClockUncertainty(), milliseconds(50));
  // The member is 30 s ahead of this host: a fire 20 s ahead of this host is due there...
  const Instant local = SystemClock::Get().Now();
  Result<ClaimOutcome> due = c->Claim(Req(Fire("j", local + seconds(20)), "n"));
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_EQ(due->result, R::kClaimed);
  ASSERT_TRUE(due->claim.has_value());
  // ... with a lease on the member's clock...
  EXPECT_NEAR(static_cast<double>((due->claim->lease_expires_at - local).count()),
              30'000.0 + 30'000.0, 500.0);  // default ClaimRequest lease_ttl is 30 s
  // ... and one 40 s ahead is still early there (skew_tolerance 500 ms).
  Result<ClaimOutcome> early = c->Claim(Req(Fire("k", local + seconds(40)), "n"));
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->result, R::kTooEarly);

  // The member's clock steps 5 s further: the next responses contradict the estimate, which
  // restarts and is recalibrated in the background.
  proxy.set_skew_ms(35'000);
  const Duration deadline = SystemClock::Get().SteadyNow() + seconds(8);
  while (SystemClock::Get().SteadyNow() < deadline) {
    (void)c->GetJobState("j");
    if (std::abs(offset_ms() - 35'000) < 50 && *c->ClockUncertainty() <= milliseconds(50)) break;
    RealWait(milliseconds(100));
  }
  EXPECT_NEAR(static_cast<double>(offset_ms()), 35'000.0, 50.0);
  EXPECT_LE(*c->ClockUncertainty(), milliseconds(50));
}

}  // namespace
}  // namespace gnomon::testing
