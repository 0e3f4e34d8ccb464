// FireRules: what a job's schedule does not say about which of its instants fire
// (docs/semantics.md "Windows, calendars and jitter"): an active window (start_at, end_at,
// max_runs), exclusions (dates, date ranges and cron expressions in the job's zone, written on the
// job or in named calendars) and a deterministic jitter. Every rule is a pure function of the
// definition, so every node agrees on every fire without talking to the others. Immutable once
// built; safe to share between threads.
#ifndef GNOMON_FIRE_RULES_H_
#define GNOMON_FIRE_RULES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/cron.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

struct JobSpec;

// Most entries in one `exclude` list or calendar, and most calendars.
inline constexpr size_t kMaxExcludeEntries = 4096;
inline constexpr size_t kMaxCalendars = 256;
// Longest jitter (a fire waits at most this long after its instant).
inline constexpr Duration kMaxJitter = std::chrono::hours(1);
// Most fires max_runs may count.
inline constexpr int kMaxRuns = 100'000;

// A parsed exclusion entry: a civil date range [first, last] (days since 1970-01-01, both
// inclusive; one date is a range of one day), or a cron expression text (compiled per zone).
struct ExcludeEntry {
  int64_t first_day = 0;
  int64_t last_day = -1;
  std::string cron;  // non-empty: a cron expression
};

// Reads one entry: "2026-12-25", "2026-12-24/2026-12-26" (a range, both days included), or a
// cron expression of the dialect (a fire it matches is excluded). InvalidArgument saying what is
// wrong (the caller names the field).
Result<ExcludeEntry> ParseExcludeEntry(std::string_view text);

// Named sets of exclusion entries (`[[calendar]]` in the daemon's config), which jobs reference
// by id (`calendars = [...]`).
class Calendars {
 public:
  struct Calendar {
    std::string id;
    std::vector<std::string> entries;  // as written (dates, ranges, cron expressions)
    std::string source;                // where it was defined ("gnomon.toml:12")
  };
  // Adds a calendar; InvalidArgument naming the calendar and the entry that is wrong, or a
  // duplicate id, or more than kMaxCalendars.
  Status Add(Calendar calendar);
  const Calendar* Find(std::string_view id) const;
  const std::map<std::string, Calendar, std::less<>>& all() const { return calendars_; }

 private:
  std::map<std::string, Calendar, std::less<>> calendars_;
};

class FireRules {
 public:
  // The rules of `job` with its schedule `schedule`; null when the job has none (no window,
  // exclusion or jitter: the common case costs nothing). InvalidArgument naming the key
  // ("job \"x\": calendars: \"cn\" is not defined"). `calendars` may be null (none defined).
  static Result<std::shared_ptr<const FireRules>> Compile(const JobSpec& job,
                                                          const CronExpr& schedule,
                                                          const Calendars* calendars);

  // Whether an instant of the schedule fires: inside the window and not excluded.
  bool Allows(Instant t) const;
  // Whether `t` is excluded (by a date, a range or a cron entry), ignoring the window.
  bool Excluded(Instant t) const;
  // The schedule's first fire strictly after `after` that the rules allow, or nullopt (none
  // within the schedule's search, past end_at or max_runs, or after kMaxSkips excluded fires in
  // a row).
  std::optional<Instant> Next(const CronExpr& schedule, Instant after) const;
  // The last allowed fire strictly before `before`, as Next.
  std::optional<Instant> Prev(const CronExpr& schedule, Instant before) const;

  enum class Window { kOpen, kNotStarted, kEnded };
  // Where `now` is relative to the window: before start_at, after end_at (or the max_runs-th
  // fire), or inside it.
  Window WindowAt(Instant now) const;

  Duration jitter() const { return jitter_; }
  // The first and last instants that may fire (start_at; the earlier of end_at and the
  // max_runs-th allowed fire), if bounded.
  std::optional<Instant> first() const { return start_; }
  std::optional<Instant> last() const { return last_; }

  // Excluded fires skipped in a row before Next/Prev give up.
  static constexpr int kMaxSkips = 100'000;

 private:
  FireRules() = default;
  // The day (since 1970-01-01) of `t` in the schedule's zone.
  int64_t DayOf(Instant t) const;
  // The range holding `day`, if any.
  const ExcludeEntry* RangeOf(int64_t day) const;

  TimeZone zone_;
  std::optional<Instant> start_;
  std::optional<Instant> last_;
  std::optional<Instant> end_;        // end_at as written (WindowAt)
  std::vector<ExcludeEntry> ranges_;  // sorted by first_day, merged
  std::vector<std::shared_ptr<const CronExpr>> crons_;
  Duration jitter_{0};
};

// The next (previous) fire of `schedule` under `rules` (null: none), strictly after (before) `t`.
inline std::optional<Instant> NextFire(const CronExpr& schedule, const FireRules* rules,
                                       Instant after) {
  return rules ? rules->Next(schedule, after) : schedule.Next(after);
}
inline std::optional<Instant> PrevFire(const CronExpr& schedule, const FireRules* rules,
                                       Instant before) {
  return rules ? rules->Prev(schedule, before) : schedule.Prev(before);
}

// The offset in [0, job.jitter) by which a fire of `job` at `scheduled` is delayed: a hash of the
// job id and the instant, the same on every node. 0 when the job has no jitter.
Duration JitterOffset(const JobSpec& job, Instant scheduled);
// scheduled + JitterOffset: when the fire is due (claim and misfire windows count from here).
Instant DueAt(const JobSpec& job, Instant scheduled);
// The offset a fire with this instant waited: JitterOffset for an instant of the schedule (whole
// seconds), 0 for a trigger's or re-run's (its instant has milliseconds; never delayed).
Duration WaitedOffset(const JobSpec& job, Instant scheduled);

}  // namespace gnomon

#endif  // GNOMON_FIRE_RULES_H_
