#include "src/coord/coordinator_conformance.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

namespace gnomon::testing {

void CoordinatorConformanceTest::SetUp() {
  coord_ = GetParam().make(&clock_);
  ASSERT_NE(coord_, nullptr) << "factory " << GetParam().name << " returned no backend";
}

void CoordinatorConformanceTest::TearDown() { coord_.reset(); }

std::string CoordinatorFactoryName(const ::testing::TestParamInfo<CoordinatorFactory>& info) {
  return info.param.name;
}

namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

constexpr Duration kTtl = seconds(30);
constexpr int kThreads = 8;

FireKey Fire(const std::string& job, Instant at, int shard = 0, int shard_count = 1) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  f.shard = shard;
  f.shard_count = shard_count;
  return f;
}

ClaimRequest Req(const FireKey& fire, const std::string& node,
                 OverlapPolicy overlap = OverlapPolicy::kAllow, Duration ttl = kTtl) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = node;
  r.lease_ttl = ttl;
  r.overlap = overlap;
  return r;
}

// A final (or not) record of `claim`'s attempt with every field set.
RunRecord RecordOf(const Claim& claim, RunOutcome outcome, Instant started, Instant finished) {
  RunRecord r;
  r.run_id = claim.fire.RunId();
  r.job_id = claim.fire.job_id;
  r.scheduled_at = claim.fire.scheduled_at;
  r.shard = claim.fire.shard;
  r.shard_count = claim.fire.shard_count;
  r.attempt = claim.attempt;
  r.fencing_token = claim.fencing_token;
  r.node_id = claim.node_id;
  r.started_at = started;
  r.finished_at = finished;
  r.outcome = outcome;
  return r;
}

void ExpectSameRecord(const RunRecord& got, const RunRecord& want) {
  EXPECT_EQ(got.run_id, want.run_id);
  EXPECT_EQ(got.job_id, want.job_id);
  EXPECT_EQ(got.scheduled_at, want.scheduled_at);
  EXPECT_EQ(got.shard, want.shard);
  EXPECT_EQ(got.shard_count, want.shard_count);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.fencing_token, want.fencing_token);
  EXPECT_EQ(got.node_id, want.node_id);
  EXPECT_EQ(got.started_at, want.started_at);
  EXPECT_EQ(got.finished_at, want.finished_at);
  EXPECT_EQ(got.outcome, want.outcome);
  EXPECT_EQ(got.exit_code, want.exit_code);
  EXPECT_EQ(got.error, want.error);
  EXPECT_TRUE(got.output == want.output)
      << "output differs: " << got.output.size() << " vs " << want.output.size() << " bytes";
  EXPECT_EQ(got.skip_reason, want.skip_reason);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.cause, want.cause);
}

// Claims `req` or fails the test; `var` is the claim.
#define CLAIM_OR_FAIL(var, coord, req)                                    \
  ::gnomon::Claim var;                                                    \
  do {                                                                    \
    auto claim_result_ = (coord).Claim(req);                              \
    ASSERT_TRUE(claim_result_.ok()) << claim_result_.status().ToString(); \
    ASSERT_EQ(claim_result_->result, R::kClaimed);                        \
    ASSERT_TRUE(claim_result_->claim.has_value());                        \
    var = *claim_result_->claim;                                          \
  } while (false)

#define EXPECT_CODE(expr, want_code)                            \
  do {                                                          \
    ::gnomon::Status status_ = (expr);                          \
    EXPECT_EQ(status_.code(), want_code) << status_.ToString(); \
  } while (false)

#define ASSERT_OK(expr)                              \
  do {                                               \
    ::gnomon::Status status_ = (expr);               \
    ASSERT_TRUE(status_.ok()) << status_.ToString(); \
  } while (false)

std::vector<RunRecord> RunsOf(Coordinator& c, const std::string& run_id) {
  Result<std::vector<RunRecord>> r = c.GetRun(run_id);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
    return {};
  }
  return *r;
}

int64_t Version(Coordinator& c) {
  Result<int64_t> v = c.JobsVersion();
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

// Every record matching `q`, page by page; fails the test on an error.
std::vector<RunRecord> AllPages(Coordinator& c, RunQuery q, int* pages = nullptr) {
  std::vector<RunRecord> out;
  for (int i = 0; i < 10000; ++i) {
    Result<RunPage> page = c.ListRuns(q);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    if (pages) ++*pages;
    out.insert(out.end(), page->runs.begin(), page->runs.end());
    if (page->next_cursor.empty()) break;
    q.cursor = page->next_cursor;
  }
  return out;
}

// Runs `fn(thread_index)` on kThreads threads released together.
void RunConcurrently(const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::jthread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      fn(t);
    });
  }
  while (ready.load() < kThreads) std::this_thread::yield();
  go.store(true);
}

// --- Clock -----------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, NowIsTheBackendClock) {
  Result<Instant> now = coord_->Now();
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(*now, clock_.Now());
  clock_.Advance(seconds(90));
  EXPECT_EQ(*coord_->Now(), clock_.Now());
}

// --- Claim ------------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, ClaimCreatesARunningRecordAndLease) {
  const Instant t0 = clock_.Now();
  const FireKey fire = Fire("job-a", t0 - seconds(1));
  Result<ClaimOutcome> out = coord_->Claim(Req(fire, "node-1", OverlapPolicy::kForbid));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->result, R::kClaimed);
  EXPECT_EQ(out->backend_now, t0);
  EXPECT_TRUE(out->replaced.empty());
  ASSERT_TRUE(out->claim.has_value());
  const Claim& c = *out->claim;
  EXPECT_EQ(c.fire, fire);
  EXPECT_EQ(c.fire.shard_count, 1);
  EXPECT_EQ(c.attempt, 1);
  EXPECT_GT(c.fencing_token, 0);
  EXPECT_EQ(c.node_id, "node-1");
  EXPECT_EQ(c.lease_expires_at, t0 + kTtl);

  std::vector<RunRecord> runs =
      RunsOf(*coord_, "job-a@" + std::to_string(fire.scheduled_at.unix_millis()));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, fire.RunId());
  EXPECT_EQ(runs[0].job_id, "job-a");
  EXPECT_EQ(runs[0].scheduled_at, fire.scheduled_at);
  EXPECT_EQ(runs[0].attempt, 1);
  EXPECT_EQ(runs[0].fencing_token, c.fencing_token);
  EXPECT_EQ(runs[0].node_id, "node-1");
  EXPECT_EQ(runs[0].started_at, t0);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kRunning);

  Result<JobState> state = coord_->GetJobState("job-a");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->last_scheduled, fire.scheduled_at);
  EXPECT_FALSE(state->paused);
}

TEST_P(CoordinatorConformanceTest, SecondClaimOfAFireIsAlreadyClaimed) {
  const FireKey fire = Fire("job-a", clock_.Now());
  CLAIM_OR_FAIL(c, *coord_, Req(fire, "node-1"));
  for (const char* node : {"node-1", "node-2"}) {
    Result<ClaimOutcome> again = coord_->Claim(Req(fire, node));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->result, R::kAlreadyClaimed);
    EXPECT_FALSE(again->claim.has_value());
    EXPECT_EQ(again->backend_now, clock_.Now());
  }
  // Also after the fire finished and after its lease expired: a fire is claimed once, ever.
  ASSERT_OK(
      coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, clock_.Now(), clock_.Now()), true));
  clock_.Advance(hours(1));
  EXPECT_EQ(coord_->Claim(Req(fire, "node-3"))->result, R::kAlreadyClaimed);
  EXPECT_EQ(RunsOf(*coord_, fire.RunId()).size(), 1u);
}

TEST_P(CoordinatorConformanceTest, ShardsAreSeparateFires) {
  const Instant at = clock_.Now();
  std::vector<int64_t> tokens;
  for (int shard = 0; shard < 3; ++shard) {
    CLAIM_OR_FAIL(c, *coord_, Req(Fire("sharded", at, shard, 3), "n", OverlapPolicy::kForbid));
    EXPECT_EQ(c.fire.shard, shard);
    EXPECT_EQ(c.fire.shard_count, 3);
    tokens.push_back(c.fencing_token);
    std::vector<RunRecord> runs = RunsOf(
        *coord_, "sharded@" + std::to_string(at.unix_millis()) + "#" + std::to_string(shard));
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].shard, shard);
    EXPECT_EQ(runs[0].shard_count, 3);
  }
  EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end()));
  EXPECT_EQ(coord_->Claim(Req(Fire("sharded", at, 1, 3), "m"))->result, R::kAlreadyClaimed);
}

