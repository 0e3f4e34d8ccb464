#include "src/server/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gnomon/testing/recording_executor.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

SchedulerEvent Event(SchedulerEvent::Kind kind, std::string job = "j") {
  SchedulerEvent e{};
  e.kind = kind;
  e.job_id = std::move(job);
  return e;
}

TEST(MetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsTest, CountsEvents) {
  MetricsObserver m("1.2.3");
  m.OnEvent(Event(SchedulerEvent::Kind::kClaimed));
  SchedulerEvent started = Event(SchedulerEvent::Kind::kRunStarted);
  started.attempt = 1;
  started.duration = std::chrono::milliseconds(30);
  m.OnEvent(started);
  started.attempt = 2;  // a retry's start is no fire's lateness
  m.OnEvent(started);
  SchedulerEvent done = Event(SchedulerEvent::Kind::kRunFinished);
  done.outcome = RunOutcome::kSucceeded;
  done.duration = std::chrono::milliseconds(1500);
  m.OnEvent(done);
  done.outcome = RunOutcome::kFailed;
  m.OnEvent(done);
  SchedulerEvent skipped = Event(SchedulerEvent::Kind::kSkipped);
  skipped.detail = "overlap";
  m.OnEvent(skipped);
  m.OnEvent(Event(SchedulerEvent::Kind::kClaimLost));
  m.OnEvent(Event(SchedulerEvent::Kind::kLeaseRenewed));
  m.OnEvent(Event(SchedulerEvent::Kind::kLeaseRenewFailed));
  m.OnEvent(Event(SchedulerEvent::Kind::kLostRun));
  m.SetJobs(3);
  m.SetNodesAlive(2);
  m.SetClockSkews({{"n1", std::chrono::milliseconds(-250)}});
  const std::string text = m.Render();
  EXPECT_THAT(text, HasSubstr("gnomon_fires_total{job=\"j\",outcome=\"succeeded\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_fires_total{job=\"j\",outcome=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_fires_total{job=\"j\",outcome=\"skipped\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_fire_lateness_seconds_bucket{le=\"0.025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_fire_lateness_seconds_bucket{le=\"0.05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_fire_lateness_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_run_duration_seconds_bucket{job=\"j\",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_run_duration_seconds_sum{job=\"j\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_claims_total{result=\"claimed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_claims_total{result=\"lost\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_lease_renewals_total{result=\"ok\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_lease_renewals_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_lost_runs_total 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_skipped_fires_total{reason=\"overlap\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_jobs 3\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_nodes_alive 2\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_clock_skew_seconds{node=\"n1\"} -0.25\n"));
  EXPECT_THAT(text, HasSubstr("gnomon_build_info{version=\"1.2.3\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE gnomon_fire_lateness_seconds histogram\n"));
}

TEST(MetricsTest, HostileLabelCannotBreakTheFormat) {
  MetricsObserver m("v\"1\n");
  SchedulerEvent skipped = Event(SchedulerEvent::Kind::kSkipped);
  skipped.detail = "a\"}\nevil 1";
  m.OnEvent(skipped);
  const std::string text = m.Render();
  EXPECT_THAT(text, HasSubstr("reason=\"a\\\"}\\nevil 1\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nevil 1")));
  EXPECT_THAT(text, HasSubstr("gnomon_build_info{version=\"v\\\"1\\n\"} 1\n"));
}

TEST(MetricsTest, CompositeFansOut) {
  testing::RecordingObserver a, b;
  CompositeObserver c({&a, nullptr, &b});
  c.OnEvent(Event(SchedulerEvent::Kind::kClaimed));
  EXPECT_EQ(a.events().size(), 1u);
  EXPECT_EQ(b.events().size(), 1u);
}

}  // namespace
}  // namespace gnomon::server

namespace gnomon::server {
namespace {

TEST(MetricsBackendTest, UnsafePersistenceIsExported) {
  MetricsObserver m("0.1.0");
  EXPECT_NE(m.Render().find("gnomon_backend_unsafe_persistence 0"), std::string::npos);
  m.SetBackendUnsafe(true);
  EXPECT_NE(m.Render().find("gnomon_backend_unsafe_persistence 1"), std::string::npos);
}

}  // namespace
}  // namespace gnomon::server
