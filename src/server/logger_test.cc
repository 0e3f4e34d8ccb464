#include "src/server/logger.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace gnomon::server {
namespace {

std::string Capture(LogFormat format, const SchedulerEvent& ev) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  {
    Logger log(format, LogLevel::kInfo, "node-a", out);
    LogObserver obs(log);
    obs.OnEvent(ev);
  }
  std::fclose(out);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

SchedulerEvent Finished() {
  SchedulerEvent ev{};
  ev.kind = SchedulerEvent::Kind::kRunFinished;
  ev.job_id = "report";
  ev.run_id = "report@1764451800000";
  ev.attempt = 2;
  ev.fencing_token = 17;
  ev.scheduled_at = Instant::FromUnixMillis(1764451800000);
  ev.outcome = RunOutcome::kFailed;
  ev.duration = std::chrono::milliseconds(1500);
  ev.detail = "exited with status 3";
  return ev;
}

TEST(LoggerTest, TextLinesCarryNodeJobAndRun) {
  const std::string line = Capture(LogFormat::kText, Finished());
  EXPECT_NE(line.find(" warn run_finished node=node-a job=report run=report@1764451800000 "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("outcome=failed"), std::string::npos) << line;
  EXPECT_NE(line.find("detail=\"exited with status 3\""), std::string::npos) << line;
  EXPECT_EQ(line.back(), '\n');
}

TEST(LoggerTest, JsonLinesParseAndCarryTheSameFields) {
  const std::string line = Capture(LogFormat::kJson, Finished());
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["event"], "run_finished");
  EXPECT_EQ(j["node"], "node-a");
  EXPECT_EQ(j["job"], "report");
  EXPECT_EQ(j["run_id"], "report@1764451800000");
  EXPECT_EQ(j["token"], "17");
  EXPECT_EQ(j["outcome"], "failed");
  EXPECT_EQ(j["level"], "warn");
}

// A fire too old for the backend's markers is neither run nor recorded: a warning, where other
// skips are information.
TEST(LoggerTest, AFireTooOldToClaimIsAWarning) {
  SchedulerEvent ev = Finished();
  ev.kind = SchedulerEvent::Kind::kSkipped;
  ev.detail = "too-old";
  EXPECT_NE(Capture(LogFormat::kText, ev).find(" warn skipped "), std::string::npos);
  ev.detail = "overlap";
  EXPECT_NE(Capture(LogFormat::kText, ev).find(" info skipped "), std::string::npos);
}

TEST(LoggerTest, DebugEventsAreFilteredAtInfo) {
  SchedulerEvent ev = Finished();
  ev.kind = SchedulerEvent::Kind::kLeaseRenewed;
  EXPECT_EQ(Capture(LogFormat::kText, ev), "");
}

}  // namespace
}  // namespace gnomon::server