TEST_P(CoordinatorConformanceTest, InvalidClaimRequestsAreRejected) {
  const Instant at = clock_.Now();
  auto code_of = [&](const ClaimRequest& req) { return coord_->Claim(req).status().code(); };
  EXPECT_EQ(code_of(Req(Fire("bad/id", at), "n")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(Req(Fire("", at), "n")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(Req(Fire("j", at), "")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(Req(Fire("j", at), "n", OverlapPolicy::kAllow, Duration(0))),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(Req(Fire("j", at, 3, 3), "n")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(Req(Fire("j", at, -1, 3), "n")), StatusCode::kInvalidArgument);
  EXPECT_TRUE(RunsOf(*coord_, Fire("j", at).RunId()).empty());
}

TEST_P(CoordinatorConformanceTest, ConcurrentClaimsHaveExactlyOneWinnerPerFire) {
  constexpr int kFires = 200;
  const Instant base = clock_.Now() - hours(1);
  std::vector<std::vector<R>> results(kThreads, std::vector<R>(kFires, R::kTooEarly));
  std::vector<std::vector<int64_t>> tokens(kThreads, std::vector<int64_t>(kFires, 0));
  std::atomic<int> errors{0};
  RunConcurrently([&](int t) {
    for (int i = 0; i < kFires; ++i) {
      // Threads walk the fires in different orders to vary who meets whom.
      const int f = (t % 2 == 0) ? i : kFires - 1 - i;
      Result<ClaimOutcome> out =
          coord_->Claim(Req(Fire("race", base + seconds(f)), "node-" + std::to_string(t)));
      if (!out.ok()) {
        errors.fetch_add(1);
        continue;
      }
      results[t][f] = out->result;
      if (out->claim) tokens[t][f] = out->claim->fencing_token;
    }
  });
  EXPECT_EQ(errors.load(), 0);
  std::set<int64_t> distinct;
  for (int f = 0; f < kFires; ++f) {
    int claimed = 0;
    for (int t = 0; t < kThreads; ++t) {
      if (results[t][f] == R::kClaimed) {
        ++claimed;
        distinct.insert(tokens[t][f]);
      } else {
        EXPECT_EQ(results[t][f], R::kAlreadyClaimed);
      }
    }
    EXPECT_EQ(claimed, 1) << "fire " << f;
    EXPECT_EQ(RunsOf(*coord_, Fire("race", base + seconds(f)).RunId()).size(), 1u);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kFires));
}

// --- Early-fire guard ------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, EarlyFireGuardUsesTheBackendClock) {
  const Instant now = clock_.Now();
  const FireKey early = Fire("j", now + milliseconds(501));
  Result<ClaimOutcome> out = coord_->Claim(Req(early, "n"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->result, R::kTooEarly);
  EXPECT_FALSE(out->claim.has_value());
  EXPECT_EQ(out->backend_now, now);
  EXPECT_TRUE(RunsOf(*coord_, early.RunId()).empty()) << "a refused early fire leaves no record";
  EXPECT_FALSE(coord_->GetJobState("j")->last_scheduled.has_value());

  // Exactly at the tolerance is allowed.
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", now + milliseconds(500)), "n"));
  (void)c;

  // A custom tolerance, including zero.
  ClaimRequest strict = Req(Fire("k", now + milliseconds(1)), "n");
  strict.skew_tolerance = Duration(0);
  EXPECT_EQ(coord_->Claim(strict)->result, R::kTooEarly);
  strict.fire.scheduled_at = now;
  EXPECT_EQ(coord_->Claim(strict)->result, R::kClaimed);

  // Once the backend clock moves, the refused fire can be claimed.
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(coord_->Claim(Req(early, "n"))->result, R::kClaimed);
}

// --- Overlap ---------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, OverlapForbidRecordsTheFireAsSkippedOnce) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(1)), "node-1", OverlapPolicy::kForbid));
  const FireKey b = Fire("j", t0);
  Result<ClaimOutcome> out = coord_->Claim(Req(b, "node-2", OverlapPolicy::kForbid));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->result, R::kOverlap);
  EXPECT_FALSE(out->claim.has_value());
  // Other nodes trying the same fire: it already has its (skipped) record.
  EXPECT_EQ(coord_->Claim(Req(b, "node-3", OverlapPolicy::kForbid))->result, R::kAlreadyClaimed);
  EXPECT_EQ(coord_->Claim(Req(b, "node-1", OverlapPolicy::kAllow))->result, R::kAlreadyClaimed);

  std::vector<RunRecord> runs = RunsOf(*coord_, b.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(runs[0].skip_reason, "overlap");
  EXPECT_EQ(runs[0].node_id, "node-2");
  EXPECT_EQ(runs[0].fencing_token, 0);
  EXPECT_EQ(runs[0].attempt, 1);
  EXPECT_EQ(runs[0].started_at, t0);
  EXPECT_EQ(coord_->GetJobState("j")->last_scheduled, b.scheduled_at);
  // The running fire is untouched.
  EXPECT_TRUE(coord_->Renew(a, kTtl).ok());
}

TEST_P(CoordinatorConformanceTest, ConcurrentOverlapForbidSkipsOnce) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(1)), "holder"));
  (void)a;
  const FireKey b = Fire("j", t0);
  std::vector<R> results(kThreads, R::kClaimed);
  RunConcurrently([&](int t) {
    Result<ClaimOutcome> out =
        coord_->Claim(Req(b, "node-" + std::to_string(t), OverlapPolicy::kForbid));
    if (out.ok()) results[t] = out->result;
  });
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kOverlap), 1);
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kAlreadyClaimed), kThreads - 1);
  std::vector<RunRecord> runs = RunsOf(*coord_, b.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].skip_reason, "overlap");
}

TEST_P(CoordinatorConformanceTest, OverlapForbidIgnoresFinishedExpiredAndOtherJobs) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(3)), "n", OverlapPolicy::kForbid));
  ASSERT_OK(coord_->Report(a, RecordOf(a, RunOutcome::kSucceeded, t0, t0), true));
  // Another job's live run does not count.
  CLAIM_OR_FAIL(other, *coord_, Req(Fire("other", t0 - minutes(3)), "n"));
  (void)other;
  CLAIM_OR_FAIL(b, *coord_, Req(Fire("j", t0 - minutes(2)), "n", OverlapPolicy::kForbid));
  // b's lease expires unrenewed: it is no longer live.
  clock_.Advance(kTtl);
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0 - minutes(1)), "n", OverlapPolicy::kForbid));
  (void)b;
  (void)c;
}

TEST_P(CoordinatorConformanceTest, OverlapAllowRunsConcurrently) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(1)), "n", OverlapPolicy::kAllow));
  CLAIM_OR_FAIL(b, *coord_, Req(Fire("j", t0), "n", OverlapPolicy::kAllow));
  EXPECT_TRUE(coord_->Renew(a, kTtl).ok());
  EXPECT_TRUE(coord_->Renew(b, kTtl).ok());
  EXPECT_GT(b.fencing_token, a.fencing_token);
}

TEST_P(CoordinatorConformanceTest, OverlapReplaceRevokesTheOldLease) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(1)), "node-1"));
  ASSERT_OK(coord_->SaveCheckpoint(a, "a-progress"));
  Result<ClaimOutcome> out = coord_->Claim(Req(Fire("j", t0), "node-2", OverlapPolicy::kReplace));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->result, R::kClaimed);
  ASSERT_EQ(out->replaced.size(), 1u);
  EXPECT_EQ(out->replaced[0], a.fire);
  EXPECT_GT(out->claim->fencing_token, a.fencing_token);

  Claim stale = a;
  EXPECT_CODE(coord_->Renew(stale, kTtl), StatusCode::kLeaseLost);
  EXPECT_CODE(coord_->Report(a, RecordOf(a, RunOutcome::kSucceeded, t0, t0), true),
              StatusCode::kLeaseLost);
  EXPECT_CODE(coord_->SaveCheckpoint(a, "late"), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->LoadCheckpoint(a.fire)->value_or(""), "a-progress");
  EXPECT_EQ(coord_->NextAttempt(a, kTtl).status().code(), StatusCode::kLeaseLost);

  // The replaced run is closed as cancelled, never left running nor reported as expired.
  std::vector<RunRecord> runs = RunsOf(*coord_, a.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kCancelled);
  clock_.Advance(hours(1));
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(100);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);  // only the new fire, whose lease ran out
  EXPECT_EQ((*expired)[0].fire, out->claim->fire);
  // Replacing when nothing runs lists nothing.
  Result<ClaimOutcome> quiet =
      coord_->Claim(Req(Fire("k", clock_.Now()), "n", OverlapPolicy::kReplace));
  ASSERT_TRUE(quiet.ok());
  EXPECT_EQ(quiet->result, R::kClaimed);
  EXPECT_TRUE(quiet->replaced.empty());
}

TEST_P(CoordinatorConformanceTest, OverlapReplaceDoesNotRevokeSiblingShards) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(s0, *coord_, Req(Fire("j", t0, 0, 2), "n"));
  Result<ClaimOutcome> s1 = coord_->Claim(Req(Fire("j", t0, 1, 2), "n", OverlapPolicy::kReplace));
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->result, R::kClaimed);
  EXPECT_TRUE(s1->replaced.empty());
  EXPECT_TRUE(coord_->Renew(s0, kTtl).ok());
}

// --- Paused jobs -----------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, PausedJobsAreSkippedOnce) {
  const Instant t0 = clock_.Now();
  ASSERT_OK(coord_->SetPaused("j", true, "api"));
  Result<JobState> state = coord_->GetJobState("j");
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->paused);
  EXPECT_EQ(state->pause_reason, "api");

  const FireKey fire = Fire("j", t0);
  std::vector<R> results(kThreads, R::kClaimed);
  RunConcurrently([&](int t) {
    Result<ClaimOutcome> out = coord_->Claim(Req(fire, "node-" + std::to_string(t)));
    if (out.ok()) results[t] = out->result;
  });
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kPaused), 1);
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kAlreadyClaimed), kThreads - 1);
  std::vector<RunRecord> runs = RunsOf(*coord_, fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(runs[0].skip_reason, "paused");
  EXPECT_EQ(runs[0].fencing_token, 0);
  EXPECT_EQ(coord_->GetJobState("j")->last_scheduled, t0);

  // Other jobs are not affected; resuming lets the next fire run.
  EXPECT_EQ(coord_->Claim(Req(Fire("k", t0), "n"))->result, R::kClaimed);
  ASSERT_OK(coord_->SetPaused("j", false, "api"));
  state = coord_->GetJobState("j");
  EXPECT_FALSE(state->paused);
  EXPECT_EQ(state->pause_reason, "");
  EXPECT_EQ(
      coord_->Claim(Req(Fire("j", t0 + seconds(1)), "n", OverlapPolicy::kAllow, kTtl))->result,
      R::kTooEarly);
  clock_.Advance(seconds(1));
  EXPECT_EQ(coord_->Claim(Req(Fire("j", t0 + seconds(1)), "n"))->result, R::kClaimed);
}

// --- Fencing tokens ---------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, FencingTokensStrictlyIncreasePerJob) {
  const Instant t0 = clock_.Now();
  std::vector<int64_t> tokens;
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(5)), "n"));
  tokens.push_back(a.fencing_token);
  Result<Claim> a2 = coord_->NextAttempt(a, kTtl);
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  tokens.push_back(a2->fencing_token);
  CLAIM_OR_FAIL(other, *coord_, Req(Fire("other-job", t0 - minutes(5)), "n"));
  (void)other;
  CLAIM_OR_FAIL(b, *coord_, Req(Fire("j", t0 - minutes(4)), "n"));
  tokens.push_back(b.fencing_token);
  clock_.Advance(kTtl);
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  for (const ExpiredFire& e : *expired) {
    if (e.fire.job_id != "j") continue;
    Result<std::optional<Claim>> rerun = coord_->ResolveLost(e, "m", LostPolicy::kRerun, kTtl);
    ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
    ASSERT_TRUE(rerun->has_value());
    tokens.push_back((*rerun)->fencing_token);
  }
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", clock_.Now()), "n"));
  tokens.push_back(c.fencing_token);
  ASSERT_EQ(tokens.size(), 6u);
  for (size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]) << i;
}

// --- Renew -----------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, RenewExtendsTheLease) {
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", clock_.Now()), "n"));
  clock_.Advance(seconds(20));
  ASSERT_OK(coord_->Renew(c, seconds(30)));
  EXPECT_EQ(c.lease_expires_at, clock_.Now() + seconds(30));
  clock_.Advance(seconds(25));  // past the original expiry, within the renewed one
  ASSERT_OK(coord_->Renew(c, seconds(10)));
  EXPECT_EQ(c.lease_expires_at, clock_.Now() + seconds(10));
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  EXPECT_TRUE(expired->empty());
  EXPECT_CODE(coord_->Renew(c, Duration(0)), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, RenewFailsAfterExpiry) {
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", clock_.Now()), "n"));
  const Instant before = c.lease_expires_at;
  clock_.Advance(kTtl);  // exactly at expiry: the lease is gone
  EXPECT_CODE(coord_->Renew(c, kTtl), StatusCode::kLeaseLost);
  EXPECT_EQ(c.lease_expires_at, before);
  EXPECT_CODE(
      coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, clock_.Now(), clock_.Now()), true),
      StatusCode::kLeaseLost);
  EXPECT_CODE(coord_->SaveCheckpoint(c, "x"), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->NextAttempt(c, kTtl).status().code(), StatusCode::kLeaseLost);
}

