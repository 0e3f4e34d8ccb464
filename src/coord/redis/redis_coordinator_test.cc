// RedisCoordinator against a real redis-server that this binary starts itself on free loopback
// ports (ctest label "integration"). Every test skips when /usr/bin/redis-server is missing.
#include "gnomon/redis_coordinator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "gnomon/redis_queue.h"
#include "src/coord/coordinator_conformance.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_layout.h"
#include "src/coord/redis/redis_layout_testing.h"
#include "src/coord/redis/redis_script_helpers.h"
#include "src/coord/redis/redis_store.h"
#include "src/testing/free_port.h"
#include "src/testing/real_wait.h"

extern char** environ;

namespace gnomon::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

constexpr const char* kRedisServer = "/usr/bin/redis-server";

bool HaveRedis() { return access(kRedisServer, X_OK) == 0; }

#define SKIP_WITHOUT_REDIS()                                               \
  do {                                                                     \
    if (!HaveRedis()) GTEST_SKIP() << kRedisServer << " is not installed"; \
  } while (false)

// A raw hiredis connection for poking at the server from outside the coordinator.
class Raw {
 public:
  explicit Raw(int port, const std::string& password = "") {
    timeval tv{1, 0};
    ctx_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (ctx_ != nullptr && !ctx_->err && !password.empty()) Str({"AUTH", password});
  }
  ~Raw() {
    if (ctx_) redisFree(ctx_);
  }
  bool ok() const { return ctx_ != nullptr && !ctx_->err; }
  // The reply as text (strings, status, errors, integers); "" on failure.
  std::string Str(const std::vector<std::string>& argv) {
    redisReply* r = Run(argv);
    std::string out;
    if (r == nullptr) return out;
    if (r->type == REDIS_REPLY_INTEGER) {
      out = std::to_string(r->integer);
    } else if (r->str != nullptr) {
      out.assign(r->str, r->len);
    }
    freeReplyObject(r);
    return out;
  }
  // The elements of an array reply as text.
  std::vector<std::string> Array(const std::vector<std::string>& argv) {
    redisReply* r = Run(argv);
    std::vector<std::string> out;
    if (r == nullptr) return out;
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        if (r->element[i]->str) out.emplace_back(r->element[i]->str, r->element[i]->len);
      }
    }
    freeReplyObject(r);
    return out;
  }
  // Every key matching `pattern` (SCAN).
  std::vector<std::string> Keys(const std::string& pattern) {
    std::vector<std::string> out;
    std::string cursor = "0";
    do {
      redisReply* r = Run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        if (r) freeReplyObject(r);
        break;
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        out.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
      }
      freeReplyObject(r);
    } while (cursor != "0");
    return out;
  }

 private:
  redisReply* Run(const std::vector<std::string>& argv) {
    if (!ok()) return nullptr;
    std::vector<const char*> args;
    std::vector<size_t> lens;
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    return static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lens.data()));
  }
  redisContext* ctx_ = nullptr;
};

// One redis-server process in its own data directory.
class RedisServer {
 public:
  // `extra`: more command-line arguments (e.g. {"--appendonly", "no"}).
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    std::string pattern = std::filesystem::temp_directory_path() / "gnomon-redis-XXXXXX";
    GNOMON_CHECK(mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    port_ = FreeLoopbackPort();
  }
  ~RedisServer() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Starts the server and waits until it answers PING (up to 10 s). Returns whether it does.
  bool Start() {
    std::vector<std::string> args = {kRedisServer,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "yes",
                                     "--dir",
                                     dir_,
                                     "--protected-mode",
                                     "no",
                                     "--logfile",
                                     dir_ + "/redis.log",
                                     "--appendfsync",
                                     "always"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    return Spawn(std::move(args));
  }
  // Starts a Redis Sentinel instead, monitoring the primary on `primary_port` as "gmaster" (a
  // quorum of 1; a primary silent for 1 s is down), and waits until it answers PING.
  bool StartSentinel(int primary_port) {
    const std::string conf = dir_ + "/sentinel.conf";
    {
      std::ofstream out(conf);
      out << "port " << port_ << "\nbind 127.0.0.1\nprotected-mode no\ndir " << dir_ << "\nlogfile "
          << dir_ << "/sentinel.log\nsentinel monitor gmaster 127.0.0.1 " << primary_port
          << " 1\nsentinel down-after-milliseconds gmaster 1000\n"
             "sentinel failover-timeout gmaster 10000\n";
    }
    return Spawn({kRedisServer, conf, "--sentinel"});
  }
  // SIGKILL (no shutdown save) and reap.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Deletes the data directory's contents (a restart that lost every write).
  void WipeData() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.path().filename() != "redis.log") std::filesystem::remove_all(entry.path());
    }
  }

  int port() const { return port_; }
  // Sends `sig` to the server (SIGSTOP/SIGCONT: a hung backend).
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  void set_password(std::string p) { password_ = std::move(p); }

 private:
  bool Spawn(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      return false;
    }
    for (int i = 0; i < 500; ++i) {
      Raw raw(port_, password_);
      if (raw.ok() && raw.Str({"PING"}) == "PONG") return true;
      RealWait(milliseconds(20));
    }
    return false;
  }

  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string password_;
};

// The server the conformance suite shares (each test uses its own key prefix), started on first
// use and stopped (its directory removed) when the test program ends.
std::unique_ptr<RedisServer>& SharedServerSlot() {
  static auto* slot = new std::unique_ptr<RedisServer>();
  return *slot;
}
RedisServer* SharedServer() {
  std::unique_ptr<RedisServer>& slot = SharedServerSlot();
  if (!slot) {
    slot = std::make_unique<RedisServer>();
    EXPECT_TRUE(slot->Start()) << "redis-server did not start";
  }
  return slot.get();
}

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedServerSlot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment);

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return "t" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1));
}

RedisOptions OptionsFor(int port) {
  RedisOptions o;
  o.port = port;
  o.prefix = UniquePrefix();
  return o;
}

std::vector<CoordinatorFactory> RedisFactories() {
  if (!HaveRedis()) return {};  // nothing to run against: the suite is not instantiated
  return {{"Redis",
           [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
             RedisOptions o = OptionsFor(SharedServer()->port());
             o.clock_override = clock;
             Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
             EXPECT_TRUE(c.ok()) << c.status().ToString();
             if (!c.ok()) return nullptr;
             return std::move(*c);
           },
           true}};
}

// Not GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE: its Values() cannot be empty, and without
// redis-server there is no backend to instantiate the suite with.
INSTANTIATE_TEST_SUITE_P(Backend, CoordinatorConformanceTest, ::testing::ValuesIn(RedisFactories()),
                         ::gnomon::testing::CoordinatorFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoordinatorConformanceTest);

std::unique_ptr<RedisCoordinator> MustOpen(const RedisOptions& o) {
  Result<std::unique_ptr<RedisCoordinator>> c = RedisCoordinator::Open(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

FireKey Fire(const std::string& job, Instant at) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  return f;
}

ClaimRequest Req(const FireKey& fire, const std::string& node) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = node;
  r.overlap = OverlapPolicy::kAllow;
  return r;
}

RunRecord Finished(const Claim& c, RunOutcome outcome) {
  RunRecord r;
  r.run_id = c.fire.RunId();
  r.job_id = c.fire.job_id;
  r.scheduled_at = c.fire.scheduled_at;
  r.shard = c.fire.shard;
  r.shard_count = c.fire.shard_count;
  r.attempt = c.attempt;
  r.fencing_token = c.fencing_token;
  r.node_id = c.node_id;
  r.started_at = c.fire.scheduled_at;
  r.finished_at = c.fire.scheduled_at;
  r.outcome = outcome;
  r.output = std::string(1000, 'o');
  return r;
}

