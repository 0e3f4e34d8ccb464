// Helpers the role conformance suites share (internal to the suite, src/coord/*_conformance.cc):
// fires, claim requests and records to write, comparisons, paging, and a release of many threads
// at once. Every function fails the calling test (EXPECT/ASSERT) rather than returning an error.
#ifndef GNOMON_SRC_COORD_CONFORMANCE_HELPERS_H_
#define GNOMON_SRC_COORD_CONFORMANCE_HELPERS_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gnomon/coordinator.h"

namespace gnomon::testing::conformance {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

inline constexpr Duration kTtl = seconds(30);
inline constexpr int kThreads = 8;

inline FireKey Fire(const std::string& job, Instant at, int shard = 0, int shard_count = 1) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  f.shard = shard;
  f.shard_count = shard_count;
  return f;
}

inline ClaimRequest Req(const FireKey& fire, const std::string& node,
                        OverlapPolicy overlap = OverlapPolicy::kAllow, Duration ttl = kTtl) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = node;
  r.lease_ttl = ttl;
  r.overlap = overlap;
  return r;
}

// A final (or not) record of `claim`'s attempt with every field set.
inline RunRecord RecordOf(const Claim& claim, RunOutcome outcome, Instant started,
                          Instant finished) {
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

inline void ExpectSameRecord(const RunRecord& got, const RunRecord& want) {
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

inline std::vector<RunRecord> RunsOf(Coordinator& c, const std::string& run_id) {
  Result<std::vector<RunRecord>> r = c.GetRun(run_id);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
    return {};
  }
  return *r;
}

inline int64_t Version(Coordinator& c) {
  Result<int64_t> v = c.JobsVersion();
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

// Every record matching `q`, page by page; fails the test on an error.
inline std::vector<RunRecord> AllPages(Coordinator& c, RunQuery q, int* pages = nullptr) {
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
inline void RunConcurrently(const std::function<void(int)>& fn) {
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

}  // namespace gnomon::testing::conformance

#endif  // GNOMON_SRC_COORD_CONFORMANCE_HELPERS_H_
