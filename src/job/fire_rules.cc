// FireRules: active windows, exclusions (dates, ranges, cron, calendars) and jitter.
#include "gnomon/fire_rules.h"

#include <algorithm>
#include <charconv>

#include "gnomon/job.h"
#include "src/job/key_hint.h"

namespace gnomon {
namespace {

constexpr int64_t kDaySeconds = 24 * 3600;

// "YYYY-MM-DD" as days since 1970-01-01, or nullopt.
std::optional<int64_t> ParseDay(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
  auto num = [&](size_t at, size_t len, int* out) {
    const char* b = s.data() + at;
    auto [p, ec] = std::from_chars(b, b + len, *out);
    return ec == std::errc() && p == b + len;
  };
  int y = 0, m = 0, d = 0;
  if (!num(0, 4, &y) || !num(5, 2, &m) || !num(8, 2, &d)) return std::nullopt;
  if (y < CronExpr::kMinYear || y > CronExpr::kMaxYear || m < 1 || m > 12 || d < 1 ||
      d > DaysInMonth(y, m)) {
    return std::nullopt;
  }
  return CivilSecondsSinceEpoch(CivilTime{y, m, d, 0, 0, 0}) / kDaySeconds;
}

// The instant the civil day `day` begins in `zone` (the end of a gap when midnight is skipped).
Instant StartOfDay(const TimeZone& zone, int64_t day) {
  const CivilTime c = AddSeconds(CivilTime{}, day * kDaySeconds);
  const TimeZone::CivilLookup l = zone.Lookup(c);
  return l.kind == TimeZone::CivilLookup::Kind::kSkipped ? l.trans : l.pre;
}

// FNV-1a over the bytes, then a splitmix64 finish: stable across builds and platforms.
uint64_t Mix(std::string_view a, int64_t b) {
  uint64_t h = 1469598103934665603ULL;
  auto add = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (char c : a) add(static_cast<unsigned char>(c));
  add('@');
  for (int i = 0; i < 8; ++i) add(static_cast<unsigned char>(static_cast<uint64_t>(b) >> (8 * i)));
  h += 0x9E3779B97F4A7C15ULL;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
  return h ^ (h >> 31);
}

Status RuleError(const JobSpec& job, std::string_view key, std::string_view what) {
  return InvalidArgumentError("job \"" + job.id.substr(0, 128) + "\": " + std::string(key) + ": " +
                              std::string(what));
}

}  // namespace

Result<ExcludeEntry> ParseExcludeEntry(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("an empty entry");
  if (text.size() == 10 && text[4] == '-') {
    std::optional<int64_t> day = ParseDay(text);
    if (!day) return InvalidArgumentError("\"" + Shown(text) + "\" is not a date (YYYY-MM-DD)");
    return ExcludeEntry{*day, *day, {}};
  }
  if (text.size() == 21 && text[10] == '/') {
    std::optional<int64_t> first = ParseDay(text.substr(0, 10));
    std::optional<int64_t> last = ParseDay(text.substr(11));
    if (!first || !last || *last < *first) {
      return InvalidArgumentError("\"" + Shown(text) +
                                  "\" is not a date range (YYYY-MM-DD/YYYY-MM-DD, first <= last)");
    }
    return ExcludeEntry{*first, *last, {}};
  }
  Result<CronExpr> expr = CronExpr::Parse(text);
  if (!expr.ok()) {
    return InvalidArgumentError("\"" + Shown(text) +
                                "\" is neither a date, a date range nor a cron expression: " +
                                std::string(expr.status().message()));
  }
  return ExcludeEntry{0, -1, std::string(text)};
}

Status Calendars::Add(Calendar calendar) {
  const std::string at = "calendar \"" + Shown(calendar.id) + "\"";
  if (!IsValidJobId(calendar.id)) {
    return InvalidArgumentError(at + ": id must match [A-Za-z0-9_.-]{1,128}");
  }
  if (calendars_.count(calendar.id)) {
    return InvalidArgumentError(at + ": duplicate id, first defined at " +
                                calendars_.find(calendar.id)->second.source);
  }
  if (calendars_.size() >= kMaxCalendars) {
    return InvalidArgumentError(at + ": more than " + std::to_string(kMaxCalendars) + " calendars");
  }
  if (calendar.entries.size() > kMaxExcludeEntries) {
    return InvalidArgumentError(at + ": more than " + std::to_string(kMaxExcludeEntries) +
                                " dates");
  }
  for (size_t i = 0; i < calendar.entries.size(); ++i) {
    if (Result<ExcludeEntry> e = ParseExcludeEntry(calendar.entries[i]); !e.ok()) {
      return InvalidArgumentError(at + ": dates[" + std::to_string(i) +
                                  "]: " + std::string(e.status().message()));
    }
  }
  const std::string id = calendar.id;
  calendars_.emplace(id, std::move(calendar));
  return Status::Ok();
}

const Calendars::Calendar* Calendars::Find(std::string_view id) const {
  auto it = calendars_.find(id);
  return it == calendars_.end() ? nullptr : &it->second;
}

Result<std::shared_ptr<const FireRules>> FireRules::Compile(const JobSpec& spec,
                                                            const CronExpr& schedule,
                                                            const Calendars* calendars) {
  if (!spec.fire_rules) return std::shared_ptr<const FireRules>();
  const JobSpec& job = spec;
  const FireRulesSpec& r = *spec.fire_rules;
  // (jitter and max_runs are in their ranges: CheckJobKeyRanges.)
  if (r.max_runs > 0 && !r.start_at) {
    return RuleError(job, "max_runs", "needs start_at (the fires are counted from it)");
  }
  if (r.start_at && r.end_at && *r.end_at < *r.start_at) {
    return RuleError(job, "end_at", "is before start_at");
  }
  if (r.exclude.size() > kMaxExcludeEntries) {
    return RuleError(job, "exclude",
                     "more than " + std::to_string(kMaxExcludeEntries) + " entries");
  }
  if (r.calendars.size() > kMaxCalendars) {
    return RuleError(job, "calendars", "more than " + std::to_string(kMaxCalendars));
  }
  if (r.jitter == Duration(0) && !r.start_at && !r.end_at && r.max_runs == 0 && r.exclude.empty() &&
      r.calendars.empty()) {
    return std::shared_ptr<const FireRules>();
  }
  auto rules = std::shared_ptr<FireRules>(new FireRules());
  rules->zone_ = schedule.time_zone();
  rules->jitter_ = r.jitter;
  rules->start_ = r.start_at;
  rules->end_ = r.end_at;
  rules->last_ = r.end_at;
  // The entries of the job, then of each calendar it names, each compiled in the job's zone.
  auto add = [&](const std::string& text, const std::string& field) -> Status {
    Result<ExcludeEntry> e = ParseExcludeEntry(text);
    if (!e.ok()) return RuleError(job, field, e.status().message());
    if (e->cron.empty()) {
      rules->ranges_.push_back(*e);
      return Status::Ok();
    }
    Result<CronExpr> expr = CronExpr::Parse(e->cron, CronOptions{rules->zone_, job.id});
    if (!expr.ok()) return RuleError(job, field, expr.status().message());
    rules->crons_.push_back(std::make_shared<const CronExpr>(std::move(*expr)));
    return Status::Ok();
  };
  for (size_t i = 0; i < r.exclude.size(); ++i) {
    GNOMON_RETURN_IF_ERROR(add(r.exclude[i], "exclude[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < r.calendars.size(); ++i) {
    const Calendars::Calendar* cal = calendars ? calendars->Find(r.calendars[i]) : nullptr;
    if (cal == nullptr) {
      return RuleError(job, "calendars[" + std::to_string(i) + "]",
                       "\"" + Shown(r.calendars[i]) + "\" is not defined (a [[calendar]] of " +
                           "the daemon's config)");
    }
    for (const std::string& entry : cal->entries) {
      GNOMON_RETURN_IF_ERROR(add(entry, "calendars[" + std::to_string(i) + "]"));
    }
  }
  // Ranges sorted and merged (overlapping or adjacent days), so one lookup finds the one holding
  // a day.
  std::sort(rules->ranges_.begin(), rules->ranges_.end(),
            [](const ExcludeEntry& a, const ExcludeEntry& b) { return a.first_day < b.first_day; });
  std::vector<ExcludeEntry> merged;
  for (const ExcludeEntry& range : rules->ranges_) {
    if (!merged.empty() && range.first_day <= merged.back().last_day + 1) {
      merged.back().last_day = std::max(merged.back().last_day, range.last_day);
    } else {
      merged.push_back(range);
    }
  }
  rules->ranges_ = std::move(merged);
  if (r.max_runs > 0) {
    // The max_runs-th allowed fire from start_at closes the window.
    std::optional<Instant> f = *r.start_at - Duration(1);
    for (int n = 0; n < r.max_runs && f; ++n) f = rules->Next(schedule, *f);
    if (f && (!rules->last_ || *f < *rules->last_)) rules->last_ = f;
  }
  return std::shared_ptr<const FireRules>(std::move(rules));
}

int64_t FireRules::DayOf(Instant t) const {
  const CivilTime c = zone_.ToCivil(t);
  return CivilSecondsSinceEpoch(CivilTime{c.year, c.month, c.day, 0, 0, 0}) / kDaySeconds;
}

const ExcludeEntry* FireRules::RangeOf(int64_t day) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), day,
                             [](int64_t d, const ExcludeEntry& r) { return d < r.first_day; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  return day <= it->last_day ? &*it : nullptr;
}

bool FireRules::Excluded(Instant t) const {
  if (!ranges_.empty() && RangeOf(DayOf(t))) return true;
  return std::any_of(crons_.begin(), crons_.end(),
                     [&](const std::shared_ptr<const CronExpr>& c) { return c->Matches(t); });
}

bool FireRules::Allows(Instant t) const {
  if (start_ && t < *start_) return false;
  if (last_ && t > *last_) return false;
  return !Excluded(t);
}

std::optional<Instant> FireRules::Next(const CronExpr& schedule, Instant after) const {
  if (start_ && after < *start_) after = *start_ - Duration(1);
  for (int skips = 0; skips <= kMaxSkips; ++skips) {
    const std::optional<Instant> f = schedule.Next(after);
    if (!f || (last_ && *f > *last_)) return std::nullopt;
    if (!ranges_.empty()) {
      if (const ExcludeEntry* r = RangeOf(DayOf(*f))) {
        // The whole range is skipped in one step: the next search starts at its end.
        after = std::max(*f, StartOfDay(zone_, r->last_day + 1) - Duration(1));
        continue;
      }
    }
    if (!Excluded(*f)) return f;
    after = *f;
  }
  return std::nullopt;
}

std::optional<Instant> FireRules::Prev(const CronExpr& schedule, Instant before) const {
  if (last_ && before > *last_) before = *last_ + Duration(1);
  for (int skips = 0; skips <= kMaxSkips; ++skips) {
    const std::optional<Instant> f = schedule.Prev(before);
    if (!f || (start_ && *f < *start_)) return std::nullopt;
    if (!ranges_.empty()) {
      if (const ExcludeEntry* r = RangeOf(DayOf(*f))) {
        before = std::min(*f, StartOfDay(zone_, r->first_day));
        continue;
      }
    }
    if (!Excluded(*f)) return f;
    before = *f;
  }
  return std::nullopt;
}

FireRules::Window FireRules::WindowAt(Instant now) const {
  if (start_ && now < *start_) return Window::kNotStarted;
  if (last_ && now > *last_) return Window::kEnded;
  return Window::kOpen;
}

Duration JitterOffset(const JobSpec& job, Instant scheduled) {
  if (!job.fire_rules || job.fire_rules->jitter <= Duration(0)) return Duration(0);
  const auto span = static_cast<uint64_t>(job.fire_rules->jitter.count());
  return Duration(static_cast<int64_t>(Mix(job.id, scheduled.unix_millis()) % span));
}

Duration WaitedOffset(const JobSpec& job, Instant scheduled) {
  return scheduled.unix_millis() % 1000 == 0 ? JitterOffset(job, scheduled) : Duration(0);
}

Instant DueAt(const JobSpec& job, Instant scheduled) {
  return scheduled + JitterOffset(job, scheduled);
}

}  // namespace gnomon