// Key names of the layout (gnomon/redis_coordinator.h), from the coordinator's own functions.
std::string JobBase(const RedisOptions& o, const std::string& job) {
  return coord::redis::GroupBase(o.prefix + ":" + o.ns, coord::redis::KeyGroup(job)) +
         ":job:" + job;
}
std::string SharedBase(const RedisOptions& o) { return o.prefix + ":" + o.ns + ":{~shared}"; }
// The leases in the lease index under base `b` (its shared keys' base's), sorted: its members
// below +inf (at +inf is the member that keeps it a skiplist, LEASE_KEEPER).
std::vector<std::string> Leases(Raw& raw, const std::string& b) {
  std::vector<std::string> out =
      raw.Array({"ZRANGE", b + ":{~shared}:leases", "-inf", "(+inf", "BYSCORE"});
  std::sort(out.begin(), out.end());
  return out;
}

// --- Production clock ----------------------------------------------------------------------

TEST(RedisCoordinatorTest, WithoutOverrideTheServerClockDecides) {
  SKIP_WITHOUT_REDIS();
  auto c = MustOpen(OptionsFor(SharedServer()->port()));
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->unsafe_persistence());
  Result<Instant> now = c->Now();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_LT(std::chrono::abs(*now - SystemClock::Get().Now()), seconds(5));
  // A fire an hour ahead of the server's clock is too early; one just past is claimed.
  EXPECT_EQ(c->Claim(Req(Fire("j", *now + hours(1)), "n"))->result, R::kTooEarly);
  Result<ClaimOutcome> out = c->Claim(Req(Fire("j", *now - seconds(1)), "n"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->result, R::kClaimed);
  EXPECT_GE(out->claim->lease_expires_at, *now + seconds(29));
  EXPECT_TRUE(c->Renew(*out->claim, seconds(30)).ok());
}

// --- Scripts -------------------------------------------------------------------------------

TEST(RedisCoordinatorTest, RecoversFromNoscript) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  ASSERT_EQ(raw.Str({"SCRIPT", "FLUSH"}), "OK");
  Result<ClaimOutcome> out = c->Claim(Req(Fire("j", clock.Now()), "n"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->result, R::kClaimed);
  Claim claim = *out->claim;
  ASSERT_EQ(raw.Str({"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(c->Renew(claim, seconds(30)).ok());
  ASSERT_EQ(raw.Str({"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(c->Report(claim, Finished(claim, RunOutcome::kSucceeded), true).ok());
  EXPECT_EQ(c->GetRun(claim.fire.RunId())->at(0).outcome, RunOutcome::kSucceeded);
}

// --- Change notification -----------------------------------------------------------------

// WaitJobsChange listens on the events channel: a message wakes it long before its timeout,
// which the polling fallback would wait out in full (the version does not change here).
TEST(RedisCoordinatorTest, WaitJobsChangeWakesOnTheEventsChannel) {
  SKIP_WITHOUT_REDIS();
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.ns = "events-test";
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Result<int64_t> v = c->JobsVersion();
  ASSERT_TRUE(v.ok());
  std::atomic<bool> returned{false};
  Result<int64_t> woke = InternalError("not run");
  std::thread waiter([&] {
    woke = c->WaitJobsChange(*v, seconds(120));
    returned = true;
  });
  Raw raw(SharedServer()->port());
  // Publish until the waiter has subscribed and returned (bounded far below its timeout).
  for (int i = 0; i < 600 && !returned; ++i) {
    raw.Str({"PUBLISH", SharedBase(o) + ":events", "x"});
    RealWait(milliseconds(50));
  }
  EXPECT_TRUE(returned.load()) << "no wake-up from the events channel within 30 s";
  waiter.join();
  ASSERT_TRUE(woke.ok()) << woke.status().ToString();
  EXPECT_EQ(*woke, *v);
  // A real change by another coordinator wakes it with the new version.
  auto other = MustOpen(o);
  ASSERT_NE(other, nullptr);
  std::thread waiter2([&] { woke = c->WaitJobsChange(*v, seconds(120)); });
  ASSERT_TRUE(other->SetPaused("job", true, "api").ok());
  waiter2.join();
  ASSERT_TRUE(woke.ok());
  EXPECT_NE(*woke, *v);
  EXPECT_EQ(*woke, *other->JobsVersion());
}

// --- Queue (queue mode) ----------------------------------------------------------------------

TEST(RedisQueueTest, PublishTakeTouchReclaimDone) {
  SKIP_WITHOUT_REDIS();
  RedisOptions o = OptionsFor(SharedServer()->port());
  Result<std::unique_ptr<RedisQueue>> q = RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  RedisQueue& queue = **q;
  ASSERT_TRUE(queue.Publish("default", "one").ok());
  ASSERT_TRUE(queue.Publish("default", "two").ok());
  ASSERT_TRUE(queue.Publish("gpu", "three").ok());
  EXPECT_EQ(queue.Publish("bad tag", "x").code(), StatusCode::kInvalidArgument);

  // Entries published before any worker are delivered (the group starts at id 0).
  Result<std::vector<QueueEntry>> a = queue.Take({"default"}, "w1", 10, milliseconds(10), hours(1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].payload, "one");
  EXPECT_EQ((*a)[1].payload, "two");
  EXPECT_EQ((*a)[0].tag, "default");
  EXPECT_FALSE((*a)[0].reclaimed);
  // Delivered once: another consumer gets nothing new from that tag, but the gpu entry.
  Result<std::vector<QueueEntry>> b =
      queue.Take({"default", "gpu"}, "w2", 10, milliseconds(10), hours(1));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].payload, "three");
  EXPECT_EQ((*b)[0].tag, "gpu");
  EXPECT_EQ(*queue.Pending("default"), 2);

  // w1 finishes "one": acknowledged and deleted. "two" stays pending; after its idle time it is
  // reclaimed by w2 unless w1 touches it.
  ASSERT_TRUE(queue.Done((*a)[0]).ok());
  EXPECT_EQ(*queue.Length("default"), 1);
  RealWait(milliseconds(60));
  ASSERT_TRUE(queue.Touch({(*a)[1]}, "w1").ok());
  Result<std::vector<QueueEntry>> none =
      queue.Take({"default"}, "w2", 10, milliseconds(10), milliseconds(50));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "a touched entry is not reclaimed";
  RealWait(milliseconds(60));
  Result<std::vector<QueueEntry>> reclaimed =
      queue.Take({"default"}, "w2", 10, milliseconds(10), milliseconds(50));
  ASSERT_TRUE(reclaimed.ok());
  ASSERT_EQ(reclaimed->size(), 1u);
  EXPECT_EQ((*reclaimed)[0].payload, "two");
  EXPECT_TRUE((*reclaimed)[0].reclaimed);
  ASSERT_TRUE(queue.Done((*reclaimed)[0]).ok());
  ASSERT_TRUE(queue.Done((*b)[0]).ok());
  // Nothing is trimmed while pending; everything done is deleted: the streams end empty.
  EXPECT_EQ(*queue.Length("default"), 0);
  EXPECT_EQ(*queue.Length("gpu"), 0);
  EXPECT_EQ(*queue.Pending("default"), 0);
}

// --- Persistence check ---------------------------------------------------------------------

// Open on a server started with `extra` fails with FailedPrecondition naming `why`; with
// allow_unsafe it opens, says unsafe_persistence(), and claims.
void ExpectRefusedUnlessAllowed(std::vector<std::string> extra, std::string_view why) {
  RedisServer server(std::move(extra));
  ASSERT_TRUE(server.Start());
  RedisOptions o = OptionsFor(server.port());
  Result<std::unique_ptr<RedisCoordinator>> refused = RedisCoordinator::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(why), std::string::npos) << refused.status().message();
  o.allow_unsafe = true;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->unsafe_persistence());
  EXPECT_EQ(c->Claim(Req(Fire("j", *c->Now()), "n"))->result, R::kClaimed);
}

TEST(RedisCoordinatorTest, RefusesAServerWithoutAofUnlessAllowed) {
  SKIP_WITHOUT_REDIS();
  ExpectRefusedUnlessAllowed({"--appendonly", "no"}, "appendonly");
}

// A server that may evict keys when full could drop a closed fire's marker (it has a TTL, so
// the volatile-* policies pick it first) and the fire could then be claimed again.
TEST(RedisCoordinatorTest, RefusesAServerThatEvictsKeysUnlessAllowed) {
  SKIP_WITHOUT_REDIS();
  ExpectRefusedUnlessAllowed({"--maxmemory-policy", "volatile-lru"},
                             "maxmemory-policy volatile-lru");
}

// --- Restarts --------------------------------------------------------------------------------

TEST(RedisCoordinatorTest, ReconnectsAfterARestartAndTokensNeverGoBack) {
  SKIP_WITHOUT_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.Start());
  FakeClock clock;
  RedisOptions o = OptionsFor(server.port());
  o.clock_override = &clock;
  o.connect_timeout = milliseconds(500);
  o.reconnect_backoff_min = milliseconds(20);
  o.reconnect_backoff_max = milliseconds(100);
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  int64_t last_token = 0;
  Instant at = clock.Now() - hours(1);
  auto claim_next = [&]() -> Result<Claim> {
    at += seconds(1);
    Result<ClaimOutcome> out = c->Claim(Req(Fire("j", at), "n"));
    if (!out.ok()) return out.status();
    if (out->result != R::kClaimed) return InternalError("not claimed");
    return *out->claim;
  };
  // Waits (real time, bounded) until the coordinator answers again.
  auto claim_after_restart = [&]() -> Result<Claim> {
    Result<Claim> r = InternalError("never tried");
    for (int i = 0; i < 200; ++i) {
      r = claim_next();
      if (r.ok() || r.status().code() != StatusCode::kUnavailable) return r;
      RealWait(milliseconds(25));
    }
    return r;
  };
  for (int i = 0; i < 3; ++i) {
    Result<Claim> claim = claim_next();
    ASSERT_TRUE(claim.ok()) << claim.status().ToString();
    EXPECT_GT(claim->fencing_token, last_token);
    last_token = claim->fencing_token;
  }
  const FireKey durable_fire = Fire("j", at);

  // 1. kill -9 and restart on the same data: the claims survived (appendfsync always).
  server.Kill();
  const Duration before = SystemClock::Get().SteadyNow();
  Result<ClaimOutcome> down = c->Claim(Req(Fire("j", at + seconds(100)), "n"));
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  Result<ClaimOutcome> down_again = c->Claim(Req(Fire("j", at + seconds(100)), "n"));
  EXPECT_EQ(down_again.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(SystemClock::Get().SteadyNow() - before, o.connect_timeout * 2 + milliseconds(500))
      << "calls while the server is down must not block past the connect timeout";
  ASSERT_TRUE(server.Start());
  Result<Claim> after = claim_after_restart();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GT(after->fencing_token, last_token);
  last_token = after->fencing_token;
  EXPECT_EQ(c->Claim(Req(durable_fire, "other"))->result, R::kAlreadyClaimed);

  // 2. A restart that lost every write (no AOF left): tokens still move forward.
  server.Kill();
  server.WipeData();
  ASSERT_TRUE(server.Start());
  Result<Claim> lost = claim_after_restart();
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  EXPECT_GT(lost->fencing_token, last_token);
}

// --- Key layout ------------------------------------------------------------------------------

TEST(RedisCoordinatorTest, KeysOfOneJobShareAHashTag) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  const Instant t0 = clock.Now();
  Result<ClaimOutcome> out = c->Claim(Req(Fire("tagged.job", t0 - seconds(5)), "n"));
  ASSERT_TRUE(out.ok() && out->claim);
  ASSERT_TRUE(c->SaveCheckpoint(*out->claim, "cp").ok());
  ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kFailed), false).ok());
  ASSERT_TRUE(c->NextAttempt(*out->claim, seconds(30)).ok());
  ASSERT_TRUE(c->RecordSkipped(Fire("tagged.job", t0 - seconds(9)), "n", "misfire").ok());
  ASSERT_TRUE(c->SetPaused("tagged.job", true, "api").ok());
  Raw raw(SharedServer()->port());
  const std::vector<std::string> keys = raw.Keys(o.prefix + ":*");
  int job_keys = 0;
  for (const std::string& key : keys) {
    if (key.find("tagged.job") == std::string::npos) continue;
    ++job_keys;
    // The first {...} of the key is the hash tag Redis Cluster hashes.
    const size_t open = key.find('{');
    ASSERT_NE(open, std::string::npos) << key;
    EXPECT_EQ(key.substr(open, key.find('}') - open + 1),
              "{g" + std::to_string(coord::redis::KeyGroup("tagged.job")) + "}")
        << key;
    EXPECT_TRUE(key == JobBase(o, "tagged.job") || key == JobBase(o, "tagged.job") + ":runs")
        << key;
  }
  // The job's hash (state, markers, checkpoints, records) and its listing.
  EXPECT_EQ(job_keys, 2);
}

