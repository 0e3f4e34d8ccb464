// Time for gnomon: instants, durations, civil time, IANA time zones and the Clock seam.
//
// Words are fixed (docs/architecture.md "House rules"): an Instant is an absolute point on the UTC
// timeline; a Duration is an amount of time; a CivilTime is a wall-clock reading (year..second)
// with no zone; a TimeZone maps between the two using the system tz database. Wall time decides
// *when* a fire happens; the monotonic ("steady") clock measures *how long* (leases, timeouts).
#ifndef GNOMON_TIME_H_
#define GNOMON_TIME_H_

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "gnomon/status.h"

namespace gnomon {

// An amount of time with millisecond resolution (int64: no overflow within ±292 million years).
using Duration = std::chrono::milliseconds;

// Largest Duration that configuration accepts (100 years); larger inputs are rejected.
inline constexpr Duration kMaxConfigDuration = std::chrono::hours(24 * 36525);

// An absolute instant: milliseconds since the Unix epoch, UTC, no leap seconds. Value type.
class Instant {
 public:
  constexpr Instant() = default;  // the Unix epoch
  static constexpr Instant FromUnixMillis(int64_t unix_ms) { return Instant(unix_ms); }
  static constexpr Instant FromUnixSeconds(int64_t unix_s) { return Instant(unix_s * 1000); }
  // The earliest / latest representable instants (sentinels; never formatted).
  static constexpr Instant Min() { return Instant(std::numeric_limits<int64_t>::min() / 2); }
  static constexpr Instant Max() { return Instant(std::numeric_limits<int64_t>::max() / 2); }

  constexpr int64_t unix_millis() const { return unix_ms_; }
  // Whole seconds, rounded toward negative infinity.
  constexpr int64_t unix_seconds() const {
    return unix_ms_ >= 0 ? unix_ms_ / 1000 : -((-unix_ms_ + 999) / 1000);
  }

  friend constexpr Instant operator+(Instant a, Duration d) {
    return Instant(a.unix_ms_ + d.count());
  }
  friend constexpr Instant operator-(Instant a, Duration d) {
    return Instant(a.unix_ms_ - d.count());
  }
  friend constexpr Duration operator-(Instant a, Instant b) {
    return Duration(a.unix_ms_ - b.unix_ms_);
  }
  Instant& operator+=(Duration d) {
    unix_ms_ += d.count();
    return *this;
  }
  friend constexpr auto operator<=>(Instant, Instant) = default;

  // RFC 3339 in UTC with milliseconds: "2026-11-29T21:30:00.000Z".
  std::string ToRfc3339() const;
  // RFC 3339 in UTC, seconds precision (milliseconds, if any, are truncated):
  // "2026-11-29T21:30:00Z".
  std::string ToRfc3339Seconds() const;
  // Parses RFC 3339 ("2025-03-09T01:59:00-05:00", "…Z", optional fraction up to ns, which is
  // truncated to ms). Also accepts a lower-case 't'/'z' and a space instead of 'T'.
  static Result<Instant> ParseRfc3339(std::string_view text);

 private:
  explicit constexpr Instant(int64_t unix_ms) : unix_ms_(unix_ms) {}
  int64_t unix_ms_ = 0;
};

// Parses a duration: one or more <number><unit> parts, unit in ms s m h d (d = 24 h), the number
// a decimal that may have a fraction ("1.5h"). Examples: "500ms", "90s", "1h30m", "2d".
// Rejects empty input, a missing unit, negative values, NaN and anything above kMaxConfigDuration.
// The result is rounded down to whole milliseconds.
Result<Duration> ParseDuration(std::string_view text);
// Formats a duration in the same grammar, largest units first: "1h30m", "500ms", "0s".
std::string FormatDuration(Duration d);

// A wall-clock reading without a zone. Fields are not normalised: use TimeZone to convert.
struct CivilTime {
  int64_t year = 1970;
  int month = 1;   // 1-12
  int day = 1;     // 1-31
  int hour = 0;    // 0-23
  int minute = 0;  // 0-59
  int second = 0;  // 0-59
  friend constexpr auto operator<=>(const CivilTime&, const CivilTime&) = default;
  // "2025-03-09 02:30:00".
  std::string ToString() const;
};

// Civil-calendar helpers (proleptic Gregorian).
bool IsLeapYear(int64_t year);
int DaysInMonth(int64_t year, int month);
// 0 = Sunday … 6 = Saturday.
int Weekday(int64_t year, int month, int day);
// `c` moved by `seconds` (may be negative), normalised through days, months and years.
CivilTime AddSeconds(const CivilTime& c, int64_t seconds);
// Seconds from 1970-01-01 00:00:00 to `c`, both read as civil times (no zone; negative before).
int64_t CivilSecondsSinceEpoch(const CivilTime& c);

// An IANA time zone (e.g. "Europe/Berlin") from the system tz database, or UTC. Cheap to copy;
// immutable; safe to share between threads.
class TimeZone {
 public:
  TimeZone();  // UTC
  static TimeZone Utc() { return TimeZone(); }

