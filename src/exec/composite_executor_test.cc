#include "gnomon/composite_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "src/exec/test_util.h"

namespace gnomon {
namespace {

using exec_testing::FullContext;
using ::testing::HasSubstr;

// Answers with its own name in the output.
class NamedExecutor final : public Executor {
 public:
  explicit NamedExecutor(std::string name) : name_(std::move(name)) {}
  ExecResult Execute(const JobSpec&, const RunContext&) override {
    ExecResult r;
    r.output = name_;
    return r;
  }

 private:
  std::string name_;
};

class CompositeExecutorTest : public ::testing::Test {
 protected:
  NamedExecutor process_{"process"};
  NamedExecutor http_{"http"};
  NamedExecutor in_process_{"in_process"};
  CompositeExecutor composite_{{&process_, &http_, &in_process_}};
};

TEST_F(CompositeExecutorTest, DispatchesByKind) {
  JobSpec job;
  job.id = "j";
  job.command = "true";
  EXPECT_EQ(composite_.Execute(job, FullContext()).output, "process");
  job.command.clear();
  job.argv = {"true"};
  EXPECT_EQ(composite_.Execute(job, FullContext()).output, "process");
  job.argv.clear();
  job.http = HttpTarget{"http://127.0.0.1:1/", "POST", {}};
  EXPECT_EQ(composite_.Execute(job, FullContext()).output, "http");
  job.http.reset();
  job.in_process = true;
  EXPECT_EQ(composite_.Execute(job, FullContext()).output, "in_process");
}

TEST_F(CompositeExecutorTest, NoneOrSeveralKindsFail) {
  JobSpec job;
  job.id = "j";
  ExecResult r = composite_.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("job \"j\": no executor"));
  job.command = "true";
  job.in_process = true;
  r = composite_.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("more than one executor"));
}

TEST(CompositeExecutorMissingTest, KindWithoutExecutorFails) {
  CompositeExecutor composite({});
  JobSpec job;
  job.id = "j";
  job.http = HttpTarget{"http://127.0.0.1:1/", "POST", {}};
  const ExecResult r = composite.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("no http executor"));
}

}  // namespace
}  // namespace gnomon