// --- Bounded growth --------------------------------------------------------------------------

// The fields of the hash `key` whose names start with `prefix` (a job's hash: "m:" its fire
// markers, "r:" its records).
size_t Fields(Raw& raw, const std::string& key, const std::string& prefix) {
  size_t n = 0;
  for (const std::string& f : raw.Array({"HKEYS", key})) n += f.starts_with(prefix);
  return n;
}

TEST(RedisCoordinatorTest, HistoryIsCapped) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  o.max_records_per_job = 20;
  o.max_records_total = 30;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  const Instant base = clock.Now() - hours(5);
  for (int i = 0; i < 60; ++i) {
    for (const char* job : {"a", "b"}) {
      Result<ClaimOutcome> out = c->Claim(Req(Fire(job, base + seconds(i)), "n"));
      ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
      ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kSucceeded), true).ok());
    }
    ASSERT_TRUE(c->RecordSkipped(Fire("c", base + seconds(i)), "n", "misfire").ok());
  }
  Raw raw(SharedServer()->port());
  const std::string b = o.prefix + ":default";
  for (const char* job : {"a", "b", "c"}) {
    EXPECT_LE(std::stoi(raw.Str({"ZCARD", JobBase(o, job) + ":runs"})), 20) << job;
  }
  EXPECT_LE(std::stoi(raw.Str({"ZCARD", SharedBase(o) + ":runs"})), 30);
  size_t records = 0;
  for (const char* job : {"a", "b", "c"}) records += Fields(raw, JobBase(o, job), "r:");
  EXPECT_LE(records, 30u);
  // The newest records are the ones kept, and listing still works.
  Result<RunPage> page = c->ListRuns(RunQuery{.limit = 1000});
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->runs.empty());
  EXPECT_LE(page->runs.size(), 30u);
  EXPECT_EQ(page->runs.front().scheduled_at, base + seconds(59));
  // Fire markers go with their job's listing entries (at most cap + slack - 1 = 20), and a fire
  // whose marker went is refused as too old: its job's cutoff is past it.
  for (const char* job : {"a", "b", "c"}) {
    EXPECT_LE(Fields(raw, JobBase(o, job), "m:"), 20u) << job;
    EXPECT_GE(Fields(raw, JobBase(o, job), "m:"), 1u) << job;
  }
  Result<ClaimOutcome> again = c->Claim(Req(Fire("a", base + seconds(3)), "n"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->result, ClaimOutcome::Result::kTooOld);
  // Lease indexes hold only open fires.
  EXPECT_EQ(std::to_string(Leases(raw, b).size()), "0");
}

