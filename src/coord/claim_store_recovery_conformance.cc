// The conformance suite of ClaimStore, part 2 (gnomon/claim_store.h): lost runs, operator cancel
// and re-run, skipped fires, live output, checkpoints, job state, and the batched calls (ClaimMany,
// GetJobStates, FiresRecorded). Instantiated for every backend with the other roles' suites
// (coordinator_conformance.h).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

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
  // A fire claimed earlier in the same batch is open to the overlap check of a later one.
  std::vector<Result<ClaimOutcome>> pair =
      coord_->ClaimMany({Req(Fire("b6", t), "n"), Req(Fire("b6", t + std::chrono::seconds(1)), "n",
                                                      OverlapPolicy::kForbid)});
  ASSERT_EQ(pair.size(), 2u);
  ASSERT_TRUE(pair[0].ok() && pair[1].ok());
  EXPECT_EQ(pair[0]->result, R::kClaimed);
  EXPECT_EQ(pair[1]->result, R::kOverlap);
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

}  // namespace
}  // namespace gnomon::testing::conformance
