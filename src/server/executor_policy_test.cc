// Executor policies: what jobs defined through the API may run, and as whom; the definition-time
// check (403 through the API) and the run-time guard.
#include "src/server/executor_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/test_api_server.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;

JobSpec Command(std::string id, std::string command, std::string run_as = "nobody") {
  JobSpec j;
  j.id = std::move(id);
  j.schedule = "@daily";
  j.command = std::move(command);
  j.run_as = std::move(run_as);
  j.source = "api";
  return j;
}

JobSpec Argv(std::string id, std::vector<std::string> argv) {
  JobSpec j = Command(std::move(id), "");
  j.argv = std::move(argv);
  return j;
}

JobSpec Http(std::string id, std::string url) {
  JobSpec j;
  j.id = std::move(id);
  j.schedule = "@daily";
  j.http = HttpTarget{std::move(url), "POST", {}};
  j.source = "api";
  return j;
}

TEST(PoliciesTest, BadPoliciesNameTheField) {
  auto error = [](ExecutorPolicy p) { return Policies::Make({p}).status().message(); };
  ExecutorPolicy p;
  p.executors = {"command", "ssh"};
  EXPECT_THAT(error(p), HasSubstr("policy \"default\": executors: \"ssh\""));
  p = ExecutorPolicy{};
  p.commands = {"bin/tool"};
  EXPECT_THAT(error(p), HasSubstr("commands: \"bin/tool\" is not an absolute path"));
  p = ExecutorPolicy{};
  p.egress_deny = {"10.0.0.0/33"};
  EXPECT_THAT(error(p), HasSubstr("egress_deny"));
  p = ExecutorPolicy{};
  p.run_as = "a b";
  EXPECT_THAT(error(p), HasSubstr("run_as"));
  ExecutorPolicy a, b;
  EXPECT_THAT(Policies::Make({a, b}).status().message(), HasSubstr("one default"));
  a.ns = b.ns = "x.";
  EXPECT_THAT(Policies::Make({a, b}).status().message(), HasSubstr("defined twice"));
}

TEST(PoliciesTest, TheLongestNamespaceDecides) {
  ExecutorPolicy billing, eu, def;
  billing.ns = "billing.";
  billing.executors = {"argv"};
  eu.ns = "billing.eu.";
  eu.executors = {"http"};
  def.executors = {"command"};
  Policies p = *Policies::Make({billing, eu, def});
  EXPECT_EQ(p.For("billing.x").executors, std::vector<std::string>{"argv"});
  EXPECT_EQ(p.For("billing.eu.x").executors, std::vector<std::string>{"http"});
  EXPECT_EQ(p.For("etl.x").executors, std::vector<std::string>{"command"});
}

