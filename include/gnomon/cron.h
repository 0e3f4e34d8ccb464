// CronExpr: gnomon's schedule dialect (docs/semantics.md).
//
//   5 fields   min hour dom mon dow             (second = 0)
//   6 fields   sec min hour dom mon dow
//   7 fields   sec min hour dom mon dow year    (year 1970-2299)
//   * ? , - /  names JAN-DEC SUN-SAT (any case), 7 = Sunday, L LW nW (day of month),
//   d#n d#L dL (day of week), H / H/n / H(a-b) (a value hashed from the job id),
//   @yearly @annually @monthly @weekly @daily @midnight @hourly (any case),
//   @every <duration> (whole seconds >= 1 s, aligned to the Unix epoch),
//   an optional "CRON_TZ=Zone " or "TZ=Zone " prefix.
//
// Day of month and day of week both restricted: either matches (Vixie OR). "Unrestricted" means
// `*`, `?` or `*/1`. DST: a fixed-time schedule (one value in each of second, minute, hour) fires
// once at the first instant after a spring-forward gap that swallows its wall time, and once, at
// the first occurrence, in a fall-back overlap. Other schedules fire at every real instant that
// matches (both passes of an overlap; non-existent times are skipped).
//
// Parsing is linear in the input; input longer than 1024 characters or with more than 256 list
// items is rejected before parsing. Errors name the field, the offending text and its 1-based
// column: "hour: 25 is out of range 0-23 (column 5)".
//
// CronExpr is an immutable value: pure (no clock, no I/O after Parse), thread-safe to share.
#ifndef GNOMON_CRON_H_
#define GNOMON_CRON_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

struct CronOptions {
  // Zone used when the expression has no CRON_TZ=/TZ= prefix. Default: UTC.
  TimeZone time_zone;
  // The job id that `H` hashes; the same on every node, so every node computes the same instants.
  // Default: empty (H then hashes the empty string).
  std::string job_id;
};

class CronExpr {
 public:
  // Longest accepted input, in bytes, and most list items (comma-separated) over all fields.
  static constexpr size_t kMaxLength = 1024;
  static constexpr int kMaxListItems = 256;
  // How far Next/Prev search before answering "never".
  static constexpr int kSearchYears = 100;
  // Year field bounds.
  static constexpr int kMinYear = 1970;
  static constexpr int kMaxYear = 2299;

  // Parses `text`. On error: InvalidArgument with field, offending text and column.
  static Result<CronExpr> Parse(std::string_view text, const CronOptions& options = {});

  // The first fire strictly after `after`, or nullopt if none within kSearchYears.
  std::optional<Instant> Next(Instant after) const;
  // The last fire strictly before `before`, or nullopt if none within kSearchYears.
  std::optional<Instant> Prev(Instant before) const;
  // Whether `t` is a fire instant (fires are whole seconds).
  bool Matches(Instant t) const;

  // Plain-language reading, e.g. "At 02:30, on day 1 of the month (Asia/Shanghai)".
  std::string Describe() const;

  // The text as given (prefix included).
  const std::string& text() const { return text_; }
  const TimeZone& time_zone() const { return zone_; }
  // True for `@every`.
  bool is_interval() const { return every_s_ > 0; }
  // True when second, minute and hour each hold one value (the DST "fixed time" rule applies).
  bool is_fixed_time() const { return fixed_time_; }

  // Field sets, exposed for tests and Describe(). Bit i set = value i allowed.
  struct Fields {
    std::bitset<60> seconds;
    std::bitset<60> minutes;
    std::bitset<24> hours;
    std::bitset<32> days_of_month;               // bits 1-31
    std::bitset<13> months;                      // bits 1-12
    std::bitset<7> days_of_week;                 // 0 = Sunday
    std::bitset<kMaxYear - kMinYear + 1> years;  // bit 0 = kMinYear
    bool dom_restricted = false;
    bool dow_restricted = false;
    bool year_restricted = false;
    // Day-of-month specials.
    bool last_day = false;            // L
    bool last_weekday = false;        // LW
    std::bitset<32> nearest_weekday;  // nW, bits 1-31
    // Day-of-week specials: nth[d] bit k (1-5) = "the k-th weekday d of the month" (d#k);
    // last[d] = "the last weekday d of the month" (dL, d#L).
    std::bitset<6> nth[7];
    std::bitset<7> last_of_month;
  };
  const Fields& fields() const { return fields_; }

 private:
  friend class CronParser;
  CronExpr() = default;

  // Next's fast path: the fire in [t, limit] inside `t`'s offset segment, or nullopt when the
  // segment walk must decide (unix seconds).
  std::optional<Instant> NextInSegment(int64_t t, int64_t limit) const;
  // Whether `t` is the end of a spring-forward gap that swallowed a matching wall time.
  bool IsGapFire(Instant t) const;

  std::string text_;
  TimeZone zone_;
  Fields fields_;
  int64_t every_s_ = 0;  // > 0 for @every
  bool fixed_time_ = false;
};

}  // namespace gnomon

#endif  // GNOMON_CRON_H_
