// A real httplib::Server on a free loopback port, started by each test (and a TLS one where the
// test needs it).
#include "gnomon/http_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <thread>

#include "gnomon/net.h"
#include "gnomon/testing/fake_clock.h"
#include "src/exec/test_util.h"
#include "src/net/test_servers.h"

namespace gnomon {
namespace {

using exec_testing::FullContext;
using ::testing::HasSubstr;

class HttpExecutorTest : public ::testing::Test {
 protected:
  struct Seen {
    std::string method;
    std::multimap<std::string, std::string> headers;  // lower-case names
    std::string body;
  };

  void SetUp() override {
    auto record = [this](const httplib::Request& req) {
      std::lock_guard lock(mu_);
      Seen seen{req.method, {}, req.body};
      for (const auto& [name, value] : req.headers) {
        std::string lower = name;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        seen.headers.emplace(lower, value);
      }
      seen_.push_back(std::move(seen));
    };
    server_.Post("/ok", [record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_content("fine", "text/plain");
    });
    server_.Get("/ok", [record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_content("fine", "text/plain");
    });
    server_.Post("/fail", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content("boom", "text/plain");
    });
    server_.Post("/big", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(big_body_, "text/plain");
    });
    server_.Post("/block", [this](const httplib::Request&, httplib::Response& res) {
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      SystemClock::Get().WaitFor(lock, cv_, std::chrono::seconds(60), [&] { return released_; });
      res.set_content("late", "text/plain");
    });
    server_.Get("/ping", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("pong", "text/plain");
    });
    for (int i = 0; big_body_.size() < 1'000'000; ++i) big_body_ += std::to_string(i) + ",";

    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    server_thread_ = std::jthread([this] { server_.listen_after_bind(); });
    // One served request proves the accept loop runs (so that stop() in TearDown reaches it).
    httplib::Client probe("127.0.0.1", port_);
    const auto res = probe.Get("/ping");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }

  void TearDown() override {
    Release();
    server_.stop();
    if (server_thread_.joinable()) server_thread_.join();
  }

  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool AwaitEntered(int n) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, std::chrono::seconds(20),
                                      [&] { return entered_ >= n; });
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

  JobSpec HttpJob(const std::string& path, const std::string& method = "POST") {
    JobSpec job;
    job.id = "job-1";
    job.http = HttpTarget{"http://127.0.0.1:" + std::to_string(port_) + path, method, {}};
    return job;
  }

  // "Now" for turning deadlines into timeouts: FullContext's scheduled instant.
  testing::FakeClock clock_{FullContext().scheduled_at};
  httplib::Server server_;
  std::jthread server_thread_;
  int port_ = 0;
  std::string big_body_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;  // guarded by mu_
  int entered_ = 0;         // guarded by mu_
  bool released_ = false;   // guarded by mu_
};