// A fire older than fire_retention is refused (kTooOld), with nothing written, by schedule or
// by a backfill; a closed marker stays with its fire's listing entry.
TEST(RedisCoordinatorTest, AFireOlderThanTheMarkerRetentionIsNotClaimed) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  o.fire_retention = hours(2);
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  const Instant now = clock.Now();
  // At the bound: refused, and nothing recorded (no marker, no record, no state).
  const FireKey old = Fire("r", now - hours(2));
  Result<ClaimOutcome> refused = c->Claim(Req(old, "n"));
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->result, R::kTooOld);
  EXPECT_FALSE(refused->claim.has_value());
  EXPECT_EQ(c->FiresRecorded({old}).value(), std::vector<bool>{false});
  EXPECT_EQ(c->GetRun(old.RunId()).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(c->GetJobState("r").value().last_scheduled.has_value());
  // The same in a batch, next to a fire one millisecond inside the bound, which is claimed.
  const FireKey inside = Fire("r", now - hours(2) + milliseconds(1));
  std::vector<Result<ClaimOutcome>> many = c->ClaimMany({Req(old, "n"), Req(inside, "n")});
  ASSERT_EQ(many.size(), 2u);
  ASSERT_TRUE(many[0].ok() && many[1].ok());
  EXPECT_EQ(many[0]->result, R::kTooOld);
  ASSERT_EQ(many[1]->result, R::kClaimed);
  // A backfill of an older fire is refused too, with nothing written; one inside the bound is
  // claimed.
  ClaimRequest backfill = Req(Fire("r", now - hours(30)), "n");
  backfill.cause = "backfill by ops";
  Result<ClaimOutcome> asked = c->Claim(backfill);
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(asked->result, R::kTooOld);
  EXPECT_EQ(c->FiresRecorded({backfill.fire}).value(), std::vector<bool>{false});
  backfill.fire = Fire("r", now - hours(1));
  asked = c->Claim(backfill);
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_EQ(asked->result, R::kClaimed);

  // A closed marker has no TTL: it is a field of its job's hash, kept with the fire's listing
  // entry (the job's cap), so the fire is refused as claimed long after it closed.
  Raw raw(SharedServer()->port());
  ASSERT_TRUE(
      c->Report(*many[1]->claim, Finished(*many[1]->claim, RunOutcome::kSucceeded), true).ok());
  EXPECT_EQ(raw.Str({"PTTL", JobBase(o, "r")}), "-1");
  clock.Advance(hours(1));
  Result<ClaimOutcome> again = c->Claim(Req(inside, "n2"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->result, R::kAlreadyClaimed);
  // A skipped fire's marker the same way, also ahead of now (recorded by schedule).
  const FireKey skipped = Fire("s", now + hours(1) + seconds(30));
  ASSERT_TRUE(c->RecordSkipped(skipped, "n", "excluded").ok());
  again = c->Claim(Req(skipped, "n2"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->result, R::kAlreadyClaimed);
}

// Trimming waits for a slack of cap / 16 (at most 64) past the cap and then drops that many of
// the oldest finished records at once: an index never holds more than cap + slack - 1 finished
// records, every listed record still has its hash and every hash its listing, and running
// records are kept however old.
TEST(RedisCoordinatorTest, HistoryIsTrimmedInBatchesWithinCapPlusSlack) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  o.max_records_per_job = 128;  // slack 8
  o.max_records_total = 320;    // slack 20
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const std::string b = o.prefix + ":default";
  const Instant base = clock.Now() - hours(5);
  // The oldest record of "a" stays running throughout.
  Result<ClaimOutcome> running = c->Claim(Req(Fire("a", base - seconds(1)), "n"));
  ASSERT_TRUE(running.ok() && running->claim) << running.status().ToString();
  // "a" gets 3 fires a second, "b" and "c" one each: "a" reaches its own cap, all together the
  // total cap.
  int most_a = 0, most_all = 0;
  for (int i = 0; i < 300; ++i) {
    const Instant at = base + seconds(i);
    const std::vector<FireKey> fires = {Fire("a", at), Fire("a", at + milliseconds(1)),
                                        Fire("a", at + milliseconds(2)), Fire("b", at),
                                        Fire("c", at)};
    for (const FireKey& fire : fires) {
      Result<ClaimOutcome> out = c->Claim(Req(fire, "n"));
      ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
      ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kSucceeded), true).ok());
      most_a = std::max(most_a, std::stoi(raw.Str({"ZCARD", JobBase(o, "a") + ":runs"})));
      most_all = std::max(most_all, std::stoi(raw.Str({"ZCARD", SharedBase(o) + ":runs"})));
    }
  }
  // Never more than cap + slack - 1 (the running record counts too) ...
  EXPECT_LE(most_a, 128 + 8 - 1);
  EXPECT_LE(most_all, 320 + 20 - 1);
  // ... and not trimmed at every write.
  EXPECT_GT(most_a, 128 + 1);
  EXPECT_GT(most_all, 320 + 1);
  // Every record is listed under its job, and in the all-jobs listing: the records the all-jobs
  // cap dropped left both (their jobs' entries and markers stay, bounded by each job's cap), and
  // the running one, which has no record yet, left the all-jobs listing when it was among the
  // oldest (it stays listed under its job).
  int per_job = 0;
  size_t records = 0;
  std::set<std::string> listed;
  for (const char* job : {"a", "b", "c"}) {
    per_job += std::stoi(raw.Str({"ZCARD", JobBase(o, job) + ":runs"}));
    for (const std::string& m : raw.Array({"ZRANGE", JobBase(o, job) + ":runs", "0", "-1"})) {
      listed.insert(m);
    }
    for (const std::string& f : raw.Array({"HKEYS", JobBase(o, job)})) {
      if (!f.starts_with("r:")) continue;
      ++records;
      EXPECT_TRUE(listed.contains(f.substr(2))) << f;
    }
  }
  const int in_all = std::stoi(raw.Str({"ZCARD", SharedBase(o) + ":runs"}));
  EXPECT_EQ(records, static_cast<size_t>(in_all));
  EXPECT_GE(per_job, in_all + 1);
  Result<std::vector<RunRecord>> kept = c->GetRun(running->claim->fire.RunId());
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].outcome, RunOutcome::kRunning);
}

// Calls of a Redis command since the last CONFIG RESETSTAT.
int64_t CommandCalls(Raw& raw, const std::string& command) {
  const std::string stats = raw.Str({"INFO", "commandstats"});
  const std::string key = "cmdstat_" + command + ":calls=";
  const size_t at = stats.find(key);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + key.size()));
}

