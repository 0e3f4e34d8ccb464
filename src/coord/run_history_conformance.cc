// The conformance suite of RunHistory (gnomon/run_history.h): listing order, filters, pages, GetRun
// and pruning. Instantiated for every backend with the other roles' suites
// (coordinator_conformance.h).
#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

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

// PruneHistoryMany prunes each job as PruneHistory would, over more jobs than one backend call
// takes (Redis: 64 a call; under a Cluster split over the primaries), and answers each request
// on its own: an invalid one is refused without stopping the others.
TEST_P(CoordinatorConformanceTest, PruneHistoryManyPrunesEachJobAsPruneHistoryDoes) {
  const Instant base = clock_.Now() - hours(1);
  constexpr int kJobs = 70;
  std::vector<ClaimRequest> claims;
  for (int j = 0; j < kJobs; ++j) {
    for (int f = 0; f < 3; ++f) {
      claims.push_back(Req(Fire("p" + std::to_string(j), base + minutes(f)), "n"));
    }
  }
  std::vector<Result<ClaimOutcome>> claimed = coord_->ClaimMany(claims);
  std::vector<Claim> held;
  std::vector<RunRecord> records;
  for (Result<ClaimOutcome>& c : claimed) {
    ASSERT_TRUE(c.ok() && c->claim.has_value());
    held.push_back(*c->claim);
  }
  for (const Claim& c : held) records.push_back(RecordOf(c, RunOutcome::kSucceeded, base, base));
  std::vector<ReportRequest> reports;
  for (size_t i = 0; i < held.size(); ++i) reports.push_back({&held[i], &records[i], true});
  for (const Status& s : coord_->ReportMany(reports)) ASSERT_OK(s);
  // Job j keeps its newest 1 + j % 3 fires; two invalid requests sit among them.
  std::vector<PruneRequest> prunes;
  for (int j = 0; j < kJobs; ++j) {
    prunes.push_back(PruneRequest{"p" + std::to_string(j), 1 + j % 3, hours(24)});
    if (j == 10) prunes.push_back(PruneRequest{"p1", 0, hours(24)});
    if (j == 40) prunes.push_back(PruneRequest{"p2", 1, Duration(0)});
  }
  std::vector<Status> pruned = coord_->PruneHistoryMany(prunes);
  ASSERT_EQ(pruned.size(), prunes.size());
  for (size_t i = 0; i < prunes.size(); ++i) {
    const bool valid = prunes[i].keep_last >= 1 && prunes[i].max_age > Duration(0);
    EXPECT_EQ(pruned[i].code(), valid ? StatusCode::kOk : StatusCode::kInvalidArgument)
        << "request " << i << ": " << pruned[i].ToString();
  }
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = "p" + std::to_string(j);
    std::vector<std::string> want;  // the newest 1 + j % 3 of fires 2, 1, 0
    for (int f = 2; f > 1 - j % 3; --f) want.push_back(Fire(job, base + minutes(f)).RunId() + "/1");
    EXPECT_EQ(Ids(AllPages(*coord_, RunQuery{.job_id = job})), want) << job;
  }
  EXPECT_TRUE(coord_->PruneHistoryMany({}).empty());
}

// A fire that ran is never claimed again, even once its history was pruned. A backend that
// drops the fire's marker with its history refuses, from the prune on, every claim before the
// prune's cutoff as too old to check (kTooOld), whether the fire ran or not, a backfill's too;
// one whose markers expire on their own still finds the marker (kAlreadyClaimed). Fires inside
// the cutoff and other jobs' fires are claimed.
TEST_P(CoordinatorConformanceTest, AFireWhoseHistoryWasPrunedIsNotClaimedAgain) {
  const bool dropped = GetParam().markers_go_with_history;
  const Instant t0 = clock_.Now();
  CLAIM_OR_FAIL(ran, *coord_, Req(Fire("j", t0 - hours(30)), "n"));
  ASSERT_OK(coord_->Report(ran, RecordOf(ran, RunOutcome::kSucceeded, t0, t0), true));
  ASSERT_OK(coord_->PruneHistory("j", 1, hours(24)));
  EXPECT_TRUE(RunsOf(*coord_, ran.fire.RunId()).empty()) << "its history was pruned";
  auto expect_refused = [&](const ClaimRequest& req, R want) {
    std::vector<Result<ClaimOutcome>> many = coord_->ClaimMany({req});
    ASSERT_EQ(many.size(), 1u);
    for (const Result<ClaimOutcome>& out : {coord_->Claim(req), many[0]}) {
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ(out->result, want) << req.fire.RunId();
      EXPECT_FALSE(out->claim.has_value());
    }
    EXPECT_TRUE(RunsOf(*coord_, req.fire.RunId()).empty()) << "a refused claim records nothing";
  };
  const R pruned_answer = dropped ? R::kTooOld : R::kAlreadyClaimed;
  expect_refused(Req(ran.fire, "n2", OverlapPolicy::kForbid), pruned_answer);
  expect_refused(Req(ran.fire, "n2"), pruned_answer);
  // A fire behind the cutoff that never ran cannot be told from one whose marker is gone.
  const FireKey never = Fire("j", t0 - hours(26));
  if (dropped) {
    expect_refused(Req(never, "n"), R::kTooOld);
  } else {
    CLAIM_OR_FAIL(claimed, *coord_, Req(never, "n"));
  }
  // The cutoff only moves forward: a prune with a longer max_age does not move it back.
  ASSERT_OK(coord_->PruneHistory("j", 1, hours(48)));
  expect_refused(Req(ran.fire, "n2"), pruned_answer);
  CLAIM_OR_FAIL(inside, *coord_, Req(Fire("j", t0 - hours(24) + seconds(1)), "n"));
  CLAIM_OR_FAIL(other_job, *coord_, Req(Fire("k", t0 - hours(30)), "n"));
  // A prune that drops no marker bounds nothing.
  CLAIM_OR_FAIL(recent, *coord_, Req(Fire("m", t0 - hours(1)), "n"));
  ASSERT_OK(coord_->PruneHistory("m", 1, hours(24)));
  CLAIM_OR_FAIL(older_than_the_cutoff, *coord_, Req(Fire("m", t0 - hours(30)), "n"));
  // A backfill (a claim with a cause) is held to the cutoff too: the fire that ran, and one
  // behind the cutoff that never ran, are refused; one inside it is claimed.
  auto backfill = [](const FireKey& fire) {
    ClaimRequest req = Req(fire, "ops");
    req.cause = "backfill by ops";
    return req;
  };
  expect_refused(backfill(ran.fire), pruned_answer);
  if (dropped) expect_refused(backfill(Fire("j", t0 - hours(25))), R::kTooOld);
  CLAIM_OR_FAIL(backfilled, *coord_, backfill(Fire("j", t0 - hours(23))));
  EXPECT_EQ(backfilled.cause, "backfill by ops");
}

}  // namespace
}  // namespace gnomon::testing::conformance