TEST(PoliciesTest, ExecutorsAndProgramsAreChecked) {
  ExecutorPolicy ops;
  ops.ns = "ops.";
  ops.executors = {"argv", "command"};
  ops.commands = {"/usr/bin/rsync", "/opt/ops/bin/", "/usr/local/bin/backup --full"};
  Policies p = *Policies::Make({ops});
  EXPECT_TRUE(p.Check(Argv("ops.a", {"/usr/bin/rsync", "-a"}), false).ok());
  EXPECT_TRUE(p.Check(Argv("ops.b", {"/opt/ops/bin/clean"}), false).ok());
  EXPECT_TRUE(p.Check(Command("ops.c", "/usr/local/bin/backup --full"), false).ok());
  const Status outside = p.Check(Argv("ops.d", {"/bin/sh", "-c", "id"}), false);
  EXPECT_EQ(outside.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(outside.message(),
              HasSubstr("policy \"ops.\": argv[0] \"/bin/sh\" is not in commands"));
  EXPECT_FALSE(p.Check(Argv("ops.e", {"/opt/ops/bin/../../../bin/sh"}), false).ok());
  EXPECT_FALSE(p.Check(Argv("ops.f", {"/opt/ops/bin/sub/x"}), false).ok());
  EXPECT_FALSE(p.Check(Command("ops.g", "/usr/local/bin/backup --full; id"), false).ok());
  EXPECT_THAT(p.Check(Http("ops.h", "http://10.0.0.1/"), false).message(),
              HasSubstr("the http executor is not allowed"));
}

TEST(PoliciesTest, EgressOfHttpJobs) {
  Policies builtin;  // denies link-local by default
  const Status metadata =
      builtin.Check(Http("x", "http://169.254.169.254/latest/meta-data"), false);
  EXPECT_EQ(metadata.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(metadata.message(),
              HasSubstr("169.254.169.254 is denied by egress_deny 169.254.0.0/16"));
  EXPECT_FALSE(builtin.Check(Http("x", "http://[fe80::1]:8080/"), false).ok());
  EXPECT_TRUE(builtin.Check(Http("x", "http://10.1.2.3/"), false).ok());
  ExecutorPolicy narrow;
  narrow.egress_allow = {"10.0.0.0/8"};
  narrow.egress_deny = {"10.9.0.0/16"};
  Policies p = *Policies::Make({narrow});
  EXPECT_TRUE(p.Check(Http("x", "http://10.1.2.3/"), false).ok());
  EXPECT_THAT(p.Check(Http("x", "http://10.9.0.1/"), false).message(), HasSubstr("egress_deny"));
  EXPECT_THAT(p.Check(Http("x", "http://192.168.1.1/"), false).message(),
              HasSubstr("not in egress_allow"));
  // Host names are checked when connecting (the HTTP client), not here.
  EXPECT_TRUE(p.Check(Http("x", "http://service.internal/"), false).ok());
}

TEST(PoliciesTest, RootNeedsAllowRoot) {
  Policies p;
  EXPECT_TRUE(p.Check(Command("a", "id", ""), /*daemon_is_root=*/false).ok());
  EXPECT_THAT(p.Check(Command("a", "id", ""), /*daemon_is_root=*/true).message(),
              HasSubstr("may not run as root"));
  EXPECT_FALSE(p.Check(Command("a", "id", "root"), false).ok());
  EXPECT_FALSE(p.Check(Command("a", "id", "0:0"), false).ok());
  EXPECT_TRUE(p.Check(Command("a", "id", "nobody"), true).ok());
  ExecutorPolicy root;
  root.allow_root = true;
  EXPECT_TRUE(Policies::Make({root})->Check(Command("a", "id", "root"), true).ok());
  // A policy's run_as is the default of process jobs that set none.
  ExecutorPolicy etl;
  etl.ns = "etl.";
  etl.run_as = "nobody";
  Policies with = *Policies::Make({etl});
  EXPECT_EQ(with.WithDefaults(Command("etl.a", "id", "")).run_as, "nobody");
  EXPECT_EQ(with.WithDefaults(Command("etl.a", "id", "daemon")).run_as, "daemon");
  EXPECT_TRUE(with.WithDefaults(Http("etl.h", "http://h/")).run_as.empty());
  EXPECT_TRUE(with.Check(Command("etl.a", "id", ""), true).ok());
}

// The run-time guard: a job defined through the API that its policy refuses fails its run with
// the rule; jobs from files run whatever the policy says.
TEST(PolicyGuardTest, RefusesRunsThePolicyForbids) {
  testing::RecordingExecutor next;
  ExecutorPolicy argv_only;
  argv_only.executors = {"argv"};
  argv_only.allow_root = true;
  Reloadable<Policies> policies(*Policies::Make({argv_only}));
  PolicyGuard guard(next, policies);
  RunContext ctx;
  const ExecResult refused = guard.Execute(Command("a", "id"), ctx);
  EXPECT_EQ(refused.outcome, RunOutcome::kFailed);
  EXPECT_THAT(refused.error, HasSubstr("the command executor is not allowed"));
  EXPECT_EQ(next.started(), 0);
  JobSpec from_file = Command("a", "id");
  from_file.source = "jobs.toml:3";
  EXPECT_EQ(guard.Execute(from_file, ctx).outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(guard.Execute(Argv("b", {"/bin/true"}), ctx).outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(next.started(), 2);
  // A reload that tightens the policy applies to the next run.
  ExecutorPolicy none;
  none.executors = {"http"};
  policies.Set(*Policies::Make({none}));
  EXPECT_EQ(guard.Execute(Argv("b", {"/bin/true"}), ctx).outcome, RunOutcome::kFailed);
}

TEST(PolicyGuardTest, AUserWithUidZeroIsRoot) {
  EXPECT_TRUE(RunsAsRoot(Command("a", "id", "root")));
  EXPECT_TRUE(RunsAsRoot(Command("a", "id", "0")));
  EXPECT_FALSE(RunsAsRoot(Command("a", "id", "nobody")));
  EXPECT_FALSE(RunsAsRoot(Command("a", "id", "65534:65534")));
  EXPECT_EQ(RunsAsRoot(Command("a", "id", "")), ::geteuid() == 0);
}

// Through the API: a refused definition is a 403 naming the rule, and nothing is stored.
TEST(PolicyApiTest, RefusedDefinitionsAre403) {
  testing::FakeClock clock;
  testing::MemoryCoordinator coord(clock);
  testing::RecordingExecutor exec;
  SchedulerOptions so;
  so.node_id = "n1";
  Scheduler scheduler(so, coord, exec, clock);
  ASSERT_TRUE(scheduler.Start().ok());
  MetricsObserver metrics("1");
  ExecutorPolicy billing;
  billing.ns = "billing.";
  billing.executors = {"argv"};
  billing.run_as = "nobody";
  Reloadable<Policies> policies(*Policies::Make({billing}));
  HttpApiOptions o;
  o.clock = &clock;
  TestApiServer server(scheduler, coord, metrics,
                       {{"adm", "admin-secret-0123456789", TokenRole::kAdmin, {}}}, o, {}, {},
                       policies);
  ASSERT_TRUE(server.Start().ok());
  auto client = server.Client();
  const httplib::Headers auth = {{"Authorization", "Bearer admin-secret-0123456789"}};
  auto r =
      client->Post("/api/v1/jobs", auth, R"({"id":"billing.a","schedule":"@daily","command":"id"})",
                   "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_THAT(r->body, HasSubstr("policy_denied"));
  EXPECT_THAT(r->body, HasSubstr("the command executor is not allowed"));
  r = client->Post("/api/v1/jobs", auth,
                   R"({"id":"billing.b","schedule":"@daily","argv":["/bin/true"]})",
                   "application/json");
  EXPECT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(scheduler.GetJob("billing.b")->spec.run_as, "nobody");  // the policy's default
  r = client->Post("/api/v1/jobs", auth,
                   R"({"id":"etl.c","schedule":"@daily","http":{"url":"http://169.254.169.254/"}})",
                   "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_THAT(r->body, HasSubstr("egress_deny 169.254.0.0/16"));
  if (::geteuid() == 0) {
    r = client->Post("/api/v1/jobs", auth, R"({"id":"etl.d","schedule":"@daily","command":"id"})",
                     "application/json");
    EXPECT_EQ(r->status, 403);
    EXPECT_THAT(r->body, HasSubstr("may not run as root"));
  }
  EXPECT_EQ(coord.ListJobs()->size(), 1u);
  server.server.Stop();
  scheduler.Stop();
}

}  // namespace
}  // namespace gnomon::server
