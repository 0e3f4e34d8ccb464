#include "gnomon/in_process_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "src/exec/test_util.h"

namespace gnomon {
namespace {

using exec_testing::FullContext;
using ::testing::HasSubstr;

JobSpec InProcessJob(std::string id = "job-1") {
  JobSpec job;
  job.id = std::move(id);
  job.in_process = true;
  return job;
}

TEST(InProcessExecutorTest, OkSucceedsAndTheHandlerSeesTheContext) {
  InProcessExecutor executor;
  RunContext seen;
  ASSERT_TRUE(executor
                  .Register("job-1",
                            [&](const RunContext& ctx) {
                              seen = ctx;
                              return ctx.Checkpoint("cp-8");
                            })
                  .ok());
  RunContext ctx = FullContext();
  std::vector<std::string> saved;
  ctx.save_checkpoint = [&](const std::string& v) {
    saved.push_back(v);
    return Status::Ok();
  };
  const ExecResult r = executor.Execute(InProcessJob(), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(seen.run_id, "job-1@1795987800000#1");
  EXPECT_EQ(seen.fencing_token, 42);
  EXPECT_EQ(seen.checkpoint, "cp-7");
  EXPECT_EQ(saved, std::vector<std::string>{"cp-8"});
}

TEST(InProcessExecutorTest, ErrorStatusFailsWithItsMessage) {
  InProcessExecutor executor;
  ASSERT_TRUE(
      executor.Register("job-1", [](const RunContext&) { return UnavailableError("db is down"); })
          .ok());
  const ExecResult r = executor.Execute(InProcessJob(), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.error, "Unavailable: db is down");
}

TEST(InProcessExecutorTest, ExceptionFails) {
  InProcessExecutor executor;
  ASSERT_TRUE(
      executor
          .Register("job-1", [](const RunContext&) -> Status { throw std::runtime_error("kaput"); })
          .ok());
  ASSERT_TRUE(executor.Register("job-2", [](const RunContext&) -> Status { throw 7; }).ok());
  ExecResult r = executor.Execute(InProcessJob(), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.error, "handler threw: kaput");
  r = executor.Execute(InProcessJob("job-2"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("handler threw"));
}

TEST(InProcessExecutorTest, MissingHandlerFails) {
  InProcessExecutor executor;
  const ExecResult r = executor.Execute(InProcessJob("nobody"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.error, "no in-process handler registered for job \"nobody\"");
}

// The fallback runs jobs without a handler of their own (and tells them apart by ctx.job_id); a
// job's own handler wins; an empty fallback removes it.
TEST(InProcessExecutorTest, FallbackRunsJobsWithoutTheirOwnHandler) {
  InProcessExecutor executor;
  std::vector<std::string> fallback_saw, own_saw;
  executor.SetFallback([&](const RunContext& ctx) -> Status {
    fallback_saw.push_back(ctx.job_id);
    return Status::Ok();
  });
  ASSERT_TRUE(executor
                  .Register("mine",
                            [&](const RunContext& ctx) -> Status {
                              own_saw.push_back(ctx.job_id);
                              return InternalError("own handler");
                            })
                  .ok());
  RunContext a = FullContext();
  a.job_id = "a";
  EXPECT_EQ(executor.Execute(InProcessJob("a"), a).outcome, RunOutcome::kSucceeded);
  RunContext mine = FullContext();
  mine.job_id = "mine";
  EXPECT_EQ(executor.Execute(InProcessJob("mine"), mine).outcome, RunOutcome::kFailed);
  EXPECT_THAT(fallback_saw, ::testing::ElementsAre("a"));
  EXPECT_THAT(own_saw, ::testing::ElementsAre("mine"));
  EXPECT_FALSE(executor.Contains("a"));
  executor.SetFallback(nullptr);
  const ExecResult r = executor.Execute(InProcessJob("a"), a);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.error, "no in-process handler registered for job \"a\"");
}

TEST(InProcessExecutorTest, ErrorAfterStopIsCancelled) {
  InProcessExecutor executor;
  std::stop_source stop;
  ASSERT_TRUE(executor
                  .Register("job-1",
                            [&](const RunContext& ctx) {
                              stop.request_stop();  // e.g. the lease was lost meanwhile
                              return ctx.stop_requested() ? DeadlineExceededError("gave up")
                                                          : Status::Ok();
                            })
                  .ok());
  RunContext ctx = FullContext();
  ctx.stop = stop.get_token();
  const ExecResult r = executor.Execute(InProcessJob(), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kCancelled);
  EXPECT_THAT(r.error, HasSubstr("gave up"));
}

TEST(InProcessExecutorTest, OkAfterStopStillSucceeds) {
  InProcessExecutor executor;
  std::stop_source stop;
  ASSERT_TRUE(executor
                  .Register("job-1",
                            [&](const RunContext&) {
                              stop.request_stop();
                              return Status::Ok();
                            })
                  .ok());
  RunContext ctx = FullContext();
  ctx.stop = stop.get_token();
  EXPECT_EQ(executor.Execute(InProcessJob(), ctx).outcome, RunOutcome::kSucceeded);
}

TEST(InProcessExecutorTest, StopBeforeStartDoesNotCallTheHandler) {
  InProcessExecutor executor;
  bool called = false;
  ASSERT_TRUE(executor
                  .Register("job-1",
                            [&](const RunContext&) {
                              called = true;
                              return Status::Ok();
                            })
                  .ok());
  RunContext ctx = FullContext();
  std::stop_source stop;
  ctx.stop = stop.get_token();
  stop.request_stop();
  EXPECT_EQ(executor.Execute(InProcessJob(), ctx).outcome, RunOutcome::kCancelled);
  EXPECT_FALSE(called);
}

TEST(InProcessExecutorTest, RegistryRules) {
  InProcessExecutor executor;
  auto ok = [](const RunContext&) { return Status::Ok(); };
  EXPECT_EQ(executor.Register("job-1", nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(executor.Register("job-1", ok).ok());
  EXPECT_TRUE(executor.Contains("job-1"));
  EXPECT_EQ(executor.Register("job-1", ok).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(executor.Unregister("job-1"));
  EXPECT_FALSE(executor.Unregister("job-1"));
  EXPECT_FALSE(executor.Contains("job-1"));
  EXPECT_TRUE(executor.Register("job-1", ok).ok());
}

TEST(InProcessExecutorTest, ConcurrentRegistrationAndExecution) {
  InProcessExecutor executor;
  std::atomic<int> calls{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const std::string id = "job-" + std::to_string(t);
        for (int i = 0; i < 200; ++i) {
          ASSERT_TRUE(executor
                          .Register(id,
                                    [&](const RunContext&) {
                                      ++calls;
                                      return Status::Ok();
                                    })
                          .ok());
          EXPECT_EQ(executor.Execute(InProcessJob(id), FullContext()).outcome,
                    RunOutcome::kSucceeded);
          EXPECT_TRUE(executor.Unregister(id));
        }
      });
    }
  }
  EXPECT_EQ(calls.load(), 800);
}

}  // namespace
}  // namespace gnomon