  // Loads `name` ("UTC", "Area/Location" …). The name is checked before it is used: ASCII
  // letters, digits, '/', '_', '-', '+', at most 64 characters, no "." path segments, no leading
  // '/'. Unknown zones ("Mars/Olympus") are InvalidArgument naming the zone.
  static Result<TimeZone> Load(std::string_view name);

  const std::string& name() const;

  // The civil time at `t` (sub-second part dropped).
  CivilTime ToCivil(Instant t) const;
  // Seconds east of UTC in force at `t`.
  int UtcOffsetSeconds(Instant t) const;
  // "2025-03-09T03:00:00-04:00" (RFC 3339 with the local offset, seconds precision).
  std::string FormatLocal(Instant t) const;

  // What instants a civil time names. kUnique: pre == trans == post. kSkipped (in a spring-forward
  // gap): trans is the instant the gap ends. kRepeated (fall-back overlap): pre is the first
  // occurrence, post the second, trans the instant the second pass begins.
  struct CivilLookup {
    enum class Kind { kUnique, kSkipped, kRepeated } kind;
    Instant pre;
    Instant trans;
    Instant post;
  };
  CivilLookup Lookup(const CivilTime& c) const;

  // An offset change: at `at` the wall clock jumps from `from` to `to`.
  struct Transition {
    Instant at;
    CivilTime from;
    CivilTime to;
  };
  // The stretch of constant UTC offset that holds `t`: `utc_offset_s` is in force over
  // [start, end). `start` is the last transition at or before `t` (Instant::Min() if none), `end`
  // the first after `t` (Instant::Max() if none). One call for a search that works in local
  // seconds (instant + offset) while it stays inside the segment.
  struct Segment {
    Instant start;
    Instant end;
    int utc_offset_s = 0;
  };
  Segment SegmentAt(Instant t) const;

  // The first transition strictly after `t`, if any.
  std::optional<Transition> NextTransition(Instant t) const;
  // The last transition at or before `t`, if any.
  std::optional<Transition> PrevTransition(Instant t) const;

  friend bool operator==(const TimeZone& a, const TimeZone& b) { return a.name() == b.name(); }

  struct Impl;  // opaque: the tz library's zone

 private:
  explicit TimeZone(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The source of "now" and the owner of waiting (docs/architecture.md rule 2). Production code uses
// SystemClock; tests use FakeClock (gnomon/testing/fake_clock.h), whose Advance wakes waiters.
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;

  // Wall-clock now (decides *when*).
  virtual Instant Now() const = 0;
  // Monotonic now, as a duration since an arbitrary origin (measures *how long*).
  virtual Duration SteadyNow() const = 0;

  // Waits on `cv` until `ready()` is true or the wall clock reaches `deadline`; returns ready().
  // REQUIRES: `lock` holds the mutex that guards the state `ready` reads and that notifiers of
  // `cv` lock. The lock is held on return (it may be released and re-taken inside).
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         Instant deadline, const std::function<bool()>& ready) = 0;
  // As WaitUntil, with a deadline on the monotonic clock (a value of SteadyNow()).
  virtual bool WaitUntilSteady(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                               Duration steady_deadline, const std::function<bool()>& ready) = 0;

  // Convenience: waits `d` of monotonic time or until `ready()`. Returns ready().
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Duration d,
               const std::function<bool()>& ready) {
    return WaitUntilSteady(lock, cv, SteadyNow() + d, ready);
  }
};

// The real clocks of the machine (std::chrono::system_clock and steady_clock).
class SystemClock final : public Clock {
 public:
  // A process-wide instance.
  static SystemClock& Get();

  Instant Now() const override;
  Duration SteadyNow() const override;
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Instant deadline,
                 const std::function<bool()>& ready) override;
  bool WaitUntilSteady(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                       Duration steady_deadline, const std::function<bool()>& ready) override;
};

}  // namespace gnomon

#endif  // GNOMON_TIME_H_