TEST_P(CoordinatorConformanceTest, RenewFailsAfterReleaseAndWithAStaleToken) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "n"));
  Claim forged = c;
  forged.fencing_token = c.fencing_token - 1;
  EXPECT_CODE(coord_->Renew(forged, kTtl), StatusCode::kLeaseLost);
  forged.fencing_token = c.fencing_token + 1;
  EXPECT_CODE(coord_->Renew(forged, kTtl), StatusCode::kLeaseLost);
  Claim never = c;
  never.fire = Fire("j", t0 - minutes(1));
  EXPECT_CODE(coord_->Renew(never, kTtl), StatusCode::kLeaseLost);

  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, t0, t0), true));
  EXPECT_CODE(coord_->Renew(c, kTtl), StatusCode::kLeaseLost);
  EXPECT_CODE(coord_->Report(c, RecordOf(c, RunOutcome::kFailed, t0, t0), true),
              StatusCode::kLeaseLost);
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].outcome, RunOutcome::kSucceeded);
}

// --- NextAttempt -----------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, NextAttemptStartsAFencedRetry) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c1, *coord_, Req(Fire("j", t0), "node-1"));
  RunRecord failed = RecordOf(c1, RunOutcome::kFailed, t0, t0 + seconds(1));
  failed.exit_code = 3;
  clock_.Advance(seconds(2));
  ASSERT_OK(coord_->Report(c1, failed, false));
  ASSERT_OK(coord_->Renew(c1, kTtl));  // a non-final report keeps the lease
  clock_.Advance(seconds(10));
  Result<Claim> c2 = coord_->NextAttempt(c1, seconds(40));
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  EXPECT_EQ(c2->fire, c1.fire);
  EXPECT_EQ(c2->attempt, 2);
  EXPECT_GT(c2->fencing_token, c1.fencing_token);
  EXPECT_EQ(c2->node_id, "node-1");
  EXPECT_EQ(c2->lease_expires_at, clock_.Now() + seconds(40));
  // The first attempt's claim is fenced off now.
  EXPECT_CODE(coord_->Renew(c1, kTtl), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->NextAttempt(c1, kTtl).status().code(), StatusCode::kLeaseLost);

  std::vector<RunRecord> runs = RunsOf(*coord_, c1.fire.RunId());
  ASSERT_EQ(runs.size(), 2u);
  ExpectSameRecord(runs[0], failed);
  EXPECT_EQ(runs[1].attempt, 2);
  EXPECT_EQ(runs[1].outcome, RunOutcome::kRunning);
  EXPECT_EQ(runs[1].fencing_token, c2->fencing_token);
  EXPECT_EQ(runs[1].started_at, clock_.Now());

  ASSERT_OK(
      coord_->Report(*c2, RecordOf(*c2, RunOutcome::kSucceeded, clock_.Now(), clock_.Now()), true));
  EXPECT_EQ(coord_->NextAttempt(*c2, kTtl).status().code(), StatusCode::kLeaseLost);
}

// --- Report ----------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, ReportedRecordsRoundTripExactly) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("round.trip_1", t0 - seconds(7), 2, 4), "node-x"));
  RunRecord r = RecordOf(c, RunOutcome::kFailed, t0 + milliseconds(13), t0 + milliseconds(98765));
  r.exit_code = -9;
  r.error = "killed by signal 9; \"quoted\" \n second line \xc3\xa9";
  r.output.resize(kMaxOutputBytes);
  for (size_t i = 0; i < r.output.size(); ++i) r.output[i] = static_cast<char>((i * 7919) % 256);
  r.skip_reason = "";
  r.params = R"({"month":"2026-11","note":"a \"quoted\" caf\u00e9 Ã©","n":[1,2.5,null]})";
  r.cause = "rerun by ops \"quoted\"";
  ASSERT_OK(coord_->Report(c, r, true));
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  ExpectSameRecord(runs[0], r);
  Result<RunPage> page = coord_->ListRuns(RunQuery{.job_id = "round.trip_1"});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->runs.size(), 1u);
  ExpectSameRecord(page->runs[0], r);

  // No exit code, empty strings.
  CLAIM_OR_FAIL(d, *coord_, Req(Fire("round.trip_1", t0), "node-y"));
  RunRecord s = RecordOf(d, RunOutcome::kTimedOut, t0, t0);
  ASSERT_OK(coord_->Report(d, s, true));
  std::vector<RunRecord> d_runs = RunsOf(*coord_, d.fire.RunId());
  ASSERT_EQ(d_runs.size(), 1u);
  ExpectSameRecord(d_runs[0], s);
  EXPECT_FALSE(d_runs[0].exit_code.has_value());

  // Parameters larger than a job may carry are refused, and the record keeps what it had.
  CLAIM_OR_FAIL(e, *coord_, Req(Fire("round.trip_1", t0 - seconds(1)), "node-z"));
  RunRecord big = RecordOf(e, RunOutcome::kSucceeded, t0, t0);
  big.params = "{\"k\":\"" + std::string(kMaxParamsBytes, 'x') + "\"}";
  EXPECT_EQ(coord_->Report(e, big, true).code(), StatusCode::kInvalidArgument);
  std::vector<RunRecord> e_runs = RunsOf(*coord_, e.fire.RunId());
  ASSERT_EQ(e_runs.size(), 1u);
  EXPECT_EQ(e_runs[0].outcome, RunOutcome::kRunning);
  EXPECT_EQ(e_runs[0].params, "");
}

TEST_P(CoordinatorConformanceTest, ReportKeepsTheLastOutputBytes) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "n"));
  RunRecord r = RecordOf(c, RunOutcome::kSucceeded, t0, t0);
  r.output = std::string(1000, 'a') + std::string(kMaxOutputBytes - 1, 'b') + "Z";
  ASSERT_OK(coord_->Report(c, r, true));
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].output.size(), kMaxOutputBytes);
  EXPECT_EQ(runs[0].output, std::string(kMaxOutputBytes - 1, 'b') + "Z");
}

TEST_P(CoordinatorConformanceTest, ReportRejectsARecordOfAnotherClaim) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "n"));
  const RunRecord good = RecordOf(c, RunOutcome::kSucceeded, t0, t0);
  RunRecord r = good;
  r.run_id = "j@1";
  EXPECT_CODE(coord_->Report(c, r, true), StatusCode::kInvalidArgument);
  r = good;
  r.attempt = 2;
  EXPECT_CODE(coord_->Report(c, r, true), StatusCode::kInvalidArgument);
  r = good;
  r.fencing_token += 1;
  EXPECT_CODE(coord_->Report(c, r, true), StatusCode::kInvalidArgument);
  r = good;
  r.outcome = RunOutcome::kRunning;
  EXPECT_CODE(coord_->Report(c, r, true), StatusCode::kInvalidArgument);
  EXPECT_TRUE(coord_->Report(c, r, false).ok());  // a progress update may say running
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].outcome, RunOutcome::kRunning);
  ASSERT_OK(coord_->Renew(c, kTtl));
}

TEST_P(CoordinatorConformanceTest, ReportManyAnswersEachRequestLikeReport) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("r1", t0), "n"));
  CLAIM_OR_FAIL(b, *coord_, Req(Fire("r2", t0), "n"));
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("r3", t0), "n"));
  CLAIM_OR_FAIL(d, *coord_, Req(Fire("r4", t0), "n"));
  Claim stale = b;
  stale.fencing_token += 1000;  // a token b's fire never had
  const RunRecord ok_a = RecordOf(a, RunOutcome::kSucceeded, t0, t0);
  const RunRecord failed_b = RecordOf(stale, RunOutcome::kFailed, t0, t0);
  RunRecord running_c = RecordOf(c, RunOutcome::kSucceeded, t0, t0);
  running_c.outcome = RunOutcome::kRunning;  // not final: a progress update
  RunRecord bad_d = RecordOf(d, RunOutcome::kSucceeded, t0, t0);
  bad_d.attempt = 2;  // not d's attempt
  const RunRecord failed_d = RecordOf(d, RunOutcome::kFailed, t0, t0);
  std::vector<Status> out = coord_->ReportMany({{&a, &ok_a, true},
                                                {&stale, &failed_b, true},
                                                {&c, &running_c, false},
                                                {&d, &bad_d, true},
                                                {&d, &failed_d, true},
                                                {&a, &ok_a, true}});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_TRUE(out[0].ok()) << out[0].ToString();
  EXPECT_CODE(out[1], StatusCode::kLeaseLost);
  EXPECT_TRUE(out[2].ok()) << out[2].ToString();
  EXPECT_CODE(out[3], StatusCode::kInvalidArgument);
  EXPECT_TRUE(out[4].ok()) << out[4].ToString();
  EXPECT_CODE(out[5], StatusCode::kLeaseLost);  // the first report released the fire
  EXPECT_EQ(RunsOf(*coord_, a.fire.RunId())[0].outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(RunsOf(*coord_, b.fire.RunId())[0].outcome, RunOutcome::kRunning);
  ASSERT_OK(coord_->Renew(b, kTtl));  // b still holds its fire
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].outcome, RunOutcome::kRunning);
  ASSERT_OK(coord_->Renew(c, kTtl));  // a report that is not final keeps the lease
  EXPECT_EQ(RunsOf(*coord_, d.fire.RunId())[0].outcome, RunOutcome::kFailed);
  EXPECT_EQ(coord_->GetJobState("r4")->consecutive_failures, 1);
  // More reports than one backend round trip's chunk: each answered.
  std::vector<Claim> claims;
  std::vector<RunRecord> records;
  for (int i = 0; i < 150; ++i) {
    CLAIM_OR_FAIL(m, *coord_, Req(Fire("m" + std::to_string(i), t0), "n"));
    claims.push_back(m);
  }
  for (const Claim& m : claims) records.push_back(RecordOf(m, RunOutcome::kSucceeded, t0, t0));
  std::vector<ReportRequest> many;
  for (size_t i = 0; i < claims.size(); ++i) many.push_back({&claims[i], &records[i], true});
  std::vector<Status> all = coord_->ReportMany(many);
  ASSERT_EQ(all.size(), many.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(all[i].ok()) << i << ": " << all[i].ToString();
    EXPECT_EQ(RunsOf(*coord_, claims[i].fire.RunId())[0].outcome, RunOutcome::kSucceeded) << i;
  }
  EXPECT_TRUE(coord_->ReportMany({}).empty());
}

TEST_P(CoordinatorConformanceTest, FinalReportReleasesTheFire) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "n"));
  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kFailed, t0, t0), false));
  clock_.Advance(seconds(1));
  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, t0, clock_.Now()), true));
  clock_.Advance(hours(2));
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  EXPECT_TRUE(expired->empty());
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);  // the same attempt reported twice: the last report wins
  EXPECT_EQ(runs[0].outcome, RunOutcome::kSucceeded);
  // The job can run its next fire under overlap = forbid.
  EXPECT_EQ(coord_->Claim(Req(Fire("j", clock_.Now()), "n", OverlapPolicy::kForbid))->result,
            R::kClaimed);
}

