#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gnomon/executor.h"
#include "src/exec/test_util.h"

namespace gnomon {
namespace {

std::map<std::string, std::string> AsMap(const RunContext& ctx) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : RunEnvironment(ctx)) EXPECT_TRUE(m.emplace(k, v).second) << k;
  return m;
}

TEST(RunEnvironmentTest, HasEveryVariableOfTheProduct) {
  const auto env = AsMap(exec_testing::FullContext());
  const std::map<std::string, std::string> expected = {
      {"GNOMON_JOB_ID", "job-1"},
      {"GNOMON_RUN_ID", "job-1@1795987800000#1"},
      {"GNOMON_SCHEDULED_AT", "2026-11-29T21:30:00.000Z"},
      {"GNOMON_FENCING_TOKEN", "42"},
      {"GNOMON_ATTEMPT", "2"},
      {"GNOMON_NODE_ID", "node-a"},
      {"GNOMON_SHARD_INDEX", "1"},
      {"GNOMON_SHARD_COUNT", "3"},
      {"GNOMON_DEADLINE", "2026-11-29T21:31:00.250Z"},
      {"GNOMON_CHECKPOINT", "cp-7"},
      {"GNOMON_TRACEPARENT", exec_testing::kTraceparent},
      {"GNOMON_PARAMS", R"({"month":"2026-11","dry_run":true})"},
  };
  EXPECT_EQ(env, expected);
}

TEST(RunEnvironmentTest, UnsetDeadlineAndCheckpointAreEmpty) {
  RunContext ctx = exec_testing::FullContext();
  ctx.deadline.reset();
  ctx.checkpoint.reset();
  const auto env = AsMap(ctx);
  EXPECT_EQ(env.at("GNOMON_DEADLINE"), "");
  EXPECT_EQ(env.at("GNOMON_CHECKPOINT"), "");
  EXPECT_EQ(env.size(), 12u);
}

TEST(RunEnvironmentTest, ARunWithoutParametersSeesAnEmptyObject) {
  EXPECT_EQ(AsMap(RunContext{}).at("GNOMON_PARAMS"), "{}");
}

}  // namespace
}  // namespace gnomon