TEST_F(HttpExecutorTest, Status200Succeeds) {
  HttpExecutor executor({}, clock_);
  const ExecResult r = executor.Execute(HttpJob("/ok"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.exit_code, 200);
  EXPECT_EQ(r.output, "fine");
}

TEST_F(HttpExecutorTest, Status500FailsWithTheStatusAndBody) {
  HttpExecutor executor({}, clock_);
  const ExecResult r = executor.Execute(HttpJob("/fail"), FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 500);
  EXPECT_THAT(r.error, HasSubstr("HTTP status 500"));
  EXPECT_EQ(r.output, "boom");
}

TEST_F(HttpExecutorTest, ServerReceivesRunHeadersAndJsonBody) {
  HttpExecutor executor({}, clock_);
  JobSpec job = HttpJob("/ok");
  job.http->headers = {{"X-Team", "fin"}, {"x-gnomon-job-id", "spoofed"}};
  const ExecResult r = executor.Execute(job, FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  const auto all = seen();
  ASSERT_EQ(all.size(), 1u);
  const Seen& s = all[0];
  EXPECT_EQ(s.method, "POST");
  const std::map<std::string, std::string> expected = {
      {"x-team", "fin"},
      {"x-gnomon-job-id", "job-1"},
      {"x-gnomon-run-id", "job-1@1795987800000#1"},
      {"x-gnomon-scheduled-at", "2026-11-29T21:30:00.000Z"},
      {"x-gnomon-fencing-token", "42"},
      {"x-gnomon-attempt", "2"},
      {"x-gnomon-node-id", "node-a"},
      {"x-gnomon-shard-index", "1"},
      {"x-gnomon-shard-count", "3"},
      {"x-gnomon-deadline", "2026-11-29T21:31:00.250Z"},
      {"x-gnomon-checkpoint", "cp-7"},
      {"traceparent", exec_testing::kTraceparent},
      {"content-type", "application/json"},
  };
  for (const auto& [name, value] : expected) {
    EXPECT_EQ(s.headers.count(name), 1u) << name;
    const auto it = s.headers.find(name);
    if (it != s.headers.end()) {
      EXPECT_EQ(it->second, value) << name;
    }
  }
  const nlohmann::json body = nlohmann::json::parse(s.body);
  EXPECT_EQ(body, nlohmann::json({
                      {"job_id", "job-1"},
                      {"run_id", "job-1@1795987800000#1"},
                      {"scheduled_at", "2026-11-29T21:30:00.000Z"},
                      {"fencing_token", 42},
                      {"attempt", 2},
                      {"node_id", "node-a"},
                      {"shard_index", 1},
                      {"shard_count", 3},
                      {"deadline", "2026-11-29T21:31:00.250Z"},
                      {"checkpoint", "cp-7"},
                      {"traceparent", exec_testing::kTraceparent},
                      {"params", {{"month", "2026-11"}, {"dry_run", true}}},
                  }));
  // A POST carries its parameters in the body only.
  EXPECT_EQ(s.headers.count("x-gnomon-params"), 0u);
}

TEST_F(HttpExecutorTest, GetSendsHeadersWithoutBody) {
  HttpExecutor executor({}, clock_);
  RunContext ctx = FullContext();
  ctx.deadline.reset();
  ctx.checkpoint = "line1\nline2";  // cannot be a header value
  const ExecResult r = executor.Execute(HttpJob("/ok", "GET"), ctx);
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  const auto all = seen();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].method, "GET");
  EXPECT_EQ(all[0].body, "");
  ASSERT_EQ(all[0].headers.count("x-gnomon-job-id"), 1u);
  EXPECT_EQ(all[0].headers.find("x-gnomon-job-id")->second, "job-1");
  EXPECT_EQ(all[0].headers.count("x-gnomon-deadline"), 0u);
  EXPECT_EQ(all[0].headers.count("x-gnomon-checkpoint"), 0u);
  EXPECT_EQ(all[0].headers.count("x-gnomon-fencing-token"), 1u);
  // A GET has no body: the parameters travel in a header.
  ASSERT_EQ(all[0].headers.count("x-gnomon-params"), 1u);
  EXPECT_EQ(nlohmann::json::parse(all[0].headers.find("x-gnomon-params")->second),
            nlohmann::json({{"month", "2026-11"}, {"dry_run", true}}));
}

TEST_F(HttpExecutorTest, NullDeadlineAndCheckpointInTheBody) {
  HttpExecutor executor({}, clock_);
  RunContext ctx = FullContext();
  ctx.deadline.reset();
  ctx.checkpoint.reset();
  ASSERT_EQ(executor.Execute(HttpJob("/ok"), ctx).outcome, RunOutcome::kSucceeded);
  const nlohmann::json body = nlohmann::json::parse(seen().at(0).body);
  EXPECT_TRUE(body.at("deadline").is_null());
  EXPECT_TRUE(body.at("checkpoint").is_null());
  ctx.params = "{}";
  ASSERT_EQ(executor.Execute(HttpJob("/ok"), ctx).outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(nlohmann::json::parse(seen().at(1).body).at("params"), nlohmann::json::object());
}

TEST_F(HttpExecutorTest, KeepsTheLast64KiBOfTheBody) {
  HttpExecutor executor({}, clock_);
  const ExecResult r = executor.Execute(HttpJob("/big"), FullContext());
  ASSERT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, big_body_.substr(big_body_.size() - kMaxOutputBytes));
}

