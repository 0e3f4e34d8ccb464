// The conformance suite of what jobs that fire jobs need from a backend (docs/semantics.md
// "Dependencies"): a child's fire, claimed by every caller that saw its parent end, runs once; a
// join whose parents end at once on two callers is claimed once, and not missed by a caller that
// reads both afterwards (the engine's sweep). Instantiated for every backend with the other
// roles' suites (coordinator_conformance.h).
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

// Whether `fire`'s newest attempt succeeded.
bool Succeeded(Coordinator& c, const FireKey& fire) {
  Result<std::vector<RunRecord>> runs = c.GetRun(fire.RunId());
  return runs.ok() && !runs->empty() && runs->back().outcome == RunOutcome::kSucceeded;
}

TEST_P(CoordinatorConformanceTest, AChildOfAParentReportedByTwoCallersIsClaimedOnce) {
  const Instant t0 = clock_.Now();
  const FireKey parent = Fire("extract", t0 - seconds(2));
  CLAIM_OR_FAIL(p, *coord_, Req(parent, "node-1"));
  ASSERT_OK(coord_->Report(p, RecordOf(p, RunOutcome::kSucceeded, t0, t0), true));
  // A second report of the same final outcome (a retry whose first send was applied after all)
  // is refused: the fire is closed.
  EXPECT_FALSE(coord_->Report(p, RecordOf(p, RunOutcome::kSucceeded, t0, t0), true).ok());

  // The reporting node and every node's sweep claim the child's fire at the parent's instant.
  const FireKey child = Fire("load", parent.scheduled_at);
  const std::string cause = "after " + parent.RunId() + " succeeded";
  std::vector<R> results(kThreads, R::kClaimed);
  std::atomic<int> errors{0};
  RunConcurrently([&](int t) {
    ClaimRequest req = Req(child, "node-" + std::to_string(t), OverlapPolicy::kForbid);
    req.cause = cause;
    Result<ClaimOutcome> out = coord_->Claim(req);
    if (!out.ok()) {
      errors.fetch_add(1);
      return;
    }
    results[t] = out->result;
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kClaimed), 1);
  EXPECT_EQ(std::count(results.begin(), results.end(), R::kAlreadyClaimed), kThreads - 1);
  std::vector<RunRecord> runs = RunsOf(*coord_, child.RunId());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].cause, cause);
  EXPECT_EQ(runs[0].scheduled_at, parent.scheduled_at);
}

TEST_P(CoordinatorConformanceTest, AJoinOfParentsEndingAtOnceIsClaimedOnceAndNotMissed) {
  const Instant t0 = clock_.Now();
  constexpr int kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Instant at = t0 - minutes(1) + seconds(round);
    const FireKey a = Fire("a", at);
    const FireKey b = Fire("b", at);
    const FireKey join = Fire("publish", at);
    CLAIM_OR_FAIL(ca, *coord_, Req(a, "node-a"));
    CLAIM_OR_FAIL(cb, *coord_, Req(b, "node-b"));
    std::atomic<int> claimed{0};
    std::atomic<int> errors{0};
    auto try_join = [&](const std::string& node) {
      if (!Succeeded(*coord_, a) || !Succeeded(*coord_, b)) return;
      Result<ClaimOutcome> out = coord_->Claim(Req(join, node));
      if (!out.ok()) {
        errors.fetch_add(1);
      } else if (out->result == R::kClaimed) {
        claimed.fetch_add(1);
      } else if (out->result != R::kAlreadyClaimed) {
        errors.fetch_add(1);
      }
    };
    // Threads 0 and 1 report a's and b's success, then read the other and claim the join if
    // both succeeded; the others are sweeps that read both and claim meanwhile.
    RunConcurrently([&](int t) {
      if (t < 2) {
        const Claim& c = t == 0 ? ca : cb;
        if (!coord_->Report(c, RecordOf(c, RunOutcome::kSucceeded, t0, t0), true).ok()) {
          errors.fetch_add(1);
        }
      }
      try_join("node-" + std::to_string(t));
    });
    // A sweep after both ended: the join has its claim, from above or from here.
    try_join("sweep");
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(claimed.load(), 1) << "the join claimed once, never missed";
    EXPECT_EQ(RunsOf(*coord_, join.RunId()).size(), 1u);
  }
}

}  // namespace
}  // namespace gnomon::testing::conformance
