// ServerClock with synthetic servers: no etcd, no real time.
#include "src/coord/etcd/server_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace gnomon::coord {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ParseHttpDateTest, ReadsImfFixdate) {
  std::optional<Instant> d = ParseHttpDate("Mon, 30 Nov 2026 02:29:52 GMT");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->ToRfc3339(), "2026-11-30T02:29:52.000Z");
  d = ParseHttpDate("Thu, 29 Feb 2024 23:59:59 GMT");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->ToRfc3339(), "2024-02-29T23:59:59.000Z");
  EXPECT_EQ(ParseHttpDate("Thu, 01 Jan 1970 00:00:00 GMT")->unix_millis(), 0);
}

TEST(ParseHttpDateTest, RejectsOtherForms) {
  for (const char* bad : {"", "Mon, 30 Nov 2026 02:29:52 UTC", "Mon, 30 Nov 2026 02:29:52",
                          "Monday, 30-Nov-26 02:29:52 GMT", "Mon Nov 30 02:29:52 2026",
                          "Mon, 30 Foo 2026 02:29:52 GMT", "Mon, 31 Nov 2026 02:29:52 GMT",
                          "Mon, 29 Feb 2026 02:29:52 GMT", "Mon, 30 Nov 2026 24:29:52 GMT",
                          "Mon, 3x Nov 2026 02:29:52 GMT", "Mon, 30 Nov 2026 02:29:5  GMT"}) {
    EXPECT_FALSE(ParseHttpDate(bad).has_value()) << bad;
  }
}

// A server whose wall clock reads steady + offset (+ drift), answering `rtt` after a request
// is sent, halfway through. Times in microseconds of the local steady clock.
struct FakeServer {
  int64_t offset_us = 0;
  double drift_ppm = 0;  // the server's clock runs this much faster than the steady clock
  int64_t rtt_us = 600;

  int64_t ServerUs(int64_t steady_us) const {
    return steady_us + offset_us +
           static_cast<int64_t>(std::llround(drift_ppm * 1e-6 * static_cast<double>(steady_us)));
  }
  // Sends a request at steady `at_us` and feeds the answer to `clock`; returns the receive time.
  int64_t Probe(ServerClock& clock, int64_t at_us, bool* consistent = nullptr) const {
    const int64_t answer_us = at_us + rtt_us / 2;
    const int64_t recv_us = at_us + rtt_us;
    const int64_t server_us = ServerUs(answer_us);
    const int64_t date_ms =
        (server_us >= 0 ? server_us / 1000000 : (server_us - 999999) / 1000000) *
        1000;  // whole seconds, as in a Date header
    const bool ok = clock.Add(milliseconds(at_us / 1000), milliseconds(recv_us / 1000),
                              Instant::FromUnixMillis(date_ms));
    if (consistent) *consistent = ok;
    return recv_us;
  }
  // The true server clock (ms) at steady `steady_us`.
  double TrueMs(int64_t steady_us) const { return static_cast<double>(ServerUs(steady_us)) / 1e3; }
};

// Runs calibration as EtcdClient does (probe at NextProbe's time, or right after the previous
// answer if that is later). Returns {probes, the steady time (us) it ended at}.
std::pair<int, int64_t> Calibrate(ServerClock& clock, const FakeServer& server, int64_t now_us,
                                  int64_t budget_us = 2'200'000) {
  const int64_t deadline = now_us + budget_us;
  int probes = 0;
  while (probes < 64) {
    std::optional<Duration> at = clock.NextProbe(milliseconds(now_us / 1000));
    if (!at) break;
    const int64_t at_us = std::max(now_us, at->count() * 1000);
    if (at_us > deadline) break;
    now_us = server.Probe(clock, at_us);
    ++probes;
  }
  return {probes, now_us};
}

void ExpectWithin(const ServerClock& clock, const FakeServer& server, int64_t steady_us) {
  std::optional<ServerClock::Reading> r = clock.Read(milliseconds(steady_us / 1000));
  ASSERT_TRUE(r.has_value());
  // The reading is taken at the whole millisecond of steady time: the true clock then.
  const double truth = server.TrueMs(steady_us / 1000 * 1000);
  EXPECT_LE(std::abs(static_cast<double>(r->now.unix_millis()) - truth),
            static_cast<double>(r->uncertainty.count()) + 1.0)
      << "estimate " << r->now.unix_millis() << " truth " << truth << " +- "
      << r->uncertainty.count();
}

TEST(ServerClockTest, NothingBeforeTheFirstSample) {
  ServerClock clock;
  EXPECT_FALSE(clock.Read(seconds(5)).has_value());
  EXPECT_EQ(clock.NextProbe(seconds(5)), std::optional<Duration>(seconds(5)));
}