TEST_P(CoordinatorConformanceTest, ConsecutiveFailuresFollowFinalOutcomes) {
  Instant at = clock_.Now() - hours(1);
  auto finish = [&](RunOutcome outcome, bool final) {
    at += seconds(1);
    Result<ClaimOutcome> out = coord_->Claim(Req(Fire("j", at), "n"));
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(out->result, R::kClaimed);
    const Claim& c = *out->claim;
    ASSERT_OK(coord_->Report(c, RecordOf(c, outcome, at, at), final));
  };
  auto failures = [&] { return coord_->GetJobState("j")->consecutive_failures; };
  EXPECT_EQ(failures(), 0);
  finish(RunOutcome::kFailed, true);
  EXPECT_EQ(failures(), 1);
  finish(RunOutcome::kTimedOut, true);
  EXPECT_EQ(failures(), 2);
  finish(RunOutcome::kCancelled, true);
  EXPECT_EQ(failures(), 2);
  finish(RunOutcome::kSkipped, true);
  EXPECT_EQ(failures(), 2);
  finish(RunOutcome::kFailed, false);  // not final: not counted
  EXPECT_EQ(failures(), 2);
  finish(RunOutcome::kLost, true);
  EXPECT_EQ(failures(), 3);
  finish(RunOutcome::kSucceeded, true);
  EXPECT_EQ(failures(), 0);
  // A lost run resolved with on_lost = fail counts too.
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", clock_.Now()), "n"));
  clock_.Advance(kTtl);
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(100);
  ASSERT_TRUE(expired.ok());
  for (const ExpiredFire& e : *expired) {
    if (e.fire == c.fire) {
      ASSERT_TRUE(coord_->ResolveLost(e, "m", LostPolicy::kFail, kTtl).ok());
    }
  }
  EXPECT_EQ(failures(), 1);
}

// --- Lost runs -------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, ListExpiredListsUnreportedFiresOldestFirst) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("a", t0), "node-a", OverlapPolicy::kAllow, seconds(30)));
  CLAIM_OR_FAIL(b, *coord_, Req(Fire("b", t0), "node-b", OverlapPolicy::kAllow, seconds(10)));
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("c", t0), "node-c", OverlapPolicy::kAllow, seconds(20)));
  CLAIM_OR_FAIL(done, *coord_, Req(Fire("d", t0), "node-d", OverlapPolicy::kAllow, seconds(5)));
  ASSERT_OK(coord_->Report(done, RecordOf(done, RunOutcome::kSucceeded, t0, t0), true));
  CLAIM_OR_FAIL(kept, *coord_, Req(Fire("e", t0), "node-e", OverlapPolicy::kAllow, seconds(5)));
  ASSERT_OK(coord_->Report(kept, RecordOf(kept, RunOutcome::kFailed, t0, t0), false));

  EXPECT_TRUE(coord_->ListExpired(10)->empty());
  clock_.Advance(seconds(9));
  ASSERT_OK(coord_->Renew(c, seconds(100)));
  clock_.Advance(seconds(1));  // t0+10: b (and e, non-finally reported) expired
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 2u);
  EXPECT_EQ((*expired)[0].fire, kept.fire);  // expired at t0+5
  EXPECT_EQ((*expired)[1].fire, b.fire);
  EXPECT_EQ((*expired)[1].attempt, 1);
  EXPECT_EQ((*expired)[1].fencing_token, b.fencing_token);
  EXPECT_EQ((*expired)[1].node_id, "node-b");
  EXPECT_EQ((*expired)[1].lease_expired_at, t0 + seconds(10));
  clock_.Advance(seconds(20));  // t0+30: a as well; c was renewed
  expired = coord_->ListExpired(10);
  ASSERT_EQ(expired->size(), 3u);
  EXPECT_EQ((*expired)[2].fire, a.fire);
  expired = coord_->ListExpired(2);
  ASSERT_EQ(expired->size(), 2u);
  EXPECT_EQ((*expired)[0].fire, kept.fire);
  EXPECT_EQ(coord_->ListExpired(0).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, ResolveLostFailClosesTheFire) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "vanished"));
  ASSERT_OK(coord_->SaveCheckpoint(c, "cp"));
  clock_.Advance(kTtl + seconds(5));
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);
  const ExpiredFire e = (*expired)[0];
  Result<std::optional<Claim>> r = coord_->ResolveLost(e, "resolver", LostPolicy::kFail, kTtl);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());

  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kLost);
  EXPECT_EQ(runs[0].attempt, 1);
  EXPECT_EQ(runs[0].fencing_token, c.fencing_token);
  EXPECT_EQ(runs[0].node_id, "vanished");
  EXPECT_EQ(runs[0].finished_at, clock_.Now());
  EXPECT_TRUE(coord_->ListExpired(10)->empty());
  EXPECT_EQ(coord_->ResolveLost(e, "resolver", LostPolicy::kFail, kTtl).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_CODE(coord_->Renew(c, kTtl), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->Claim(Req(c.fire, "n"))->result, R::kAlreadyClaimed);
}

// --- CancelFire ------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, CancelRevokesTheLeaseAndRecordsWhoCancelled) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("cancel.me", t0, 1, 2), "holder"));
  const int64_t version = Version(*coord_);
  clock_.Advance(seconds(3));
  FireKey by_id = c.fire;
  by_id.shard_count = 2;
  ASSERT_OK(coord_->CancelFire(by_id, "cancelled by ops"));
  EXPECT_GT(Version(*coord_), version) << "every node's state poll must see the cancel";
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kCancelled);
  EXPECT_EQ(runs[0].error, "cancelled by ops");
  EXPECT_EQ(runs[0].finished_at, clock_.Now());
  EXPECT_EQ(runs[0].node_id, "holder");
  EXPECT_EQ(runs[0].fencing_token, c.fencing_token);
  // The holder is fenced off: no renewal, no next attempt, no report over the cancel.
  EXPECT_CODE(coord_->Renew(c, kTtl), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->NextAttempt(c, kTtl).status().code(), StatusCode::kLeaseLost);
  EXPECT_CODE(coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, t0, clock_.Now()), true),
              StatusCode::kLeaseLost);
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].outcome, RunOutcome::kCancelled);
  // Not a lost run, and not claimed again.
  clock_.Advance(kTtl + seconds(5));
  EXPECT_TRUE(coord_->ListExpired(10)->empty());
  EXPECT_EQ(coord_->Claim(Req(c.fire, "other"))->result, R::kAlreadyClaimed);
  // Twice: the run already ended, and nothing changes.
  EXPECT_CODE(coord_->CancelFire(by_id, "cancelled by someone else"),
              StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].error, "cancelled by ops");
  EXPECT_CODE(coord_->CancelFire(Fire("cancel.me", t0 - seconds(60)), "x"), StatusCode::kNotFound);
  EXPECT_CODE(coord_->CancelFire(Fire("no-such-job", t0), "x"), StatusCode::kNotFound);
}

TEST_P(CoordinatorConformanceTest, CancelOfAFinishedFireChangesNothing) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("cancel.done", t0), "holder"));
  RunRecord r = RecordOf(c, RunOutcome::kSucceeded, t0, t0 + seconds(1));
  ASSERT_OK(coord_->Report(c, r, true));
  const int64_t version = Version(*coord_);
  EXPECT_CODE(coord_->CancelFire(c.fire, "cancelled by ops"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Version(*coord_), version);
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  ExpectSameRecord(runs[0], r);
}

// Cancels sent to several nodes at once: the backend lets one through, the others find the run
// ended; the record names the one that won.
TEST_P(CoordinatorConformanceTest, ConcurrentCancelsHaveOneWinner) {
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("cancel.race", clock_.Now()), "holder"));
  std::vector<StatusCode> codes(kThreads, StatusCode::kInternal);
  RunConcurrently([&](int t) {
    codes[t] = coord_->CancelFire(c.fire, "cancelled by op-" + std::to_string(t)).code();
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kFailedPrecondition), kThreads - 1);
  const int winner =
      static_cast<int>(std::find(codes.begin(), codes.end(), StatusCode::kOk) - codes.begin());
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].error, "cancelled by op-" + std::to_string(winner));
}

// --- RerunFire -------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, RerunStartsTheNextAttemptOfAnEndedFire) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("rerun.me", t0, 1, 2), "gone-node"));
  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kFailed, t0, t0 + seconds(1)), true));
  clock_.Advance(seconds(5));
  FireKey by_id = c.fire;
  Result<Claim> r = coord_->RerunFire(by_id, "node-r", kTtl, "rerun by ops");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempt, 2);
  EXPECT_GT(r->fencing_token, c.fencing_token);
  EXPECT_EQ(r->node_id, "node-r");
  EXPECT_EQ(r->cause, "rerun by ops");
  EXPECT_EQ(r->fire.shard_count, 2);
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kFailed);
  EXPECT_EQ(runs[1].attempt, 2);
  EXPECT_EQ(runs[1].outcome, RunOutcome::kRunning);
  EXPECT_EQ(runs[1].fencing_token, r->fencing_token);
  EXPECT_EQ(runs[1].node_id, "node-r");
  EXPECT_EQ(runs[1].cause, "rerun by ops");
  // Held like any claim; the old one stays fenced off; no second rerun while it runs.
  ASSERT_OK(coord_->Renew(*r, kTtl));
  EXPECT_CODE(coord_->Renew(c, kTtl), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->RerunFire(by_id, "node-s", kTtl, "").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(coord_->Claim(Req(c.fire, "other"))->result, R::kAlreadyClaimed);
  RunRecord done = RecordOf(*r, RunOutcome::kSucceeded, clock_.Now(), clock_.Now());
  done.cause = r->cause;
  ASSERT_OK(coord_->Report(*r, done, true));
  ExpectSameRecord(RunsOf(*coord_, c.fire.RunId())[1], done);
  // And again: attempt 3.
  Result<Claim> again = coord_->RerunFire(by_id, "node-r", kTtl, "rerun by ops");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->attempt, 3);
  EXPECT_GT(again->fencing_token, r->fencing_token);
}

TEST_P(CoordinatorConformanceTest, RerunOfASkippedFireRunsIt) {
  const FireKey fire = Fire("rerun.skipped", clock_.Now() - minutes(5));
  ASSERT_OK(coord_->RecordSkipped(fire, "n", "misfire"));
  Result<Claim> r = coord_->RerunFire(fire, "node-r", kTtl, "rerun by ops");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempt, 2);
  EXPECT_GT(r->fencing_token, 0);
  std::vector<RunRecord> runs = RunsOf(*coord_, fire.RunId());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kSkipped);
  EXPECT_EQ(runs[1].outcome, RunOutcome::kRunning);
}

TEST_P(CoordinatorConformanceTest, RerunRefusesUnknownAndRunningFires) {
  EXPECT_EQ(coord_->RerunFire(Fire("rerun.none", clock_.Now()), "n", kTtl, "").status().code(),
            StatusCode::kNotFound);
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("rerun.busy", clock_.Now()), "holder"));
  EXPECT_EQ(coord_->RerunFire(c.fire, "n", kTtl, "").status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_OK(coord_->Renew(c, kTtl));  // a refused rerun changes nothing
  EXPECT_EQ(coord_->RerunFire(c.fire, "", kTtl, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_->RerunFire(c.fire, "n", kTtl, std::string(300, 'x')).status().code(),
            StatusCode::kInvalidArgument);
}

// A rerun whose node vanishes is a lost run like any other.
TEST_P(CoordinatorConformanceTest, ARerunWhoseNodeVanishesIsResolvedAsLost) {
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("rerun.lost", clock_.Now()), "first"));
  ASSERT_OK(
      coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, clock_.Now(), clock_.Now()), true));
  Result<Claim> r = coord_->RerunFire(c.fire, "vanished", kTtl, "rerun by ops");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  clock_.Advance(kTtl + seconds(5));
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].attempt, 2);
  Result<std::optional<Claim>> resolved =
      coord_->ResolveLost((*expired)[0], "resolver", LostPolicy::kFail, kTtl);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId()).back().outcome, RunOutcome::kLost);
}

