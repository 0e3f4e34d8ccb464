// The conformance suite of DefinitionStore (gnomon/definition_store.h): versioned definitions,
// GetJob, JobsVersion and WaitJobsChange. Instantiated for every backend with the other roles'
// suites (coordinator_conformance.h).
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

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
  EXPECT_EQ((*jobs)[1].definition, R"({"schedule":"@hourly"})");
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

// GetJob answers one definition: its bytes exactly as put (the store never parses them) and its
// version, the same as ListJobs; NotFound for a job without one.
TEST_P(CoordinatorConformanceTest, GetJobReturnsOneDefinitionAsStored) {
  EXPECT_CODE(coord_->GetJob("report").status(), StatusCode::kNotFound);
  EXPECT_CODE(coord_->GetJob("bad id").status(), StatusCode::kNotFound);
  const std::string opaque = std::string("not json\n{\"x\":1}\0\xff\r\n end", 24);
  Result<int64_t> v1 = coord_->PutJob("report", opaque, 0);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  ASSERT_OK(coord_->PutJob("other", "{}", 0).status());
  Result<StoredJob> got = coord_->GetJob("report");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->job_id, "report");
  EXPECT_TRUE(got->definition == opaque) << got->definition.size() << " bytes";
  EXPECT_EQ(got->version, *v1);
  Result<std::vector<StoredJob>> listed = coord_->ListJobs();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_TRUE((*listed)[1].definition == opaque);
  EXPECT_EQ((*listed)[1].version, *v1);

  Result<int64_t> v2 = coord_->PutJob("report", "", *v1);
  ASSERT_TRUE(v2.ok());
  got = coord_->GetJob("report");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->definition, "");
  EXPECT_EQ(got->version, *v2);
  EXPECT_CODE(coord_->GetJob("repor").status(), StatusCode::kNotFound);
  ASSERT_OK(coord_->DeleteJob("report", *v2));
  EXPECT_CODE(coord_->GetJob("report").status(), StatusCode::kNotFound);
  EXPECT_EQ(coord_->GetJob("other")->definition, "{}");
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

}  // namespace
}  // namespace gnomon::testing::conformance
