#include "src/job/job_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gnomon {
namespace {

using ::testing::ElementsAre;

JobSpec Job(std::string id, std::vector<std::string> on_success = {},
            std::vector<std::string> on_failure = {}, std::vector<std::string> on_complete = {}) {
  JobSpec j;
  j.id = std::move(id);
  SetDependencies(
      j, DependencySpec{std::move(on_success), std::move(on_failure), std::move(on_complete)});
  return j;
}

std::vector<const JobSpec*> Ptrs(const std::vector<JobSpec>& jobs) {
  std::vector<const JobSpec*> out;
  for (const JobSpec& j : jobs) out.push_back(&j);
  return out;
}

TEST(JobGraphTest, AChainAndADiamondPass) {
  const std::vector<JobSpec> jobs = {Job("extract", {"transform"}),
                                     Job("transform", {"load"}, {"alert"}),
                                     Job("load", {}, {}, {"alert"}), Job("alert")};
  EXPECT_TRUE(CheckJobGraph(Ptrs(jobs)).ok());
  EXPECT_THAT(ParentsOf(Ptrs(jobs), "alert"), ElementsAre("load", "transform"));
  EXPECT_TRUE(ParentsOf(Ptrs(jobs), "extract").empty());
}

TEST(JobGraphTest, AChildThatIsNotDefinedIsNamed) {
  const std::vector<JobSpec> jobs = {Job("a", {}, {"pager"})};
  Status s = CheckJobGraph(Ptrs(jobs));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job \"a\": on_failure: \"pager\" is not defined");
}

TEST(JobGraphTest, ACycleIsRefusedWithItsPath) {
  const std::vector<JobSpec> jobs = {Job("start", {"a"}), Job("a", {"b"}), Job("b", {}, {}, {"c"}),
                                     Job("c", {}, {"a"})};
  Status s = CheckJobGraph(Ptrs(jobs));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job \"a\": on_success: a cycle: a -> b -> c -> a");
  // Two jobs naming each other.
  const std::vector<JobSpec> two = {Job("x", {}, {}, {"y"}), Job("y", {}, {"x"})};
  EXPECT_EQ(CheckJobGraph(Ptrs(two)).message(), "job \"x\": on_complete: a cycle: x -> y -> x");
}

TEST(JobGraphTest, ALongChainIsWalkedWithoutRecursion) {
  std::vector<JobSpec> jobs;
  constexpr int kLength = 100000;
  for (int i = 0; i < kLength; ++i) {
    jobs.push_back(Job("j" + std::to_string(i),
                       i + 1 < kLength ? std::vector<std::string>{"j" + std::to_string(i + 1)}
                                       : std::vector<std::string>{"j0"}));
  }
  Status s = CheckJobGraph(Ptrs(jobs));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.message().starts_with("job \"j0\": on_success: a cycle: j0 -> j1 -> "))
      << s.message().substr(0, 80);
  jobs.back() = Job("j" + std::to_string(kLength - 1));
  EXPECT_TRUE(CheckJobGraph(Ptrs(jobs)).ok());
}

JobSpec Join(std::string id, std::vector<std::string> after) {
  JobSpec j;
  j.id = std::move(id);
  DependencySpec d;
  d.after = std::move(after);
  SetDependencies(j, std::move(d));
  return j;
}

TEST(JobGraphTest, AJoinIsFiredByTheJobsItLists) {
  const std::vector<JobSpec> jobs = {Job("a", {"b"}), Job("b"), Join("publish", {"a", "b"})};
  EXPECT_TRUE(CheckJobGraph(Ptrs(jobs)).ok());
  EXPECT_THAT(ParentsOf(Ptrs(jobs), "publish"), ElementsAre("a", "b"));
  EXPECT_THAT(ParentsOf(Ptrs(jobs), "b"), ElementsAre("a"));
  EXPECT_THAT(JoinsOf(Ptrs(jobs), "a"), ElementsAre("publish"));
  EXPECT_THAT(DependentsOf(Ptrs(jobs), "b"), ElementsAre("a", "publish"));
  EXPECT_TRUE(DependentsOf(Ptrs(jobs), "publish").empty());

  const std::vector<JobSpec> missing = {Job("a"), Join("publish", {"a", "gone"})};
  EXPECT_EQ(CheckJobGraph(Ptrs(missing)).message(),
            "job \"publish\": after: \"gone\" is not defined");
  // A job both fires and joins another: no cycle.
  const std::vector<JobSpec> both = {Job("publish", {"x"}), Join("x", {"publish"})};
  EXPECT_TRUE(CheckJobGraph(Ptrs(both)).ok());
  // Two joins that wait for each other: a cycle through `after` (x's after names the edge
  // publish -> x).
  const std::vector<JobSpec> cycle = {Join("publish", {"x"}), Join("x", {"publish"})};
  EXPECT_EQ(CheckJobGraph(Ptrs(cycle)).message(),
            "job \"x\": after: a cycle: publish -> x -> publish");
  std::vector<JobSpec> sharded = {Job("s"), Join("j", {"s"})};
  sharded[0].shards = 3;
  EXPECT_EQ(CheckJobGraph(Ptrs(sharded)).message(),
            "job \"j\": after: \"s\" has shards > 1 (a join waits for one fire a job)");
}

TEST(JobGraphTest, AFilesJobIsNamedWithItsLine) {
  std::vector<JobSpec> jobs = {Job("a", {"nope"})};
  jobs[0].source = "jobs.toml:7";
  EXPECT_EQ(CheckJobGraph(Ptrs(jobs)).message(),
            "jobs.toml:7: job \"a\": on_success: \"nope\" is not defined");
}

TEST(JobGraphTest, ChildrenForFollowsTheOutcome) {
  const JobSpec j = Job("p", {"ok", "both"}, {"bad"}, {"both", "any"});
  EXPECT_THAT(ChildrenFor(j, RunOutcome::kSucceeded), ElementsAre("ok", "both", "any"));
  EXPECT_THAT(ChildrenFor(j, RunOutcome::kFailed), ElementsAre("bad", "both", "any"));
  EXPECT_THAT(ChildrenFor(j, RunOutcome::kTimedOut), ElementsAre("bad", "both", "any"));
  EXPECT_THAT(ChildrenFor(j, RunOutcome::kLost), ElementsAre("bad", "both", "any"));
  EXPECT_THAT(ChildrenFor(j, RunOutcome::kCancelled), ElementsAre("both", "any"));
  EXPECT_TRUE(ChildrenFor(j, RunOutcome::kSkipped).empty());
  EXPECT_TRUE(ChildrenFor(Job("none"), RunOutcome::kSucceeded).empty());
  EXPECT_FALSE(Job("none").dependencies) << "no dependencies are kept on the heap";
}

}  // namespace
}  // namespace gnomon