TEST_P(CoordinatorConformanceTest, ConcurrentRerunsHaveOneWinner) {
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("rerun.race", clock_.Now()), "first"));
  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kFailed, clock_.Now(), clock_.Now()), true));
  std::vector<StatusCode> codes(kThreads, StatusCode::kInternal);
  RunConcurrently([&](int t) {
    codes[t] = coord_->RerunFire(c.fire, "node-" + std::to_string(t), kTtl, "").status().code();
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kFailedPrecondition), kThreads - 1);
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId()).size(), 2u);
}

// A fire waiting for its retry: the failed attempt keeps its outcome, no retry can start.
TEST_P(CoordinatorConformanceTest, CancelBetweenAttemptsStopsTheRetry) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("cancel.retry", t0), "holder"));
  RunRecord failed = RecordOf(c, RunOutcome::kFailed, t0, t0 + seconds(1));
  failed.error = "exit status 1";
  ASSERT_OK(coord_->Report(c, failed, false));
  ASSERT_OK(coord_->CancelFire(c.fire, "cancelled by ops"));
  EXPECT_EQ(coord_->NextAttempt(c, kTtl).status().code(), StatusCode::kLeaseLost);
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kFailed);
  EXPECT_EQ(runs[0].error, "exit status 1; retry cancelled by ops");
}

TEST_P(CoordinatorConformanceTest, ResolveLostRerunStartsTheNextAttempt) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "vanished"));
  ASSERT_OK(coord_->SaveCheckpoint(c, "half-way"));
  clock_.Advance(kTtl);
  Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);
  Result<std::optional<Claim>> r =
      coord_->ResolveLost((*expired)[0], "rescuer", LostPolicy::kRerun, seconds(45));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const Claim& c2 = **r;
  EXPECT_EQ(c2.fire, c.fire);
  EXPECT_EQ(c2.attempt, 2);
  EXPECT_GT(c2.fencing_token, c.fencing_token);
  EXPECT_EQ(c2.node_id, "rescuer");
  EXPECT_EQ(c2.lease_expires_at, clock_.Now() + seconds(45));

  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kLost);
  EXPECT_EQ(runs[0].node_id, "vanished");
  EXPECT_EQ(runs[0].fencing_token, c.fencing_token);
  EXPECT_EQ(runs[1].outcome, RunOutcome::kRunning);
  EXPECT_EQ(runs[1].node_id, "rescuer");
  EXPECT_EQ(runs[1].fencing_token, c2.fencing_token);

  // The vanished holder is fenced off; the rescuer continues from the checkpoint.
  EXPECT_CODE(coord_->SaveCheckpoint(c, "stale"), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->LoadCheckpoint(c.fire)->value_or(""), "half-way");
  EXPECT_TRUE(coord_->ListExpired(10)->empty());
  EXPECT_EQ(coord_->ResolveLost((*expired)[0], "x", LostPolicy::kRerun, kTtl).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_OK(
      coord_->Report(c2, RecordOf(c2, RunOutcome::kSucceeded, clock_.Now(), clock_.Now()), true));
}

TEST_P(CoordinatorConformanceTest, ResolveLostRefusesLiveAndUnknownFires) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "holder"));
  ExpiredFire e{c.fire, c.attempt, c.fencing_token, c.node_id, c.lease_expires_at};
  EXPECT_EQ(coord_->ResolveLost(e, "x", LostPolicy::kFail, kTtl).status().code(),
            StatusCode::kFailedPrecondition);
  clock_.Advance(kTtl);
  ExpiredFire wrong = e;
  wrong.fencing_token = c.fencing_token + 100;
  EXPECT_EQ(coord_->ResolveLost(wrong, "x", LostPolicy::kFail, kTtl).status().code(),
            StatusCode::kFailedPrecondition);
  ExpiredFire unknown = e;
  unknown.fire = Fire("j", t0 - hours(1));
  EXPECT_EQ(coord_->ResolveLost(unknown, "x", LostPolicy::kFail, kTtl).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].outcome, RunOutcome::kRunning);
}

TEST_P(CoordinatorConformanceTest, ResolveLostHappensOnceAcrossConcurrentCallers) {
  for (LostPolicy policy : {LostPolicy::kFail, LostPolicy::kRerun}) {
    SCOPED_TRACE(std::string(ToString(policy)));
    CLAIM_OR_FAIL(
        c, *coord_,
        Req(Fire(std::string("j-") + std::string(ToString(policy)), clock_.Now()), "vanished"));
    clock_.Advance(kTtl);
    Result<std::vector<ExpiredFire>> expired = coord_->ListExpired(10);
    ASSERT_TRUE(expired.ok());
    ASSERT_EQ(expired->size(), 1u);
    std::vector<StatusCode> codes(kThreads, StatusCode::kInternal);
    std::vector<int64_t> tokens(kThreads, 0);
    RunConcurrently([&](int t) {
      auto r = coord_->ResolveLost((*expired)[0], "node-" + std::to_string(t), policy, kTtl);
      codes[t] = r.status().code();
      if (r.ok() && r->has_value()) tokens[t] = (*r)->fencing_token;
    });
    EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kOk), 1);
    EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kFailedPrecondition),
              kThreads - 1);
    std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
    ASSERT_EQ(runs.size(), policy == LostPolicy::kFail ? 1u : 2u);
    EXPECT_EQ(runs[0].outcome, RunOutcome::kLost);
    if (policy == LostPolicy::kRerun) {
      EXPECT_EQ(std::count_if(tokens.begin(), tokens.end(), [&](int64_t t) { return t > 0; }), 1);
    }
  }
}

// --- RecordSkipped ---------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, RecordSkippedWritesOneRecord) {
  const Instant t0 = clock_.Now();
  const FireKey fire = Fire("j", t0 - hours(2), 1, 2);
  ASSERT_OK(coord_->RecordSkipped(fire, "node-1", "misfire"));
  EXPECT_CODE(coord_->RecordSkipped(fire, "node-2", "misfire"), StatusCode::kAlreadyExists);
  EXPECT_EQ(coord_->Claim(Req(fire, "node-3"))->result, R::kAlreadyClaimed);
  std::vector<RunRecord> runs = RunsOf(*coord_, fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  RunRecord want;
  want.run_id = fire.RunId();
  want.job_id = "j";
  want.scheduled_at = fire.scheduled_at;
  want.shard = 1;
  want.shard_count = 2;
  want.attempt = 1;
  want.fencing_token = 0;
  want.node_id = "node-1";
  want.started_at = t0;
  want.finished_at = t0;
  want.outcome = RunOutcome::kSkipped;
  want.skip_reason = "misfire";
  ExpectSameRecord(runs[0], want);
  EXPECT_EQ(coord_->GetJobState("j")->last_scheduled, fire.scheduled_at);

  // A claimed fire cannot be recorded as skipped; last_scheduled never moves back.
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", t0), "n"));
  EXPECT_CODE(coord_->RecordSkipped(c.fire, "n", "disabled"), StatusCode::kAlreadyExists);
  ASSERT_OK(coord_->RecordSkipped(Fire("j", t0 - hours(3)), "n", "misfire"));
  EXPECT_EQ(coord_->GetJobState("j")->last_scheduled, t0);
  EXPECT_CODE(coord_->RecordSkipped(Fire("no/such", t0), "n", "x"), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, ConcurrentRecordSkippedWritesOnce) {
  const FireKey fire = Fire("j", clock_.Now() - minutes(5));
  std::vector<StatusCode> codes(kThreads, StatusCode::kInternal);
  RunConcurrently([&](int t) {
    codes[t] = coord_->RecordSkipped(fire, "node-" + std::to_string(t), "misfire").code();
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kAlreadyExists), kThreads - 1);
  EXPECT_EQ(RunsOf(*coord_, fire.RunId()).size(), 1u);
}

// A claim's cause is in its running record and its Claim from the start, and stays in the
// report's record; a cause longer than kMaxCauseBytes is refused.
TEST_P(CoordinatorConformanceTest, AClaimsCauseIsInItsRunningRecord) {
  const Instant t0 = clock_.Now();
  ClaimRequest req = Req(Fire("j", t0), "n");
  req.cause = "backfill by ops";
  CLAIM_OR_FAIL(c, *coord_, req);
  EXPECT_EQ(c.cause, "backfill by ops");
  std::vector<RunRecord> runs = RunsOf(*coord_, c.fire.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, RunOutcome::kRunning);
  EXPECT_EQ(runs[0].cause, "backfill by ops");
  RunRecord done = RecordOf(c, RunOutcome::kSucceeded, t0, t0);
  done.cause = c.cause;
  ASSERT_OK(coord_->Report(c, done, true));
  EXPECT_EQ(RunsOf(*coord_, c.fire.RunId())[0].cause, "backfill by ops");
  // By schedule: no cause.
  CLAIM_OR_FAIL(plain, *coord_, Req(Fire("j", t0 - seconds(1)), "n"));
  EXPECT_EQ(RunsOf(*coord_, plain.fire.RunId())[0].cause, "");
  ClaimRequest long_cause = Req(Fire("j", t0 - seconds(2)), "n");
  long_cause.cause.assign(kMaxCauseBytes + 1, 'x');
  EXPECT_CODE(coord_->Claim(long_cause).status(), StatusCode::kInvalidArgument);
}

// --- Live output -----------------------------------------------------------------------------

// The running record carries what the attempt printed so far (fenced, cut to the last
// kMaxOutputBytes); a retry starts with none; the report replaces it.
TEST_P(CoordinatorConformanceTest, LiveOutputIsFencedAndShownInTheRunningRecord) {
  const Instant t0 = clock_.Now();
  const FireKey fire = Fire("j", t0);
  auto attempt_output = [&](int attempt) {
    for (const RunRecord& r : RunsOf(*coord_, fire.RunId())) {
      if (r.attempt == attempt) return r.output;
    }
    return std::string("<no record>");
  };
  CLAIM_OR_FAIL(c, *coord_, Req(fire, "n"));
  EXPECT_EQ(attempt_output(1), "");
  const std::string binary("line 1\n\0\xff", 9);
  ASSERT_OK(coord_->SaveLiveOutput(c, binary));
  EXPECT_EQ(attempt_output(1), binary);
  std::string big(kMaxOutputBytes + 100, 'x');
  big.replace(big.size() - 3, 3, "end");
  ASSERT_OK(coord_->SaveLiveOutput(c, big));
  EXPECT_EQ(attempt_output(1), big.substr(100));
  Claim stale = c;
  stale.fencing_token -= 1;
  EXPECT_CODE(coord_->SaveLiveOutput(stale, "stale"), StatusCode::kLeaseLost);
  EXPECT_EQ(attempt_output(1), big.substr(100));

  RunRecord failed = RecordOf(c, RunOutcome::kFailed, t0, t0);
  failed.output = "attempt 1 output";
  ASSERT_OK(coord_->Report(c, failed, false));
  Result<Claim> c2 = coord_->NextAttempt(c, kTtl);
  ASSERT_TRUE(c2.ok());
  EXPECT_CODE(coord_->SaveLiveOutput(c, "old attempt"), StatusCode::kLeaseLost);
  EXPECT_EQ(attempt_output(1), "attempt 1 output");
  EXPECT_EQ(attempt_output(2), "");
  ASSERT_OK(coord_->SaveLiveOutput(*c2, "attempt 2 so far"));
  EXPECT_EQ(attempt_output(2), "attempt 2 so far");
  RunRecord done = RecordOf(*c2, RunOutcome::kSucceeded, t0, t0);
  done.output = "attempt 2 all";
  ASSERT_OK(coord_->Report(*c2, done, true));
  EXPECT_EQ(attempt_output(2), "attempt 2 all");
  EXPECT_CODE(coord_->SaveLiveOutput(*c2, "after"), StatusCode::kLeaseLost);
  EXPECT_EQ(attempt_output(2), "attempt 2 all");
}

// --- Checkpoints -----------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, CheckpointsAreFenced) {
  const Instant t0 = clock_.Now();
  const FireKey fire = Fire("j", t0);
  Result<std::optional<std::string>> none = coord_->LoadCheckpoint(fire);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  CLAIM_OR_FAIL(c, *coord_, Req(fire, "n"));
  EXPECT_FALSE(coord_->LoadCheckpoint(fire)->has_value());
  const std::string binary("a\0b\xff\n", 5);
  ASSERT_OK(coord_->SaveCheckpoint(c, binary));
  EXPECT_EQ(coord_->LoadCheckpoint(fire)->value_or(""), binary);
  ASSERT_OK(coord_->SaveCheckpoint(c, ""));
  Result<std::optional<std::string>> empty = coord_->LoadCheckpoint(fire);
  ASSERT_TRUE(empty->has_value());
  EXPECT_EQ(**empty, "");
  ASSERT_OK(coord_->SaveCheckpoint(c, "step-2"));

  Claim stale = c;
  stale.fencing_token -= 1;
  EXPECT_CODE(coord_->SaveCheckpoint(stale, "stale"), StatusCode::kLeaseLost);
  // Retries see the checkpoint; the previous attempt cannot overwrite it.
  Result<Claim> c2 = coord_->NextAttempt(c, kTtl);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(coord_->LoadCheckpoint(fire)->value_or(""), "step-2");
  EXPECT_CODE(coord_->SaveCheckpoint(c, "old attempt"), StatusCode::kLeaseLost);
  ASSERT_OK(coord_->SaveCheckpoint(*c2, "step-3"));
  ASSERT_OK(coord_->Report(*c2, RecordOf(*c2, RunOutcome::kSucceeded, t0, t0), true));
  EXPECT_CODE(coord_->SaveCheckpoint(*c2, "after"), StatusCode::kLeaseLost);
  EXPECT_EQ(coord_->LoadCheckpoint(fire)->value_or(""), "step-3");
  EXPECT_FALSE(coord_->LoadCheckpoint(Fire("j", t0 - seconds(1)))->has_value());
}

