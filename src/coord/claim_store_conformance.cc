// The conformance suite of ClaimStore, part 1 (gnomon/claim_store.h): the backend clock, claims,
// the early-fire guard, overlap policies, paused jobs, fencing tokens, Renew, NextAttempt and
// Report. Instantiated for every backend with the other roles' suites (coordinator_conformance.h).
#include <algorithm>
#include <atomic>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

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

TEST_P(CoordinatorConformanceTest, OverlapBufferIsBusyWithoutARecordWhileARunIsLive) {
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(a, *coord_, Req(Fire("j", t0 - minutes(2)), "n", OverlapPolicy::kBufferOne));
  for (OverlapPolicy p : {OverlapPolicy::kBufferOne, OverlapPolicy::kBufferAll}) {
    Result<ClaimOutcome> busy = coord_->Claim(Req(Fire("j", t0 - minutes(1)), "m", p));
    ASSERT_TRUE(busy.ok()) << busy.status().ToString();
    EXPECT_EQ(busy->result, R::kBusy);
    EXPECT_FALSE(busy->claim.has_value());
  }
  EXPECT_TRUE(RunsOf(*coord_, Fire("j", t0 - minutes(1)).RunId()).empty()) << "nothing recorded";
  // Once the live run ended, the waiting fire is claimed.
  ASSERT_OK(coord_->Report(a, RecordOf(a, RunOutcome::kSucceeded, t0, t0), true));
  Result<ClaimOutcome> later =
      coord_->Claim(Req(Fire("j", t0 - minutes(1)), "m", OverlapPolicy::kBufferOne));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->result, R::kClaimed);
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

}  // namespace
}  // namespace gnomon::testing::conformance