// A claim batch's writes to the global indexes go as one command each when its script ends
// (GPEND, flush_global): the lease index and the global listing then hold what the per-fire
// commands would have left, and the listing is trimmed to its bound once for the whole batch,
// however many more fires the batch added than a trim drops by itself (4 slacks).
TEST(RedisCoordinatorTest, ABatchWritesTheGlobalIndexesOnceAndKeepsTheirBounds) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  o.max_records_total = 16;  // slack 1: a trim drops at most 4 by itself
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const std::string b = o.prefix + ":default";
  const Instant at = clock.Now() - seconds(1);
  std::vector<ClaimRequest> reqs;
  for (int i = 0; i < 100; ++i) reqs.push_back(Req(Fire("batch-" + std::to_string(i), at), "n"));
  raw.Str({"CONFIG", "RESETSTAT"});
  std::vector<Result<ClaimOutcome>> outs = c->ClaimMany(reqs);
  ASSERT_EQ(outs.size(), reqs.size());
  for (const Result<ClaimOutcome>& out : outs) {
    ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
  }
  // Per fire a ZADD to its job's listing; for the batch one to the lease index and one to the
  // global listing (trimmed: running records leave it only).
  EXPECT_EQ(CommandCalls(raw, "zadd"), 100 + 2);
  EXPECT_EQ(std::to_string(Leases(raw, b).size()), "100");
  EXPECT_LE(std::stoi(raw.Str({"ZCARD", SharedBase(o) + ":runs"})), 16);
  // Reported one by one, then closed: the lease index empties, the listing stays bounded, and
  // every member it lists has its record.
  for (const Result<ClaimOutcome>& out : outs) {
    ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kSucceeded), true).ok());
  }
  EXPECT_EQ(std::to_string(Leases(raw, b).size()), "0");
  // The index keeps its keeper (LEASE_KEEPER), and with it the skiplist encoding: as a small
  // sorted set it would be a listpack, which a batch's every ZADD and ZREM walks.
  EXPECT_EQ(raw.Str({"OBJECT", "ENCODING", SharedBase(o) + ":leases"}), "skiplist");
  EXPECT_EQ(raw.Str({"ZCARD", SharedBase(o) + ":leases"}), "1");
  const std::vector<std::string> listed = raw.Array({"ZRANGE", SharedBase(o) + ":runs", "0", "-1"});
  EXPECT_LE(listed.size(), 16u);
  Result<RunPage> page = c->ListRuns(RunQuery{.limit = 1000});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->runs.size(), listed.size());
  for (const RunRecord& r : page->runs) EXPECT_EQ(r.outcome, RunOutcome::kSucceeded);

  // A batch that fails halfway (the second job's listing is not a sorted set: its claim fails at
  // its first write) keeps the writes it made, the first fire's lease entry among them: its claim
  // is found by the lost-run scan, as it would be had each command been sent at once. The error
  // is the server's.
  const Instant later = at + seconds(1);
  raw.Str({"SET", JobBase(o, "broken") + ":runs", "not a sorted set"});
  std::vector<Result<ClaimOutcome>> failed =
      c->ClaimMany({Req(Fire("first", later), "n"), Req(Fire("broken", later), "n")});
  ASSERT_EQ(failed.size(), 2u);
  for (const Result<ClaimOutcome>& out : failed) {
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("WRONGTYPE"), std::string::npos)
        << out.status().ToString();
  }
  const std::string ms = std::to_string(later.unix_millis());
  EXPECT_EQ(Leases(raw, b), (std::vector<std::string>{"first " + ms + ":0"}));
  EXPECT_EQ(c->FiresRecorded({Fire("first", later), Fire("broken", later)}).value(),
            (std::vector<bool>{true, false}));
}

// Running records among the oldest of an index (late claims of old instants: a misfire catch-up)
// must not make every write scan the whole excess (they did: each write looked at every record
// beyond the cap, so a backlog made each claim slower, the backlog longer, and a million-job fleet
// stalled on its own history). The global index drops such a record's global listing (it stays
// listed under its job); a job's index keeps it, and trims the excess once those runs end.
TEST(RedisCoordinatorTest, RunningRecordsAtTheOldEndDoNotMakeTrimsScan) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  o.max_records_per_job = 32;  // slack 2
  o.max_records_total = 320;   // slack 20
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const std::string b = o.prefix + ":default";
  const Instant base = clock.Now() - hours(5);
  std::vector<Claim> running;
  for (int i = 0; i < 200; ++i) {  // "p" 100 of them, "old-0".."old-9" the rest
    const std::string job = i % 2 == 0 ? "p" : "old-" + std::to_string(i % 10);
    Result<ClaimOutcome> out = c->Claim(Req(Fire(job, base + seconds(i)), "n"));
    ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
    running.push_back(*out->claim);
  }
  int most_all = 0;
  auto write = [&](int i) {
    Result<ClaimOutcome> out = c->Claim(Req(Fire("p", base + hours(1) + seconds(i)), "n"));
    ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
    ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kSucceeded), true).ok());
    most_all = std::max(most_all, std::stoi(raw.Str({"ZCARD", SharedBase(o) + ":runs"})));
  };
  ASSERT_EQ(raw.Str({"CONFIG", "RESETSTAT"}), "OK");
  constexpr int kWrites = 600;
  for (int i = 0; i < kWrites; ++i) write(i);
  // A write reads a few fields itself; a trim looks at most at 4 slacks + 64 records, a job's
  // index once a second while running records hold it back (the clock stands still here).
  // Scanning the excess at every write: ~200,000 reads.
  EXPECT_LT(CommandCalls(raw, "hget"), 10 * kWrites);
  EXPECT_LE(most_all, 320 + 20 - 1) << "the global index waited for running records";
  // "p"'s index keeps its 100 running records (and grows past its cap meanwhile).
  EXPECT_GE(std::stoi(raw.Str({"ZCARD", JobBase(o, "p") + ":runs"})), 100);
  int old_listed = 0;
  for (int k = 1; k < 10; k += 2) {
    old_listed += std::stoi(raw.Str({"ZCARD", JobBase(o, "old-" + std::to_string(k)) + ":runs"}));
  }
  EXPECT_EQ(old_listed, 100) << "a running record left its job's listing";
  for (const Claim& claim : running) {
    ASSERT_TRUE(c->Report(claim, Finished(claim, RunOutcome::kSucceeded), true).ok());
    Result<std::vector<RunRecord>> rec = c->GetRun(claim.fire.RunId());
    ASSERT_TRUE(rec.ok() && rec->size() == 1) << claim.fire.RunId();
    EXPECT_EQ((*rec)[0].outcome, RunOutcome::kSucceeded);
  }
  clock.Advance(seconds(2));  // a held-back trim of "p" looks again a second later
  for (int i = kWrites; i < kWrites + 120; ++i) write(i);
  EXPECT_LE(std::stoi(raw.Str({"ZCARD", JobBase(o, "p") + ":runs"})), 32 + 2 - 1);
  // Every record is listed under its job.
  for (const std::string& job : {std::string("p"), std::string("old-1"), std::string("old-5")}) {
    for (const std::string& f : raw.Array({"HKEYS", JobBase(o, job)})) {
      if (!f.starts_with("r:")) continue;
      EXPECT_NE(raw.Str({"ZSCORE", JobBase(o, job) + ":runs", f.substr(2)}), "") << f;
    }
  }
}

// A report replaces its attempt's record: one listing entry, and a field a later report no
// longer has (the exit code) is gone. A record the all-jobs cap dropped while its fire was open
// (after a non-final report) is written again by the final report, listed under its job.
TEST(RedisCoordinatorTest, ReportUpdatesTheClaimedRecordInPlace) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const Instant at = clock.Now() - seconds(10);
  Result<ClaimOutcome> out = c->Claim(Req(Fire("u", at), "n"));
  ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
  const Claim& claim = *out->claim;

  RunRecord first = Finished(claim, RunOutcome::kFailed);
  first.exit_code = 3;
  first.error = "exit 3";
  ASSERT_TRUE(c->Report(claim, first, false).ok());
  Result<std::vector<RunRecord>> run = c->GetRun(claim.fire.RunId());
  ASSERT_TRUE(run.ok() && run->size() == 1u) << run.status().ToString();
  EXPECT_EQ((*run)[0].exit_code, std::optional<int>(3));
  RunRecord last = Finished(claim, RunOutcome::kSucceeded);
  last.output = "done";
  ASSERT_TRUE(c->Report(claim, last, true).ok());
  run = c->GetRun(claim.fire.RunId());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->size(), 1u);
  EXPECT_EQ((*run)[0].outcome, RunOutcome::kSucceeded);
  EXPECT_FALSE((*run)[0].exit_code.has_value());
  EXPECT_EQ((*run)[0].error, "");
  EXPECT_EQ((*run)[0].output, "done");
  EXPECT_EQ((*run)[0].fencing_token, claim.fencing_token);
  EXPECT_EQ(raw.Str({"ZCARD", JobBase(o, "u") + ":runs"}), "1");
  EXPECT_EQ(raw.Str({"ZCARD", SharedBase(o) + ":runs"}), "1");

  // The record of a second fire is dropped after a non-final report, as the all-jobs cap drops
  // it: its record field and its all-jobs member go, its job's entry stays (the fire is open).
  Result<ClaimOutcome> again = c->Claim(Req(Fire("u", at + seconds(1)), "n"));
  ASSERT_TRUE(again.ok() && again->claim) << again.status().ToString();
  ASSERT_TRUE(c->Report(*again->claim, Finished(*again->claim, RunOutcome::kFailed), false).ok());
  std::vector<std::string> members = raw.Array({"ZRANGE", JobBase(o, "u") + ":runs", "0", "0"});
  ASSERT_EQ(members.size(), 1u);
  ASSERT_EQ(raw.Str({"HDEL", JobBase(o, "u"), "r:" + members[0]}), "1");
  ASSERT_EQ(raw.Str({"ZREM", SharedBase(o) + ":runs", members[0]}), "1");
  ASSERT_TRUE(c->Report(*again->claim, Finished(*again->claim, RunOutcome::kSucceeded), true).ok());
  Result<RunPage> page = c->ListRuns(RunQuery{.job_id = "u"});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->runs.size(), 2u);
  EXPECT_EQ(page->runs[0].run_id, again->claim->fire.RunId());
  EXPECT_EQ(page->runs[0].outcome, RunOutcome::kSucceeded);
}

