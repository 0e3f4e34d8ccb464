// For tests of the HTTP API: a started Scheduler (node "n1", 2 workers) on a MemoryCoordinator and
// a FakeClock, behind a TestApiServer, with a client and the helpers most API tests use.
#ifndef GNOMON_SRC_SERVER_API_TEST_FIXTURE_H_
#define GNOMON_SRC_SERVER_API_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/test_api_server.h"

namespace gnomon::server {

class ApiTestFixture : public ::testing::Test {
 protected:
  // Starts the scheduler and the API with `tokens` and `catalog`.
  void StartApi(std::vector<ApiToken> tokens, JobCatalogOptions catalog = {}) {
    SchedulerOptions o;
    o.node_id = "n1";
    o.worker_threads = 2;
    scheduler_ = std::make_unique<Scheduler>(o, coord_, exec_, clock_);
    ASSERT_TRUE(scheduler_->Start().ok());
    HttpApiOptions api;
    api.clock = &clock_;
    server_ = std::make_unique<TestApiServer>(*scheduler_, coord_, metrics_, std::move(tokens), api,
                                              HttpServerOptions{}, std::move(catalog));
    ASSERT_TRUE(server_->Start().ok());
    client_ = server_->Client();
  }
  void TearDown() override {
    if (server_) server_->server.Stop();
    if (scheduler_) scheduler_->Stop();
  }
  static httplib::Headers Auth(std::string_view token) {
    return {{"Authorization", "Bearer " + std::string(token)}};
  }
  static nlohmann::json Body(const httplib::Result& r) {
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  testing::FakeClock clock_{*Instant::ParseRfc3339("2026-09-01T00:00:00Z")};
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  MetricsObserver metrics_{"9.9.9"};
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_API_TEST_FIXTURE_H_