TEST_F(HttpExecutorTest, DeadlineBecomesTheRequestTimeout) {
  testing::FakeClock clock;  // "now" for the deadline arithmetic only
  HttpExecutor executor({.default_timeout = std::chrono::seconds(60)}, clock);
  RunContext ctx = FullContext();
  ctx.deadline = clock.Now() + std::chrono::milliseconds(300);
  const Duration start = SystemClock::Get().SteadyNow();
  const ExecResult r = executor.Execute(HttpJob("/block"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_THAT(r.error, HasSubstr("POST " + HttpJob("/block").http->url + ": total timeout 300ms"));
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, std::chrono::seconds(20));
}

TEST_F(HttpExecutorTest, WithoutADeadlineSilenceEndsTheRequest) {
  HttpExecutor executor({.default_timeout = std::chrono::seconds(1)}, clock_);
  RunContext ctx = FullContext();
  ctx.deadline.reset();
  const Duration start = SystemClock::Get().SteadyNow();
  const ExecResult r = executor.Execute(HttpJob("/block"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr(": idle timeout 1s"));
  EXPECT_LT(SystemClock::Get().SteadyNow() - start, std::chrono::seconds(20));
}

TEST_F(HttpExecutorTest, PassedDeadlineFailsWithoutARequest) {
  testing::FakeClock clock;
  HttpExecutor executor({}, clock);
  RunContext ctx = FullContext();
  ctx.deadline = clock.Now() - std::chrono::seconds(1);
  const ExecResult r = executor.Execute(HttpJob("/ok"), ctx);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("deadline passed"));
  EXPECT_TRUE(seen().empty());
}

TEST_F(HttpExecutorTest, StopCancelsAPendingRequest) {
  HttpExecutor executor({.default_timeout = std::chrono::seconds(60)}, clock_);
  RunContext ctx = FullContext();
  ctx.deadline.reset();
  std::stop_source stop;
  ctx.stop = stop.get_token();
  ExecResult r;
  Duration returned_at{0};
  std::jthread runner([&] {
    r = executor.Execute(HttpJob("/block"), ctx);
    returned_at = SystemClock::Get().SteadyNow();
  });
  ASSERT_TRUE(AwaitEntered(1));
  const Duration stopped_at = SystemClock::Get().SteadyNow();
  stop.request_stop();
  runner.join();
  EXPECT_EQ(r.outcome, RunOutcome::kCancelled) << r.error;
  EXPECT_LT(returned_at - stopped_at, std::chrono::milliseconds(100));
}

TEST_F(HttpExecutorTest, StopBeforeStartSendsNothing) {
  HttpExecutor executor({}, clock_);
  RunContext ctx = FullContext();
  std::stop_source stop;
  ctx.stop = stop.get_token();
  stop.request_stop();
  EXPECT_EQ(executor.Execute(HttpJob("/ok"), ctx).outcome, RunOutcome::kCancelled);
  EXPECT_TRUE(seen().empty());
}

TEST_F(HttpExecutorTest, ConnectionRefusedFails) {
  // A bound socket that does not listen refuses connections.
  const int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(sock, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  JobSpec job;
  job.id = "job-1";
  job.http =
      HttpTarget{"http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/", "POST", {}};
  HttpExecutor executor({}, clock_);
  const ExecResult r = executor.Execute(job, FullContext());
  close(sock);
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_THAT(r.error, HasSubstr("POST " + job.http->url + ": connect: "));
}

TEST_F(HttpExecutorTest, LinkLocalTargetsAreRefusedByDefault) {
  HttpExecutor executor({}, clock_);
  JobSpec job = HttpJob("/ok");
  job.http->url = "http://169.254.169.254/latest/meta-data/";
  const ExecResult r = executor.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.error,
            "POST http://169.254.169.254/latest/meta-data/: egress: 169.254.169.254 is denied by "
            "egress_deny "
            "169.254.0.0/16");
}

TEST_F(HttpExecutorTest, TheEgressRuleOfTheOptionsIsApplied) {
  Result<net::EgressRule> rule = net::EgressRule::Parse({}, {"127.0.0.0/8"});
  ASSERT_TRUE(rule.ok());
  HttpExecutor executor({.egress = *rule}, clock_);
  JobSpec job = HttpJob("/ok");
  job.http->url = "http://localhost:" + std::to_string(port_) + "/ok";
  const ExecResult r = executor.Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kFailed);
  EXPECT_THAT(r.error, HasSubstr("egress: 127.0.0.1 is denied by egress_deny 127.0.0.0/8"));
  EXPECT_TRUE(seen().empty());
}