// --- Job state -------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, JobStateDefaultsAndPausing) {
  Result<JobState> fresh = coord_->GetJobState("unknown");
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->paused);
  EXPECT_EQ(fresh->pause_reason, "");
  EXPECT_EQ(fresh->consecutive_failures, 0);
  EXPECT_FALSE(fresh->last_scheduled.has_value());

  const int64_t v0 = Version(*coord_);
  ASSERT_OK(coord_->SetPaused("j", true, "max_consecutive_failures"));
  const int64_t v1 = Version(*coord_);
  EXPECT_NE(v1, v0);
  Result<JobState> paused = coord_->GetJobState("j");
  EXPECT_TRUE(paused->paused);
  EXPECT_EQ(paused->pause_reason, "max_consecutive_failures");
  EXPECT_FALSE(coord_->GetJobState("k")->paused);
  ASSERT_OK(coord_->SetPaused("j", false, ""));
  EXPECT_NE(Version(*coord_), v1);
  EXPECT_FALSE(coord_->GetJobState("j")->paused);
}

// --- History ---------------------------------------------------------------------------------

// Writes finished records: jobs a/b/c, fires every minute, some with two attempts.
class HistoryFixture {
 public:
  static std::vector<RunRecord> Fill(Coordinator& c, FakeClock& clock, int fires_per_job) {
    const Instant base = clock.Now() - hours(10);
    std::vector<RunRecord> all;
    for (int i = 0; i < fires_per_job; ++i) {
      for (const char* job : {"a", "b", "c"}) {
        const FireKey fire = Fire(job, base + minutes(i));
        Result<ClaimOutcome> out = c.Claim(Req(fire, "n"));
        EXPECT_TRUE(out.ok() && out->result == R::kClaimed);
        if (!out.ok() || !out->claim) return all;
        Claim claim = *out->claim;
        if (i % 3 == 0) {
          RunRecord first = RecordOf(claim, RunOutcome::kFailed, base, base);
          EXPECT_TRUE(c.Report(claim, first, false).ok());
          all.push_back(first);
          Result<Claim> next = c.NextAttempt(claim, kTtl);
          EXPECT_TRUE(next.ok());
          if (!next.ok()) return all;
          claim = *next;
        }
        RunRecord last =
            RecordOf(claim, i % 2 ? RunOutcome::kSucceeded : RunOutcome::kFailed, base, base);
        EXPECT_TRUE(c.Report(claim, last, true).ok());
        all.push_back(last);
      }
    }
    std::sort(all.begin(), all.end(), [](const RunRecord& x, const RunRecord& y) {
      return std::make_tuple(-x.scheduled_at.unix_millis(), x.job_id, x.shard, -x.attempt) <
             std::make_tuple(-y.scheduled_at.unix_millis(), y.job_id, y.shard, -y.attempt);
    });
    return all;
  }
};

std::vector<std::string> Ids(const std::vector<RunRecord>& runs) {
  std::vector<std::string> ids;
  for (const RunRecord& r : runs) ids.push_back(r.run_id + "/" + std::to_string(r.attempt));
  return ids;
}

TEST_P(CoordinatorConformanceTest, ListRunsOrdersNewestFirstThenAttemptDescending) {
  const std::vector<RunRecord> all = HistoryFixture::Fill(*coord_, clock_, 7);
  Result<RunPage> page = coord_->ListRuns(RunQuery{.limit = 1000});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(Ids(page->runs), Ids(all));
  EXPECT_TRUE(page->next_cursor.empty());
  ExpectSameRecord(page->runs.front(), all.front());
  // Default limit is 50.
  Result<RunPage> first = coord_->ListRuns(RunQuery{});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->runs.size(), std::min<size_t>(50, all.size()));
}