// PruneHistory runs for every job about once a minute: a prune reads what changed since the
// last one, not the job's whole listing (whose entries and markers outlive the records that
// keep_last drops). The records beyond keep_last go; their fires stay refused as claimed.
TEST(RedisCoordinatorTest, APruneReadsOnlyWhatChangedSinceTheLast) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const Instant base = clock.Now() - hours(1);
  auto fire = [&](int i) {
    Result<ClaimOutcome> out = c->Claim(Req(Fire("p", base + seconds(i)), "n"));
    ASSERT_TRUE(out.ok() && out->claim) << out.status().ToString();
    ASSERT_TRUE(c->Report(*out->claim, Finished(*out->claim, RunOutcome::kSucceeded), true).ok());
  };
  for (int i = 0; i < 300; ++i) fire(i);
  ASSERT_TRUE(c->PruneHistory("p", 10, hours(24)).ok());
  EXPECT_EQ(Fields(raw, JobBase(o, "p"), "r:"), 10u);
  EXPECT_EQ(Fields(raw, JobBase(o, "p"), "m:"), 300u);
  EXPECT_EQ(c->Claim(Req(Fire("p", base), "n"))->result, R::kAlreadyClaimed);
  // Two more fires: the next prune reads the newest 10 fires (one call) and the 2 entries that
  // crossed the boundary, and drops their records only.
  fire(300);
  fire(301);
  ASSERT_EQ(raw.Str({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_TRUE(c->PruneHistory("p", 10, hours(24)).ok());
  EXPECT_EQ(CommandCalls(raw, "hmget"), 1);
  EXPECT_EQ(CommandCalls(raw, "hdel"), 1);
  EXPECT_EQ(Fields(raw, JobBase(o, "p"), "r:"), 10u);
  Result<RunPage> page = c->ListRuns(RunQuery{.job_id = "p", .limit = 1000});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->runs.size(), 10u);
  EXPECT_EQ(page->runs.front().scheduled_at, base + seconds(301));
}

// Claims and reports made at once by many threads go to the server together (RedisBatcher);
// each call still gets its own answer: its own token, its own refusal, its own record.
TEST(RedisCoordinatorTest, ConcurrentClaimsAndReportsEachGetTheirOwnAnswer) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  RedisOptions o = OptionsFor(SharedServer()->port());
  o.clock_override = &clock;
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  raw.Str({"CONFIG", "RESETSTAT"});
  const Instant base = clock.Now() - hours(1);
  constexpr int kThreads = 8, kFires = 25;
  std::vector<std::vector<Claim>> claims(kThreads);
  std::vector<std::string> errors(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string job = "batch-" + std::to_string(t);
        for (int i = 0; i < kFires && errors[t].empty(); ++i) {
          const FireKey fire = Fire(job, base + seconds(i));
          Result<ClaimOutcome> out = c->Claim(Req(fire, "n" + std::to_string(t)));
          if (!out.ok() || !out->claim || out->claim->fire.RunId() != fire.RunId()) {
            errors[t] = "claim of " + fire.RunId() + ": " + out.status().ToString();
            break;
          }
          // A second claim of the same fire is refused, whoever's batch it rides in.
          Result<ClaimOutcome> again = c->Claim(Req(fire, "other"));
          if (!again.ok() || again->result != ClaimOutcome::Result::kAlreadyClaimed) {
            errors[t] = "second claim of " + fire.RunId() + " was not refused";
            break;
          }
          const Claim& claim = *out->claim;
          if (i % 2 == 1) {  // a stale token first: refused, and only this report
            Claim stale = claim;
            stale.fencing_token -= 1;
            Status s = c->Report(stale, Finished(stale, RunOutcome::kFailed), true);
            if (s.code() != StatusCode::kLeaseLost) {
              errors[t] = "stale report of " + fire.RunId() + ": " + s.ToString();
              break;
            }
          }
          RunRecord rec = Finished(claim, RunOutcome::kSucceeded);
          rec.output = fire.RunId();
          if (Status s = c->Report(claim, rec, true); !s.ok()) {
            errors[t] = "report of " + fire.RunId() + ": " + s.ToString();
            break;
          }
          claims[t].push_back(claim);
        }
      });
    }
  }
  for (int t = 0; t < kThreads; ++t) ASSERT_EQ(errors[t], "") << "thread " << t;
  std::set<int64_t> tokens_of_job0;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(claims[t].size(), static_cast<size_t>(kFires));
    for (const Claim& claim : claims[t]) {
      Result<std::vector<RunRecord>> run = c->GetRun(claim.fire.RunId());
      ASSERT_TRUE(run.ok() && run->size() == 1) << claim.fire.RunId();
      EXPECT_EQ((*run)[0].outcome, RunOutcome::kSucceeded) << claim.fire.RunId();
      EXPECT_EQ((*run)[0].fencing_token, claim.fencing_token) << claim.fire.RunId();
      EXPECT_EQ((*run)[0].output, claim.fire.RunId());
    }
  }
  // Not asserted (it depends on the threads' timing), shown: the calls shared script calls.
  std::cout << "[ info ] " << kThreads * kFires * 2 << " claims and " << kThreads * kFires * 3 / 2
            << " reports in " << CommandCalls(raw, "evalsha") << " script calls\n";
}

// --- Credentials -----------------------------------------------------------------------------

TEST(RedisCoordinatorTest, PasswordNeverAppearsInErrors) {
  SKIP_WITHOUT_REDIS();
  const std::string password = "S3cr3t-Pa55word";
  RedisServer server({"--requirepass", password});
  server.set_password(password);
  ASSERT_TRUE(server.Start());

  RedisOptions wrong = OptionsFor(server.port());
  wrong.password = "Wr0ng-Pa55word";
  Result<std::unique_ptr<RedisCoordinator>> refused = RedisCoordinator::Open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message().find(wrong.password), std::string::npos)
      << refused.status().message();

  RedisOptions none = OptionsFor(server.port());
  Result<std::unique_ptr<RedisCoordinator>> unauthenticated = RedisCoordinator::Open(none);
  EXPECT_FALSE(unauthenticated.ok());

  Result<RedisOptions> bad_url = ParseRedisUrl("redis://admin:" + password + "@127.0.0.1:99999/0");
  ASSERT_FALSE(bad_url.ok());
  EXPECT_EQ(bad_url.status().message().find(password), std::string::npos)
      << bad_url.status().message();

  Result<RedisOptions> url =
      ParseRedisUrl("redis://:" + password + "@127.0.0.1:" + std::to_string(server.port()) + "/3");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->password, password);
  EXPECT_EQ(url->user, "");
  EXPECT_EQ(url->db, 3);
  url->prefix = UniquePrefix();
  auto c = MustOpen(*url);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->PutJob("x", "{}", 0).ok());
  Raw raw(server.port(), password);
  ASSERT_EQ(raw.Str({"SELECT", "3"}), "OK");
  EXPECT_EQ(raw.Str({"HEXISTS", url->prefix + ":default:{~shared}:jobs", "x"}), "1");

  // Errors after the server went away do not carry it either.
  server.Kill();
  Result<int64_t> gone = c->JobsVersion();
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(gone.status().message().find(password), std::string::npos);
}