TEST(ServerClockTest, OneSampleBoundsTheClockToASecondAndTheRoundTrip) {
  ServerClock clock;
  FakeServer server{.offset_us = 1'796'000'000'123'456, .rtt_us = 2000};
  const int64_t t = 50'000'000;
  const int64_t recv = server.Probe(clock, t);
  std::optional<ServerClock::Reading> r = clock.Read(milliseconds(recv / 1000));
  ASSERT_TRUE(r.has_value());
  EXPECT_LE(r->uncertainty, milliseconds(503));
  EXPECT_GE(r->uncertainty, milliseconds(500));
  ExpectWithin(clock, server, recv);
}

TEST(ServerClockTest, CalibrationNarrowsToAboutTheRoundTripWithinTheBudget) {
  // Many phases of the server's second against the steady clock, ahead of and behind this host.
  for (int64_t phase_us : {0LL, 1LL, 999LL, 123'456LL, 500'000LL, 777'777LL, 999'999LL}) {
    for (int64_t base_s : {1'796'000'000LL, 1'796'000'030LL, 1'795'999'970LL}) {
      SCOPED_TRACE(testing::Message() << "phase " << phase_us << " base " << base_s);
      ServerClock clock;
      FakeServer server{.offset_us = base_s * 1'000'000 + phase_us};
      int64_t now = 123'456'789'000;
      now = server.Probe(clock, now);  // Open's first request
      auto [probes, end] = Calibrate(clock, server, now);
      EXPECT_LE(probes, 40);
      EXPECT_LE(end - now, 2'100'000) << "calibration took too long";
      std::optional<ServerClock::Reading> r = clock.Read(milliseconds(end / 1000));
      ASSERT_TRUE(r.has_value());
      EXPECT_LE(r->uncertainty, milliseconds(5));
      ExpectWithin(clock, server, end);
      EXPECT_FALSE(clock.NextProbe(milliseconds(end / 1000)).has_value());
      EXPECT_EQ(clock.reset_count(), 0);
    }
  }
}

TEST(ServerClockTest, ASlowLinkCalibratesToItsRoundTrip) {
  ServerClock clock;
  FakeServer server{.offset_us = 1'796'000'000'654'321, .rtt_us = 40'000};
  int64_t now = server.Probe(clock, 10'000'000);
  auto [probes, end] = Calibrate(clock, server, now, 10'000'000);
  EXPECT_LE(probes, 40);
  std::optional<ServerClock::Reading> r = clock.Read(milliseconds(end / 1000));
  ASSERT_TRUE(r.has_value());
  EXPECT_LE(r->uncertainty, milliseconds(41));
  EXPECT_EQ(clock.Target(), milliseconds(40));
  ExpectWithin(clock, server, end);
}

TEST(ServerClockTest, DriftWidensTheIntervalAndKeepsTheTruthInside) {
  ServerClock clock(/*drift_ppm=*/100);
  FakeServer server{.offset_us = 1'796'000'000'250'000, .drift_ppm = 80};
  int64_t now = server.Probe(clock, 1'000'000'000);
  now = Calibrate(clock, server, now).second;
  const Duration u0 = clock.Read(milliseconds(now / 1000))->uncertainty;
  // Ten minutes of ordinary traffic, every 500 ms at one phase: always consistent, and the
  // truth stays inside although the server runs 80 ppm fast.
  for (int i = 0; i < 1200; ++i) {
    now += 500'000;
    bool consistent = false;
    now = server.Probe(clock, now, &consistent);
    ASSERT_TRUE(consistent) << i;
    ExpectWithin(clock, server, now);
  }
  EXPECT_GT(clock.Read(milliseconds(now / 1000))->uncertainty, u0);
  // It says when it will pass a limit, at 100 ppm per side.
  const Duration limit = clock.Read(milliseconds(now / 1000))->uncertainty + milliseconds(10);
  const Duration at = clock.WhenUncertaintyExceeds(limit);
  EXPECT_NEAR(static_cast<double>((at - milliseconds(now / 1000)).count()), 100'000.0,
              10'000.0);  // the reading rounds up to 1 ms = 10 s
  // A recalibration brings it back.
  now = Calibrate(clock, server, std::max(now, at.count() * 1000)).second;
  EXPECT_LE(clock.Read(milliseconds(now / 1000))->uncertainty, milliseconds(5));
  ExpectWithin(clock, server, now);
}

TEST(ServerClockTest, AStepRestartsFromTheNewestSampleAndRecalibrates) {
  ServerClock clock;
  FakeServer server{.offset_us = 1'796'000'000'400'000};
  int64_t now = server.Probe(clock, 7'000'000);
  now = Calibrate(clock, server, now).second;
  for (int64_t step_us : {2'000'000LL, -30'000'000LL, 250'000LL}) {
    SCOPED_TRACE(step_us);
    server.offset_us += step_us;
    bool consistent = true;
    // A step of a quarter second may take a few samples at different phases to contradict.
    for (int i = 0; i < 20 && consistent; ++i)
      now = server.Probe(clock, now + 137'000, &consistent);
    EXPECT_FALSE(consistent);
    ExpectWithin(clock, server, now);
    now = Calibrate(clock, server, now).second;
    EXPECT_LE(clock.Read(milliseconds(now / 1000))->uncertainty, milliseconds(5));
    ExpectWithin(clock, server, now);
  }
  EXPECT_EQ(clock.reset_count(), 3);
}

}  // namespace
}  // namespace gnomon::coord