TEST_F(HttpExecutorTest, EgressForGivesEachJobItsRule) {
  HttpExecutorOptions options;
  options.egress_for = [](const JobSpec& job) {
    Result<net::EgressRule> rule = job.id.starts_with("billing.")
                                       ? net::EgressRule::Parse({"10.0.0.0/8"}, {})
                                       : net::EgressRule::Parse({}, {});
    return *rule;
  };
  HttpExecutor executor(options, clock_);
  JobSpec job = HttpJob("/ok");
  job.id = "billing.settle";
  const ExecResult refused = executor.Execute(job, FullContext());
  EXPECT_EQ(refused.outcome, RunOutcome::kFailed);
  EXPECT_THAT(refused.error, HasSubstr("egress: 127.0.0.1 is not in egress_allow (10.0.0.0/8)"));
  EXPECT_TRUE(seen().empty());
  job.id = "ops.ping";
  EXPECT_EQ(executor.Execute(job, FullContext()).outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(seen().size(), 1u);
}

TEST_F(HttpExecutorTest, HttpsTargetsUseTheTlsOptions) {
  net::testing::TestPki pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  net::testing::TestServer tls(pki.Path("server.pem"), pki.Path("server.key"));
  tls.server().Post("/ok", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content("secure " + req.get_header_value("X-Gnomon-Job-Id"), "text/plain");
  });
  ASSERT_TRUE(tls.Start());
  JobSpec job = HttpJob("/ok");
  job.http->url = "https://localhost:" + std::to_string(tls.port()) + "/ok";
  // The system CAs do not know the test CA: the attempt fails naming the peer.
  const ExecResult refused = HttpExecutor({}, clock_).Execute(job, FullContext());
  EXPECT_EQ(refused.outcome, RunOutcome::kFailed);
  EXPECT_THAT(refused.error, HasSubstr("TLS: the certificate of localhost:"));
  HttpExecutorOptions options;
  options.tls.ca_file = pki.Path("ca.pem");
  const ExecResult r = HttpExecutor(options, clock_).Execute(job, FullContext());
  EXPECT_EQ(r.outcome, RunOutcome::kSucceeded) << r.error;
  EXPECT_EQ(r.output, "secure job-1");
}

TEST_F(HttpExecutorTest, BadTargetsFailWithAClearError) {
  HttpExecutor executor({}, clock_);
  JobSpec job = HttpJob("/ok");
  job.http->url = "ftp://127.0.0.1/x";
  EXPECT_THAT(executor.Execute(job, FullContext()).error, HasSubstr("unsupported scheme \"ftp\""));
  job.http->url = "127.0.0.1/x";
  EXPECT_THAT(executor.Execute(job, FullContext()).error, HasSubstr("missing scheme"));
  job = HttpJob("/ok", "DELETE");
  EXPECT_THAT(executor.Execute(job, FullContext()).error, HasSubstr("not supported"));
  job = HttpJob("/ok");
  job.http->headers = {{"X-Evil", "a\r\nInjected: 1"}};
  EXPECT_THAT(executor.Execute(job, FullContext()).error, HasSubstr("CR/LF"));
  JobSpec none;
  none.id = "job-1";
  EXPECT_EQ(executor.Execute(none, FullContext()).outcome, RunOutcome::kFailed);
  EXPECT_TRUE(seen().empty());
}

}  // namespace
}  // namespace gnomon
