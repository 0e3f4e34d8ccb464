// The conformance suite of AuditStore (gnomon/audit_store.h): order, paging, the results and the
// two bounded classes. Instantiated for every backend with the other roles' suites
// (coordinator_conformance.h).
#include <set>
#include <string>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

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
    r.result = AuditResult::kOk;
    r.before = i ? "{\"v\":" + std::to_string(i - 1) + "}" : "";
    r.after = "{\"v\":" + std::to_string(i) + "}";
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
  EXPECT_EQ((*all)[0].result, AuditResult::kOk);
  EXPECT_EQ((*all)[0].before, "{\"v\":5}");
  EXPECT_EQ((*all)[0].after, "{\"v\":6}");
  EXPECT_EQ((*all)[4].target, "job2");
  EXPECT_EQ((*all)[4].before, "{\"v\":1}");
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

// Calls that were not done (any result but kOk) are kept up to their own cap: a flood of them
// never evicts the record of a successful call, and the log still lists both kinds together by
// seq.
TEST_P(CoordinatorConformanceTest, FailedCallsAreCappedApartFromSuccessfulOnes) {
  auto append = [&](AuditResult result, const std::string& target) {
    AuditRecord r;
    r.who = "ops";
    r.action = "trigger";
    r.target = target;
    r.result = result;
    Result<int64_t> seq = coord_->AppendAudit(r, result == AuditResult::kOk ? 3 : 4);
    EXPECT_TRUE(seq.ok()) << seq.status().ToString();
    return seq.ok() ? *seq : 0;
  };
  const int64_t first_ok = append(AuditResult::kOk, "ok0");
  append(AuditResult::kOk, "ok1");
  for (int i = 0; i < 30; ++i) {
    append(i % 2 ? AuditResult::kDenied : AuditResult::kNotFound, "bad" + std::to_string(i));
  }
  const int64_t last_ok = append(AuditResult::kOk, "ok2");
  append(AuditResult::kConflict, "bad30");
  Result<std::vector<AuditRecord>> all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> targets;
  for (const AuditRecord& r : *all) targets.push_back(r.target);
  // Newest first: the 4 newest failures and all 3 successes, interleaved by seq.
  EXPECT_EQ(targets,
            (std::vector<std::string>{"bad30", "ok2", "bad29", "bad28", "bad27", "ok1", "ok0"}));
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LT((*all)[i].seq, (*all)[i - 1].seq);
  EXPECT_EQ(all->back().seq, first_ok);
  EXPECT_EQ((*all)[0].result, AuditResult::kConflict);
  EXPECT_EQ((*all)[1].result, AuditResult::kOk);
  EXPECT_EQ((*all)[2].result, AuditResult::kDenied);    // bad29
  EXPECT_EQ((*all)[3].result, AuditResult::kNotFound);  // bad28
  // Paging across both kinds.
  Result<std::vector<AuditRecord>> below = coord_->ListAudit(3, last_ok);
  ASSERT_TRUE(below.ok());
  ASSERT_EQ(below->size(), 3u);
  EXPECT_EQ((*below)[0].target, "bad29");
  EXPECT_EQ((*below)[2].target, "bad27");
  // The success cap still holds among successes.
  for (int i = 0; i < 3; ++i) append(AuditResult::kOk, "later" + std::to_string(i));
  all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok());
  int successes = 0;
  for (const AuditRecord& r : *all) successes += r.result == AuditResult::kOk ? 1 : 0;
  EXPECT_EQ(successes, 3);
  EXPECT_EQ(all->size(), 7u);
}

// Every result reads back as appended, with its other fields; every result but kOk is in the
// class of calls not done (bounded apart from the done ones).
TEST_P(CoordinatorConformanceTest, AuditResultsRoundTripAndChooseTheClass) {
  const std::vector<AuditResult> results = {AuditResult::kOk,          AuditResult::kInvalid,
                                            AuditResult::kDenied,      AuditResult::kNotFound,
                                            AuditResult::kConflict,    AuditResult::kRateLimited,
                                            AuditResult::kUnavailable, AuditResult::kFailed};
  for (size_t i = 0; i < results.size(); ++i) {
    AuditRecord r;
    r.who = "ops";
    r.action = "replace";
    r.target = "job" + std::to_string(i);
    r.result = results[i];
    r.before = "before " + std::to_string(i);
    r.after = std::string(AuditResultName(results[i]));
    ASSERT_TRUE(coord_->AppendAudit(r, 100).ok());
  }
  Result<std::vector<AuditRecord>> all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const AuditRecord& got = (*all)[results.size() - 1 - i];  // newest first
    EXPECT_EQ(got.target, "job" + std::to_string(i));
    EXPECT_EQ(got.result, results[i]) << AuditResultName(results[i]);
    EXPECT_EQ(got.before, "before " + std::to_string(i));
    EXPECT_EQ(got.after, AuditResultName(results[i]));
  }
  // One more done call, keeping 1 of its class: the other done call goes, no refused one does.
  AuditRecord done;
  done.who = "ops";
  done.action = "create";
  done.target = "later";
  ASSERT_TRUE(coord_->AppendAudit(done, 1).ok());
  all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), results.size());
  EXPECT_EQ((*all)[0].target, "later");
  for (size_t i = 1; i < all->size(); ++i) EXPECT_NE((*all)[i].result, AuditResult::kOk);
  // And a refused call keeping 1 of its class leaves the done one.
  AuditRecord refused = done;
  refused.target = "refused";
  refused.result = AuditResult::kDenied;
  ASSERT_TRUE(coord_->AppendAudit(refused, 1).ok());
  all = coord_->ListAudit(100, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].target, "refused");
  EXPECT_EQ((*all)[0].result, AuditResult::kDenied);
  EXPECT_EQ((*all)[1].target, "later");
  EXPECT_EQ((*all)[1].result, AuditResult::kOk);
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
}  // namespace gnomon::testing::conformance
