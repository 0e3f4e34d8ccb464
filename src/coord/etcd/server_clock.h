// ServerClock: an estimate of an etcd member's wall clock, built from the HTTP `Date` headers of
// its responses (internal to the etcd backend; see include/gnomon/etcd_coordinator.h, "Time").
// Pure: no I/O, no clock of its own; the caller passes steady times (Clock::SteadyNow()).
//
// A response that was sent at steady time s, answered at r and carries Date D (the server's clock
// read at some moment in [s, r], truncated to the second) bounds the offset o = server − steady:
//   D − r ≤ o < D + 1 s − s.
// The estimate is the intersection of these intervals: it narrows when responses fall at
// different phases of the server's second (calibration sends probes timed to do exactly that,
// see NextProbe), down to about the round trip. Since the server's clock and the local steady
// clock may drift apart, every bound widens by `drift_ppm` of its age. An empty intersection
// means a clock was stepped (or a member with another clock answered): the estimate restarts from
// the newest response alone and reset_count() goes up.
//
// Thread safety: none (the owner locks).
#ifndef GNOMON_SRC_COORD_ETCD_SERVER_CLOCK_H_
#define GNOMON_SRC_COORD_ETCD_SERVER_CLOCK_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "gnomon/time.h"

namespace gnomon::coord {

// Parses an HTTP-date in the IMF-fixdate form every server sends (RFC 9110 5.6.7):
// "Mon, 30 Nov 2026 02:29:52 GMT". nullopt when `text` is not one.
std::optional<Instant> ParseHttpDate(std::string_view text);

class ServerClock {
 public:
  // `drift_ppm`: the largest rate (parts per million) at which the server's wall clock and the
  // local steady clock may run apart (NTP slews at most 500 ppm; crystals drift ~10-50). Default
  // 100. `resolution`: the Date header's resolution. Default 1 s.
  explicit ServerClock(int64_t drift_ppm = 100, Duration resolution = std::chrono::seconds(1));

  // Adds one response: sent at steady `sent`, answer received at steady `received`
  // (REQUIRES: sent <= received), server Date `date`. Returns false when it contradicts the
  // estimate, which then restarts from this response.
  bool Add(Duration sent, Duration received, Instant date);

  struct Reading {
    Instant now;           // the midpoint of the interval the server's clock is in
    Duration uncertainty;  // the interval's half-width (rounded up)
  };
  // The server's clock at steady time `steady`; nullopt before the first response.
  std::optional<Reading> Read(Duration steady) const;

  // The half-width the estimate is calibrated to: max(5 ms, the shortest round trip seen).
  Duration Target() const;

  // Calibration: the steady time at which to send the next probe so that its answer narrows the
  // estimate (at or after `steady`), or nullopt when the uncertainty at `steady` is already
  // within Target(). Probes are spaced 1/16 of the interval apart across the moment the server's
  // clock is predicted to reach its next whole second, so one sweep narrows the interval about
  // 16-fold (1 s → ~60 ms → ~5 ms: two sweeps, about one second apart).
  std::optional<Duration> NextProbe(Duration steady) const;

  // The steady time at which the uncertainty will exceed `limit` (drift widens it); the past
  // when it already does or there is no estimate.
  Duration WhenUncertaintyExceeds(Duration limit) const;

  // How many times a contradicting response restarted the estimate.
  int64_t reset_count() const { return resets_; }

 private:
  void Restart(double sent, double lo, double hi, double rtt);
  double Age(double steady) const { return drift_ * (steady - ref_); }

  const double drift_;       // drift_ppm / 1e6
  const double resolution_;  // ms
  bool known_ = false;
  // The offset (ms) lies in [lo_ − Age(t), hi_ + Age(t)] at steady time t (ms).
  double ref_ = 0;
  double lo_ = 0;
  double hi_ = 0;
  double min_rtt_ = 0;
  int64_t resets_ = 0;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_ETCD_SERVER_CLOCK_H_