TEST_P(CoordinatorConformanceTest, ListRunsFilters) {
  const std::vector<RunRecord> all = HistoryFixture::Fill(*coord_, clock_, 9);
  auto expect = [&](const RunQuery& q, const std::function<bool(const RunRecord&)>& pred) {
    std::vector<RunRecord> want;
    for (const RunRecord& r : all) {
      if (pred(r)) want.push_back(r);
    }
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(Ids(AllPages(*coord_, q)), Ids(want));
  };
  expect(RunQuery{.job_id = "b"}, [](const RunRecord& r) { return r.job_id == "b"; });
  expect(RunQuery{.outcome = RunOutcome::kSucceeded},
         [](const RunRecord& r) { return r.outcome == RunOutcome::kSucceeded; });
  const Instant from = all[all.size() / 2].scheduled_at;
  const Instant until = all[3].scheduled_at;
  expect(RunQuery{.scheduled_from = from},
         [&](const RunRecord& r) { return r.scheduled_at >= from; });
  expect(RunQuery{.scheduled_until = until},
         [&](const RunRecord& r) { return r.scheduled_at < until; });
  expect(RunQuery{.job_id = "c",
                  .outcome = RunOutcome::kFailed,
                  .scheduled_from = from,
                  .scheduled_until = until,
                  .limit = 2},
         [&](const RunRecord& r) {
           return r.job_id == "c" && r.outcome == RunOutcome::kFailed && r.scheduled_at >= from &&
                  r.scheduled_at < until;
         });
  Result<RunPage> none = coord_->ListRuns(RunQuery{.job_id = "zzz"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->runs.empty());
  EXPECT_TRUE(none->next_cursor.empty());
}

TEST_P(CoordinatorConformanceTest, ListRunsPaginatesWithoutDuplicatesOrGaps) {
  const std::vector<RunRecord> all = HistoryFixture::Fill(*coord_, clock_, 13);
  RunQuery q{.limit = 7};
  std::vector<RunRecord> seen;
  int pages = 0;
  for (;;) {
    Result<RunPage> page = coord_->ListRuns(q);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(page->runs.size(), 7u);
    ++pages;
    seen.insert(seen.end(), page->runs.begin(), page->runs.end());
    if (pages == 2) {
      // New fires while paging (newer than every listed one) do not disturb the walk.
      ASSERT_OK(coord_->RecordSkipped(Fire("a", clock_.Now()), "n", "misfire"));
      ASSERT_OK(coord_->RecordSkipped(Fire("zz", clock_.Now()), "n", "misfire"));
    }
    if (page->next_cursor.empty()) break;
    q.cursor = page->next_cursor;
    ASSERT_LT(pages, 1000);
  }
  EXPECT_EQ(Ids(seen), Ids(all));
  EXPECT_EQ(pages, static_cast<int>((all.size() + 6) / 7));
  // Exactly a multiple of the limit: no empty trailing page promised by a cursor.
  const std::vector<RunRecord> b_runs = AllPages(*coord_, RunQuery{.job_id = "b", .limit = 1000});
  int b_pages = 0;
  std::vector<RunRecord> b_paged = AllPages(
      *coord_, RunQuery{.job_id = "b", .limit = static_cast<int>(b_runs.size())}, &b_pages);
  EXPECT_EQ(b_pages, 1);
  EXPECT_EQ(Ids(b_paged), Ids(b_runs));
}

TEST_P(CoordinatorConformanceTest, ListRunsRejectsBadCursorsAndLimits) {
  EXPECT_EQ(coord_->ListRuns(RunQuery{.cursor = "garbage"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_->ListRuns(RunQuery{.limit = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_->ListRuns(RunQuery{.limit = -5}).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, ListRunsCapsTheLimitAt1000) {
  const Instant base = clock_.Now() - hours(100);
  for (int i = 0; i < 1005; ++i) {
    ASSERT_OK(coord_->RecordSkipped(Fire("many", base + seconds(i)), "n", "misfire"));
  }
  Result<RunPage> page = coord_->ListRuns(RunQuery{.limit = 5000});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->runs.size(), 1000u);
  ASSERT_FALSE(page->next_cursor.empty());
  EXPECT_EQ(page->runs.front().scheduled_at, base + seconds(1004));
  Result<RunPage> rest = coord_->ListRuns(RunQuery{.limit = 5000, .cursor = page->next_cursor});
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->runs.size(), 5u);
  EXPECT_EQ(rest->runs.back().scheduled_at, base);
  EXPECT_TRUE(rest->next_cursor.empty());
}

TEST_P(CoordinatorConformanceTest, GetRunReturnsAttemptsAscending) {
  EXPECT_EQ(coord_->GetRun("nothing@1").status().code(), StatusCode::kNotFound);
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(c1, *coord_, Req(Fire("j", t0), "n"));
  Result<Claim> c2 = coord_->NextAttempt(c1, kTtl);
  ASSERT_TRUE(c2.ok());
  Result<Claim> c3 = coord_->NextAttempt(*c2, kTtl);
  ASSERT_TRUE(c3.ok());
  Result<std::vector<RunRecord>> runs = coord_->GetRun(c1.fire.RunId());
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*runs)[i].attempt, i + 1);
  // Unreported attempts superseded by a retry are not left running.
  EXPECT_NE((*runs)[0].outcome, RunOutcome::kRunning);
  EXPECT_NE((*runs)[1].outcome, RunOutcome::kRunning);
  EXPECT_EQ((*runs)[2].outcome, RunOutcome::kRunning);
  EXPECT_EQ(coord_->GetRun("j@" + std::to_string(t0.unix_millis() + 1)).status().code(),
            StatusCode::kNotFound);
}

TEST_P(CoordinatorConformanceTest, PruneHistoryKeepsTheNewestFires) {
  const Instant base = clock_.Now() - hours(1);
  // Fire 0 is still running (long lease); fires 1..9 finished, odd ones with two attempts.
  CLAIM_OR_FAIL(running, *coord_, Req(Fire("j", base), "n", OverlapPolicy::kAllow, hours(10)));
  for (int i = 1; i < 10; ++i) {
    CLAIM_OR_FAIL(c, *coord_, Req(Fire("j", base + minutes(i)), "n"));
    if (i % 2) {
      ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kFailed, base, base), false));
      Result<Claim> next = coord_->NextAttempt(c, kTtl);
      ASSERT_TRUE(next.ok());
      c = *next;
    }
    ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, base, base), true));
  }
  ASSERT_OK(coord_->RecordSkipped(Fire("other", base), "n", "misfire"));
  ASSERT_OK(coord_->PruneHistory("j", 3, hours(24)));
  std::vector<RunRecord> left = AllPages(*coord_, RunQuery{.job_id = "j"});
  std::vector<std::string> want = {
      Fire("j", base + minutes(9)).RunId() + "/2", Fire("j", base + minutes(9)).RunId() + "/1",
      Fire("j", base + minutes(8)).RunId() + "/1", Fire("j", base + minutes(7)).RunId() + "/2",
      Fire("j", base + minutes(7)).RunId() + "/1", running.fire.RunId() + "/1"};
  EXPECT_EQ(Ids(left), want);
  EXPECT_EQ(RunsOf(*coord_, Fire("other", base).RunId()).size(), 1u);
  // A pruned fire still cannot be claimed a second time.
  EXPECT_EQ(coord_->Claim(Req(Fire("j", base + minutes(2)), "n"))->result, R::kAlreadyClaimed);
  EXPECT_EQ(coord_->PruneHistory("j", 0, hours(1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_->PruneHistory("j", 1, Duration(0)).code(), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, PruneHistoryDropsOldRecordsButNeverRunningOnes) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(old_running, *coord_,
                Req(Fire("j", t0 - hours(30)), "n", OverlapPolicy::kAllow, hours(100)));
  ASSERT_OK(coord_->RecordSkipped(Fire("j", t0 - hours(26)), "n", "misfire"));
  CLAIM_OR_FAIL(old_done, *coord_, Req(Fire("j", t0 - hours(25)), "n"));
  ASSERT_OK(coord_->Report(old_done, RecordOf(old_done, RunOutcome::kFailed, t0, t0), true));
  CLAIM_OR_FAIL(recent, *coord_, Req(Fire("j", t0 - hours(23)), "n"));
  ASSERT_OK(coord_->Report(recent, RecordOf(recent, RunOutcome::kSucceeded, t0, t0), true));
  ASSERT_OK(coord_->PruneHistory("j", 100, hours(24)));
  std::vector<RunRecord> left = AllPages(*coord_, RunQuery{.job_id = "j"});
  std::vector<std::string> want = {recent.fire.RunId() + "/1", old_running.fire.RunId() + "/1"};
  EXPECT_EQ(Ids(left), want);
  // Time moves on (backend clock): the recent one ages out too.
  clock_.Advance(hours(2));
  ASSERT_OK(coord_->PruneHistory("j", 100, hours(24)));
  want = {old_running.fire.RunId() + "/1"};
  EXPECT_EQ(Ids(AllPages(*coord_, RunQuery{.job_id = "j"})), want);
  EXPECT_TRUE(coord_->Renew(old_running, kTtl).ok());
}

// --- Nodes -----------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, HeartbeatsExpire) {
  const Instant t0 = clock_.Now();
  EXPECT_TRUE(coord_->ListNodes()->empty());
  NodeInfo a{.node_id = "node-a",
             .host = "host-1",
             .version = "0.1.0",
             .started_at = t0 - hours(1),
             .last_heartbeat = Instant(),
             .running = 3,
             .clock_skew = milliseconds(-250)};
  NodeInfo b = a;
  b.node_id = "node-b";
  b.host = "host-2";
  b.running = 0;
  b.clock_skew = milliseconds(40);
  ASSERT_OK(coord_->Heartbeat(b, seconds(30)));
  ASSERT_OK(coord_->Heartbeat(a, seconds(10)));
  Result<std::vector<NodeInfo>> nodes = coord_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  const NodeInfo& got = (*nodes)[0];
  EXPECT_EQ(got.node_id, "node-a");
  EXPECT_EQ(got.host, "host-1");
  EXPECT_EQ(got.version, "0.1.0");
  EXPECT_EQ(got.started_at, t0 - hours(1));
  EXPECT_EQ(got.last_heartbeat, t0);
  EXPECT_EQ(got.running, 3);
  EXPECT_EQ(got.clock_skew, milliseconds(-250));
  EXPECT_EQ((*nodes)[1].node_id, "node-b");
  EXPECT_EQ((*nodes)[1].clock_skew, milliseconds(40));

  clock_.Advance(seconds(10));  // a's heartbeat ran out exactly now
  nodes = coord_->ListNodes();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].node_id, "node-b");
  a.running = 1;
  ASSERT_OK(coord_->Heartbeat(a, seconds(60)));
  clock_.Advance(seconds(25));
  nodes = coord_->ListNodes();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].node_id, "node-a");
  EXPECT_EQ((*nodes)[0].running, 1);
  EXPECT_EQ((*nodes)[0].last_heartbeat, t0 + seconds(10));
  EXPECT_CODE(coord_->Heartbeat(a, Duration(0)), StatusCode::kInvalidArgument);
  NodeInfo anonymous;
  EXPECT_CODE(coord_->Heartbeat(anonymous, seconds(1)), StatusCode::kInvalidArgument);
}

// --- Job definitions -------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, JobDefinitionsUseOptimisticVersions) {
  const int64_t v0 = Version(*coord_);
  EXPECT_TRUE(coord_->ListJobs()->empty());
  Result<int64_t> v1 = coord_->PutJob("report", R"({"schedule":"@daily"})", 0);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_GT(*v1, 0);
  const int64_t jv1 = Version(*coord_);
  EXPECT_NE(jv1, v0);
  EXPECT_EQ(coord_->PutJob("report", "{}", 0).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(coord_->PutJob("report", "{}", *v1 + 1).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(coord_->PutJob("absent", "{}", 7).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(coord_->PutJob("bad id", "{}", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord_->PutJob("report", "{}", -3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Version(*coord_), jv1) << "failed writes do not change the version";

  Result<int64_t> v2 = coord_->PutJob("report", R"({"schedule":"@hourly"})", *v1);
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(*v2, *v1);
  const int64_t jv2 = Version(*coord_);
  EXPECT_NE(jv2, jv1);
  Result<int64_t> other = coord_->PutJob("alpha", "{\"x\":1}", 0);
  ASSERT_TRUE(other.ok());

  Result<std::vector<StoredJob>> jobs = coord_->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id, "alpha");
  EXPECT_EQ((*jobs)[1].job_id, "report");
  EXPECT_EQ((*jobs)[1].definition_json, R"({"schedule":"@hourly"})");
  EXPECT_EQ((*jobs)[1].version, *v2);

  // Claims and history do not change JobsVersion.
  const int64_t before_claim = Version(*coord_);
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("report", clock_.Now()), "n"));
  (void)c;
  EXPECT_EQ(Version(*coord_), before_claim);

  EXPECT_CODE(coord_->DeleteJob("report", *v1), StatusCode::kFailedPrecondition);
  ASSERT_OK(coord_->DeleteJob("report", *v2));
  EXPECT_NE(Version(*coord_), before_claim);
  EXPECT_CODE(coord_->DeleteJob("report", -1), StatusCode::kNotFound);
  ASSERT_OK(coord_->DeleteJob("alpha", -1));
  EXPECT_TRUE(coord_->ListJobs()->empty());

  // A re-created job never reuses an old version (no ABA for a stale writer).
  Result<int64_t> v3 = coord_->PutJob("report", "{}", 0);
  ASSERT_TRUE(v3.ok());
  EXPECT_GT(*v3, *v2);
  EXPECT_EQ(coord_->PutJob("report", "{}", *v2).status().code(), StatusCode::kFailedPrecondition);
}

TEST_P(CoordinatorConformanceTest, ConcurrentCreatesHaveOneWinner) {
  std::vector<StatusCode> codes(kThreads, StatusCode::kInternal);
  RunConcurrently([&](int t) {
    codes[t] = coord_->PutJob("job", "{\"by\":" + std::to_string(t) + "}", 0).status().code();
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kOk), 1);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), StatusCode::kAlreadyExists), kThreads - 1);
  EXPECT_EQ(coord_->ListJobs()->size(), 1u);
}