TEST(RedisCoordinatorTest, ParsesUrls) {
  Result<RedisOptions> full = ParseRedisUrl("redis://ops:p%40ss@redis.example:6380/2");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->user, "ops");
  EXPECT_EQ(full->password, "p@ss");
  EXPECT_EQ(full->host, "redis.example");
  EXPECT_EQ(full->port, 6380);
  EXPECT_EQ(full->db, 2);
  Result<RedisOptions> plain = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 6379);
  EXPECT_EQ(plain->db, 0);
  EXPECT_EQ(ParseRedisUrl("http://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRedisUrl("redis://h:0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRedisUrl("redis://h:1/x").status().code(), StatusCode::kInvalidArgument);
  // A password may hold '/' unencoded (the path starts after the user-info).
  Result<RedisOptions> slash = ParseRedisUrl("redis://:pa/ss@h:6380/3");
  ASSERT_TRUE(slash.ok()) << slash.status().ToString();
  EXPECT_EQ(slash->password, "pa/ss");
  EXPECT_EQ(slash->db, 3);
  // IPv6 literals in brackets, with or without a port.
  Result<RedisOptions> v6 = ParseRedisUrl("redis://[::1]:6390/1");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 6390);
  Result<RedisOptions> v6_default = ParseRedisUrl("redis://[fe80::2]");
  ASSERT_TRUE(v6_default.ok()) << v6_default.status().ToString();
  EXPECT_EQ(v6_default->host, "fe80::2");
  EXPECT_EQ(v6_default->port, 6379);
  EXPECT_EQ(ParseRedisUrl("redis://[::1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRedisUrl("redis://[::1]x").status().code(), StatusCode::kInvalidArgument);
  // wait_replicas=N, on either scheme, next to the TLS parameters; out of range or twice: named.
  Result<RedisOptions> wait = ParseRedisUrl("redis://h:6380/1?wait_replicas=2");
  ASSERT_TRUE(wait.ok()) << wait.status().ToString();
  EXPECT_EQ(wait->wait_replicas, 2);
  EXPECT_EQ(wait->db, 1);
  EXPECT_FALSE(wait->tls.enabled);
  EXPECT_EQ(plain->wait_replicas, 0);
  Result<RedisOptions> tls = ParseRedisUrl("rediss://h?tls_verify=false&wait_replicas=1");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->wait_replicas, 1);
  EXPECT_TRUE(tls->tls.enabled);
  EXPECT_FALSE(tls->tls.verify);
  // fire_retention=<duration>: 1h to 366d; absent, the default.
  Result<RedisOptions> kept = ParseRedisUrl("redis://h?wait_replicas=1&fire_retention=90m");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->fire_retention, std::chrono::minutes(90));
  EXPECT_EQ(kept->wait_replicas, 1);
  EXPECT_EQ(plain->fire_retention, RedisOptions{}.fire_retention);
  for (const char* bad : {"redis://h?fire_retention=59m", "redis://h?fire_retention=367d",
                          "redis://h?fire_retention=", "redis://h?fire_retention=2",
                          "redis://h?fire_retention=2h&fire_retention=2h"}) {
    Result<RedisOptions> r = ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("fire_retention"), std::string::npos)
        << r.status().message();
  }
  for (const char* bad : {"redis://h?wait_replicas=17", "redis://h?wait_replicas=-1",
                          "redis://h?wait_replicas=", "redis://h?wait_replicas",
                          "redis://h?wait_replicas=1&wait_replicas=1",
                          "redis://h?wait_replicas=1&tls_verify=false"}) {
    Result<RedisOptions> r = ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string(bad).ends_with("false") ? "tls_verify"
                                                                            : "wait_replicas"),
              std::string::npos)
        << r.status().message();
  }
}

// wait_replicas: a claim batch is answered once the replica has it; with the replica hung, the
// batch answers Unavailable after wait_timeout, its fires are not started and the primary takes
// its claims back, so the fire's retry claims it (under `misfire`), not the lost-run scan.
TEST(RedisCoordinatorTest, ClaimsWaitForTheirReplicas) {
  SKIP_WITHOUT_REDIS();
  RedisServer primary({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(primary.Start());
  RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(primary.port())});
  ASSERT_TRUE(replica.Start());
  Raw raw(primary.port());
  bool online = false;
  for (int i = 0; i < 500 && !online; ++i) {
    online = raw.Str({"INFO", "replication"}).find("state=online") != std::string::npos;
    if (!online) RealWait(milliseconds(20));
  }
  ASSERT_TRUE(online) << raw.Str({"INFO", "replication"});
  // "online" is the link; a write acknowledged by WAIT shows the replica is keeping up (on a
  // loaded machine its first acknowledgement can take longer than a claim's wait).
  raw.Str({"SET", "warm-up", "1"});
  ASSERT_EQ(raw.Str({"WAIT", "1", "10000"}), "1");
  RedisOptions o = OptionsFor(primary.port());
  o.wait_replicas = 1;
  o.wait_timeout = milliseconds(1500);  // below io_timeout (2 s)
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  // The scheduler is told so (it then reads a fire's record before passing over a peer's claim).
  EXPECT_TRUE(c->ClaimsMayBeWithdrawn());
  EXPECT_FALSE(MustOpen(OptionsFor(primary.port()))->ClaimsMayBeWithdrawn()) << "without WAIT";
  const Instant now = *c->Now();
  Result<ClaimOutcome> first = c->Claim(Req(Fire("j", now - seconds(2)), "n"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->result, R::kClaimed);

  replica.Signal(SIGSTOP);
  const FireKey unacked = Fire("j", now - seconds(1));
  Result<ClaimOutcome> second = c->Claim(Req(unacked, "n"));
  replica.Signal(SIGCONT);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("acknowledged by 0 of 1 replica"), std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("its claims were withdrawn"), std::string::npos)
      << second.status().message();
  // The primary took the claim back: no record, no lease; the fire's retry (here another
  // node's) claims it anew, acknowledged once the replica answers, with a larger token.
  for (const RunQuery& q : {RunQuery{.job_id = "j"}, RunQuery{}}) {
    Result<RunPage> page = c->ListRuns(q);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_EQ(page->runs.size(), 1u);
    EXPECT_EQ(page->runs[0].run_id, first->claim->fire.RunId());
  }
  const std::string b = o.prefix + ":default";
  EXPECT_EQ(Leases(raw, b),
            std::vector<std::string>{
                "j " + std::to_string(first->claim->fire.scheduled_at.unix_millis()) + ":0"});
  Result<ClaimOutcome> retried = c->Claim(Req(unacked, "other"));
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  ASSERT_EQ(retried->result, R::kClaimed);
  EXPECT_GT(retried->claim->fencing_token, first->claim->fencing_token);
  EXPECT_EQ(retried->claim->node_id, "other");
  Result<ClaimOutcome> third = c->Claim(Req(Fire("j", now), "n"));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->result, R::kClaimed);

  RedisOptions bad = o;
  bad.wait_timeout = o.io_timeout;
  EXPECT_EQ(RedisCoordinator::Open(bad).status().code(), StatusCode::kInvalidArgument);
}