TEST_P(CoordinatorConformanceTest, ClaimManyAnswersEachRequestLikeClaim) {
  const Instant t = clock_.Now() - std::chrono::seconds(10);
  CLAIM_OR_FAIL(taken, *coord_, Req(Fire("b1", t), "other"));
  (void)taken;
  ASSERT_OK(coord_->SetPaused("b3", true, "test"));
  CLAIM_OR_FAIL(live, *coord_, Req(Fire("b4", t), "other"));
  (void)live;
  std::vector<ClaimRequest> reqs = {
      Req(Fire("b1", t), "n"),                                                    // already claimed
      Req(Fire("b2", t), "n"),                                                    // free
      Req(Fire("b3", t), "n"),                                                    // paused
      Req(Fire("b4", t + std::chrono::seconds(1)), "n", OverlapPolicy::kForbid),  // overlap
      Req(Fire("b5", clock_.Now() + std::chrono::hours(1)), "n"),                 // too early
      Req(Fire("bad id", t), "n"),                                                // invalid
      Req(Fire("b2", t, 0, 1), "n"),  // b2 again: claimed above
  };
  std::vector<Result<ClaimOutcome>> out = coord_->ClaimMany(reqs);
  ASSERT_EQ(out.size(), reqs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 5) continue;
    ASSERT_TRUE(out[i].ok()) << i << ": " << out[i].status().ToString();
  }
  EXPECT_EQ(out[0]->result, R::kAlreadyClaimed);
  EXPECT_EQ(out[1]->result, R::kClaimed);
  ASSERT_TRUE(out[1]->claim.has_value());
  EXPECT_EQ(out[1]->claim->fire.RunId(), Fire("b2", t).RunId());
  EXPECT_GT(out[1]->claim->fencing_token, 0);
  EXPECT_EQ(out[2]->result, R::kPaused);
  EXPECT_EQ(out[3]->result, R::kOverlap);
  EXPECT_EQ(out[4]->result, R::kTooEarly);
  EXPECT_CODE(out[5].status(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out[6]->result, R::kAlreadyClaimed) << "one claim per fire within a batch too";
  Result<std::vector<RunRecord>> rec = coord_->GetRun(Fire("b2", t).RunId());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  ASSERT_EQ(rec->size(), 1u);
  EXPECT_EQ(rec->front().outcome, RunOutcome::kRunning);
  EXPECT_EQ(rec->front().node_id, "n");
  // A batch larger than one backend round trip's chunk: every fire claimed once.
  std::vector<ClaimRequest> many;
  for (int i = 0; i < 300; ++i) many.push_back(Req(Fire("m" + std::to_string(i), t), "n"));
  std::vector<Result<ClaimOutcome>> all = coord_->ClaimMany(many);
  ASSERT_EQ(all.size(), many.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(all[i].ok()) << i << ": " << all[i].status().ToString();
    ASSERT_EQ(all[i]->result, R::kClaimed) << i;
    EXPECT_EQ(all[i]->claim->fire.job_id, "m" + std::to_string(i));
  }
  EXPECT_TRUE(coord_->ClaimMany({}).empty());
}

TEST_P(CoordinatorConformanceTest, GetJobStatesAnswersEachIdLikeGetJobState) {
  const Instant t = clock_.Now() - std::chrono::seconds(10);
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("s1", t), "n"));
  (void)c;
  ASSERT_OK(coord_->SetPaused("s2", true, "maintenance"));
  std::vector<std::string> ids = {"s1", "s2", "never", "bad id", "s1"};
  for (int i = 0; i < 600; ++i) ids.push_back("many" + std::to_string(i));  // beyond one chunk
  Result<std::vector<JobState>> got = coord_->GetJobStates(ids);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    Result<JobState> one = coord_->GetJobState(ids[i]);
    ASSERT_TRUE(one.ok()) << ids[i];
    EXPECT_EQ((*got)[i].paused, one->paused) << ids[i];
    EXPECT_EQ((*got)[i].pause_reason, one->pause_reason) << ids[i];
    EXPECT_EQ((*got)[i].last_scheduled, one->last_scheduled) << ids[i];
  }
  EXPECT_EQ((*got)[0].last_scheduled, std::optional<Instant>(t));
  EXPECT_TRUE((*got)[1].paused);
  EXPECT_EQ((*got)[1].pause_reason, "maintenance");
  EXPECT_FALSE((*got)[2].last_scheduled.has_value());
  Result<std::vector<JobState>> none = coord_->GetJobStates({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(CoordinatorConformanceTest, FiresRecordedTellsClaimedAndSkippedFires) {
  const Instant t = clock_.Now() - std::chrono::seconds(10);
  CLAIM_OR_FAIL(c, *coord_, Req(Fire("own", t), "n"));
  ASSERT_OK(coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, t, t), true));
  CLAIM_OR_FAIL(running, *coord_, Req(Fire("own", t + std::chrono::seconds(1)), "n"));
  (void)running;
  ASSERT_OK(coord_->RecordSkipped(Fire("own", t + std::chrono::seconds(2)), "n", "misfire"));
  CLAIM_OR_FAIL(shard1, *coord_, Req(Fire("sh", t, 1, 3), "n"));
  (void)shard1;
  Result<std::vector<bool>> got = coord_->FiresRecorded({
      Fire("own", t),                            // done
      Fire("own", t + std::chrono::seconds(1)),  // running
      Fire("own", t + std::chrono::seconds(2)),  // skipped
      Fire("own", t + std::chrono::seconds(3)),  // never claimed
      Fire("own1", t),                           // another job (prefix of none)
      Fire("sh", t, 1, 3),                       // the claimed shard
      Fire("sh", t, 0, 3),                       // its sibling
  });
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<bool>{true, true, true, false, false, true, false}));
  Result<std::vector<bool>> none = coord_->FiresRecorded({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_CODE(coord_->FiresRecorded({Fire("bad id", t)}).status(), StatusCode::kInvalidArgument);
}

TEST_P(CoordinatorConformanceTest, WaitJobsChangeReturnsAfterAChange) {
  const int64_t v0 = Version(*coord_);
  // Nothing changes: it returns the same version once the timeout passes (real time, short).
  Result<int64_t> same = coord_->WaitJobsChange(v0, std::chrono::milliseconds(50));
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, v0);
  // A change by another caller while one waits wakes it with the new version.
  Result<int64_t> woke = InternalError("not run");
  std::thread waiter([&] { woke = coord_->WaitJobsChange(v0, std::chrono::seconds(20)); });
  ASSERT_OK(coord_->SetPaused("watched", true, "api"));
  waiter.join();
  ASSERT_TRUE(woke.ok()) << woke.status().ToString();
  EXPECT_NE(*woke, v0);
  EXPECT_EQ(*woke, Version(*coord_));
  // An already different version returns at once.
  Result<int64_t> stale = coord_->WaitJobsChange(v0, std::chrono::seconds(20));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, Version(*coord_));
}

TEST_P(CoordinatorConformanceTest, AuditLogIsOrderedPagedAndBounded) {
  Result<std::vector<AuditRecord>> empty = coord_->ListAudit(10, 0);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  int64_t last_seq = 0;
  for (int i = 0; i < 7; ++i) {
    AuditRecord r;
    r.seq = 999;  // ignored: assigned by the backend
    r.who = "ops";
    r.action = i % 2 ? "pause" : "create";
    r.target = "job" + std::to_string(i);
    r.status = 200 + i;
    r.before_json = i ? "{\"v\":" + std::to_string(i - 1) + "}" : "";
    r.after_json = "{\"v\":" + std::to_string(i) + "}";
    Result<int64_t> seq = coord_->AppendAudit(r, 5);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    EXPECT_GT(*seq, last_seq);
    last_seq = *seq;
    clock_.Advance(std::chrono::seconds(1));
  }
  // Bounded: only the newest 5 are kept, newest first.
  Result<std::vector<AuditRecord>> all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].seq, last_seq);
  EXPECT_EQ((*all)[0].target, "job6");
  EXPECT_EQ((*all)[0].who, "ops");
  EXPECT_EQ((*all)[0].action, "create");
  EXPECT_EQ((*all)[0].status, 206);
  EXPECT_EQ((*all)[0].before_json, "{\"v\":5}");
  EXPECT_EQ((*all)[0].after_json, "{\"v\":6}");
  EXPECT_EQ((*all)[4].target, "job2");
  EXPECT_EQ((*all)[4].before_json, "{\"v\":1}");
  for (size_t i = 1; i < all->size(); ++i) {
    EXPECT_LT((*all)[i].seq, (*all)[i - 1].seq);
    EXPECT_LE((*all)[i].at, (*all)[i - 1].at);
  }
  // `at` is the backend clock at the append.
  EXPECT_EQ((*all)[0].at, clock_.Now() - std::chrono::seconds(1));

  // Paging: before_seq continues below the last record seen.
  Result<std::vector<AuditRecord>> first = coord_->ListAudit(2, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  Result<std::vector<AuditRecord>> next = coord_->ListAudit(2, (*first)[1].seq);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 2u);
  EXPECT_EQ((*next)[0].target, "job4");
  EXPECT_EQ((*next)[1].target, "job3");

  EXPECT_CODE(coord_->ListAudit(0, 0).status(), StatusCode::kInvalidArgument);
  EXPECT_CODE(coord_->AppendAudit(AuditRecord{}, 0).status(), StatusCode::kInvalidArgument);
}

// Failed calls (status >= 400) are kept up to their own cap: a flood of them never evicts the
// record of a successful call, and the log still lists both kinds together by seq.
TEST_P(CoordinatorConformanceTest, FailedCallsAreCappedApartFromSuccessfulOnes) {
  auto append = [&](int status, const std::string& target) {
    AuditRecord r;
    r.who = "ops";
    r.action = "trigger";
    r.target = target;
    r.status = status;
    Result<int64_t> seq = coord_->AppendAudit(r, status >= 400 ? 4 : 3);
    EXPECT_TRUE(seq.ok()) << seq.status().ToString();
    return seq.ok() ? *seq : 0;
  };
  const int64_t first_ok = append(200, "ok0");
  append(201, "ok1");
  for (int i = 0; i < 30; ++i) append(i % 2 ? 403 : 404, "bad" + std::to_string(i));
  const int64_t last_ok = append(204, "ok2");
  append(409, "bad30");
  Result<std::vector<AuditRecord>> all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> targets;
  for (const AuditRecord& r : *all) targets.push_back(r.target);
  // Newest first: the 4 newest failures and all 3 successes, interleaved by seq.
  EXPECT_EQ(targets,
            (std::vector<std::string>{"bad30", "ok2", "bad29", "bad28", "bad27", "ok1", "ok0"}));
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i].seq, (*all)[i - 1].seq);
  EXPECT_EQ(all->back().seq, first_ok);
  // Paging across both kinds.
  Result<std::vector<AuditRecord>> below = coord_->ListAudit(3, last_ok);
  ASSERT_TRUE(below.ok());
  ASSERT_EQ(below->size(), 3u);
  EXPECT_EQ((*below)[0].target, "bad29");
  EXPECT_EQ((*below)[2].target, "bad27");
  // The success cap still holds among successes.
  for (int i = 0; i < 3; ++i) append(200, "later" + std::to_string(i));
  all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok());
  int successes = 0;
  for (const AuditRecord& r : *all) successes += r.status < 400 ? 1 : 0;
  EXPECT_EQ(successes, 3);
  EXPECT_EQ(all->size(), 7u);
}

TEST_P(CoordinatorConformanceTest, ConcurrentAuditAppendsGetDistinctSeqs) {
  std::vector<int64_t> seqs(kThreads, 0);
  RunConcurrently([&](int t) {
    AuditRecord r;
    r.who = "t" + std::to_string(t);
    r.action = "trigger";
    r.target = "job";
    Result<int64_t> seq = coord_->AppendAudit(r, 1000);
    if (seq.ok()) seqs[t] = *seq;
  });
  std::set<int64_t> distinct(seqs.begin(), seqs.end());
  EXPECT_EQ(distinct.size(), seqs.size());
  EXPECT_EQ(distinct.count(0), 0u);
  EXPECT_EQ(coord_->ListAudit(1000, 0)->size(), static_cast<size_t>(kThreads));
}

}  // namespace
}  // namespace gnomon::testing