// Under Sentinel, a failover tells the routes listeners (ClaimStore::AddRoutesListener) once,
// when the first of the store's connections finds the promoted primary, so the scheduler makes
// the claims that failed meanwhile at once; asking the sentinels again and hearing the same
// primary (each other connection's reconnect) tells nobody.
TEST(RedisCoordinatorTest, ASentinelFailoverCallsTheRoutesListenersOnce) {
  SKIP_WITHOUT_REDIS();
  RedisServer primary({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(primary.Start());
  RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(primary.port())});
  ASSERT_TRUE(replica.Start());
  RedisServer sentinel;
  ASSERT_TRUE(sentinel.StartSentinel(primary.port()));
  Raw ask(sentinel.port());
  bool knows = false;  // the sentinel learns of the replica from the primary's INFO
  for (int i = 0; i < 300 && !knows; ++i) {
    knows = ask.Str({"INFO", "sentinel"}).find("slaves=1") != std::string::npos;
    if (!knows) RealWait(milliseconds(100));
  }
  ASSERT_TRUE(knows) << "the sentinel did not find the replica";
  RedisOptions o = OptionsFor(primary.port());
  o.host = "127.0.0.1";
  o.port = 1;  // not used: the sentinel names the primary
  o.sentinels = {{"127.0.0.1", sentinel.port()}};
  o.sentinel_master = "gmaster";
  o.connections = 4;
  o.reconnect_backoff_min = milliseconds(100);
  o.reconnect_backoff_max = milliseconds(200);
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  std::atomic<int> calls{0};
  const int listener = c->AddRoutesListener([&] { ++calls; });
  const Instant now = *c->Now();
  ASSERT_TRUE(c->Claim(Req(Fire("j", now), "n")).ok());
  EXPECT_EQ(calls.load(), 0) << "the primary it started with";

  primary.Kill();
  // Claims fail until the sentinel has promoted the replica and a connection asks it again.
  Result<ClaimOutcome> after = UnavailableError("not tried");
  for (int i = 1; i <= 300 && !after.ok(); ++i) {
    after = c->Claim(Req(Fire("j", now + seconds(i)), "n"));
    if (!after.ok()) RealWait(milliseconds(100));
  }
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(ask.Array({"SENTINEL", "get-master-addr-by-name", "gmaster"}),
            (std::vector<std::string>{"127.0.0.1", std::to_string(replica.port())}));
  EXPECT_EQ(calls.load(), 1) << "the promoted primary, found";
  // Every connection of the pool gets to the promoted primary: no second call.
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(c->Claim(Req(Fire("k" + std::to_string(i), now), "n")).ok());
  }
  EXPECT_EQ(calls.load(), 1);
  c->RemoveRoutesListener(listener);
}

// Audit records written by the releases that stored an HTTP status list with its result, and a
// record written now keeps the number (and the set) an older release reads the same way.
TEST(RedisCoordinatorTest, AuditRecordsOfEarlierReleasesListWithTheirResults) {
  SKIP_WITHOUT_REDIS();
  RedisOptions o = OptionsFor(SharedServer()->port());
  auto c = MustOpen(o);
  ASSERT_NE(c, nullptr);
  Raw raw(SharedServer()->port());
  const std::string b = o.prefix + ":default";
  raw.Str({"ZADD", SharedBase(o) + ":audit", "1", "1\n1000\n3:ops6:delete1:a3:2042:{}0:"});
  raw.Str({"ZADD", SharedBase(o) + ":audit_failed", "2", "2\n2000\n2:ci5:pause1:b3:4010:0:"});
  raw.Str({"ZADD", SharedBase(o) + ":audit_failed", "3", "3\n3000\n2:ci7:replace1:b3:4120:0:"});
  Result<std::vector<AuditRecord>> all = c->ListAudit(10, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].result, AuditResult::kConflict);
  EXPECT_EQ((*all)[1].result, AuditResult::kDenied);
  EXPECT_EQ((*all)[2].result, AuditResult::kOk);
  EXPECT_EQ((*all)[2].before, "{}");
  AuditRecord limited;
  limited.who = "ci";
  limited.result = AuditResult::kRateLimited;
  ASSERT_TRUE(c->AppendAudit(limited, 10).ok());
  const std::vector<std::string> newest =
      raw.Array({"ZRANGE", SharedBase(o) + ":audit_failed", "-1", "-1"});
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_NE(newest[0].find("3:429"), std::string::npos) << newest[0];
}

// The scripts' group_of and the client's KeyGroup agree (the scripts build a job's keys, the
// client reads them) on ids of every length and character a job id may hold, and the groups are
// spread; GroupKeyOf takes exactly the per-job keys of the earlier layout.
TEST(RedisCoordinatorTest, TheScriptsAndTheClientPutAJobInTheSameGroup) {
  SKIP_WITHOUT_REDIS();
  std::string lua;
  for (const coord::redis_scripts::ScriptHelper& h : coord::redis_scripts::ScriptHelpers()) {
    if (std::string_view(h.name) == "group_of") lua = h.code;
  }
  ASSERT_FALSE(lua.empty());
  lua +=
      "local out = {}\nfor i = 1, #ARGV do out[i] = tostring(group_of(ARGV[i])) end\n"
      "return out\n";
  std::vector<std::string> argv = {"EVAL", lua, "0"};
  std::mt19937 rng(7);
  const std::string chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
  for (int i = 0; i < 3000; ++i) {
    std::string id(1 + rng() % 128, 'a');
    for (char& c : id) c = chars[rng() % chars.size()];
    argv.push_back(id);
  }
  Raw raw(SharedServer()->port());
  const std::vector<std::string> groups = raw.Array(argv);
  ASSERT_EQ(groups.size(), argv.size() - 3);
  std::set<int> seen;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int g = coord::redis::KeyGroup(argv[i + 3]);
    ASSERT_EQ(groups[i], std::to_string(g)) << argv[i + 3];
    seen.insert(g);
  }
  EXPECT_GT(seen.size(), 900u);  // 3,000 ids over 1,024 groups: ~967 expected

  using coord::redis::GroupKeyOf;
  const std::string b = "p:ns";
  const std::string a = coord::redis::GroupBase(b, coord::redis::KeyGroup("a")) + ":job:a";
  EXPECT_EQ(GroupKeyOf(b, "p:ns:{a}:state"), a + ":state");
  EXPECT_EQ(GroupKeyOf(b, "p:ns:{a}:fire:1700000000000:0"), a + ":fire:1700000000000:0");
  EXPECT_EQ(GroupKeyOf(b, "p:ns:{a}:run:1700000000000:0:2"), a + ":run:1700000000000:0:2");
  EXPECT_EQ(GroupKeyOf(b, "p:ns:{a}:live"), a + ":live");
  EXPECT_EQ(GroupKeyOf(b, "p:ns:{a}:runs"), a + ":runs");
  // An earlier job named "shared" or "g12" is a job; this layout's keys are not.
  EXPECT_TRUE(GroupKeyOf(b, "p:ns:{shared}:runs").has_value());
  EXPECT_TRUE(GroupKeyOf(b, "p:ns:{g12}:state").has_value());
  for (const char* key : {"p:ns:{~shared}:runs", "p:ns:{~shared}:leases", "p:ns:{g12}:job:a:state",
                          "p:ns:{a}:queue", "p:ns:{a}:stateX", "p:ns:{a b}:state", "p:ns:{}:state",
                          "p:ns:{a:state", "p:other:{a}:state", "p:ns:queue:default"}) {
    EXPECT_FALSE(GroupKeyOf(b, key).has_value()) << key;
  }
}

// A keyspace of the key-group layout on one primary is moved to the ledger layout with nothing
// lost (CheckKeyGroupMigration says what is checked).
TEST(RedisCoordinatorTest, AKeyspaceOfTheKeyGroupLayoutIsMigratedWithNothingLost) {
  SKIP_WITHOUT_REDIS();
  FakeClock clock;
  Raw raw(SharedServer()->port());
  CheckKeyGroupMigration(
      [&](const std::string&, const std::vector<std::string>& argv) { return raw.Str(argv); },
      [&](const std::string& pattern) { return raw.Keys(pattern); },
      OptionsFor(SharedServer()->port()), clock);
}

TEST(RedisCoordinatorTest, RejectsBadOptionsAndUnreachableServers) {
  RedisOptions o;
  o.prefix = "bad prefix";
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = RedisOptions{};
  o.fire_retention = seconds(5);
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = RedisOptions{};
  o.port = FreeLoopbackPort();  // nothing listens there
  EXPECT_EQ(RedisCoordinator::Open(o).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gnomon::testing
