// TimeZone and civil-calendar helpers, on top of cctz (the system tz database).
#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

#include <cstdio>

#include "gnomon/time.h"

namespace gnomon {

struct TimeZone::Impl {
  std::string name;
  cctz::time_zone zone;
};

namespace {

using Seconds = cctz::time_point<cctz::seconds>;

Seconds ToTimePoint(int64_t unix_s) {
  return std::chrono::time_point_cast<cctz::seconds>(std::chrono::system_clock::from_time_t(0)) +
         cctz::seconds(unix_s);
}

Instant FromTimePoint(const Seconds& tp) {
  return Instant::FromUnixSeconds(tp.time_since_epoch().count());
}

cctz::civil_second ToCctz(const CivilTime& c) {
  return cctz::civil_second(c.year, c.month, c.day, c.hour, c.minute, c.second);
}

CivilTime FromCctz(const cctz::civil_second& c) {
  return CivilTime{c.year(), c.month(), c.day(), c.hour(), c.minute(), c.second()};
}

std::shared_ptr<const TimeZone::Impl> UtcImpl() {
  static const auto* const utc = new std::shared_ptr<const TimeZone::Impl>(
      std::make_shared<const TimeZone::Impl>(TimeZone::Impl{"UTC", cctz::utc_time_zone()}));
  return *utc;
}

// Only names of the IANA form reach the tz library: no path tricks, no absolute paths.
bool IsSafeZoneName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/' || name.back() == '/') return false;
  size_t segment_start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      const std::string_view segment = name.substr(segment_start, i - segment_start);
      if (segment.empty() || segment.front() == '.') return false;
      segment_start = i + 1;
      continue;
    }
    const char ch = name[i];
    const bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '+';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool IsLeapYear(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int64_t year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && IsLeapYear(year)) return 29;
  return kDays[month - 1];
}

int Weekday(int64_t year, int month, int day) {
  switch (cctz::get_weekday(cctz::civil_day(year, month, day))) {
    case cctz::weekday::sunday:
      return 0;
    case cctz::weekday::monday:
      return 1;
    case cctz::weekday::tuesday:
      return 2;
    case cctz::weekday::wednesday:
      return 3;
    case cctz::weekday::thursday:
      return 4;
    case cctz::weekday::friday:
      return 5;
    case cctz::weekday::saturday:
      return 6;
  }
  return 0;
}

CivilTime AddSeconds(const CivilTime& c, int64_t seconds) { return FromCctz(ToCctz(c) + seconds); }

int64_t CivilSecondsSinceEpoch(const CivilTime& c) {
  return ToCctz(c) - cctz::civil_second(1970, 1, 1, 0, 0, 0);
}

std::string CivilTime::ToString() const {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02d %02d:%02d:%02d", static_cast<long long>(year),
                month, day, hour, minute, second);
  return buf;
}

TimeZone::TimeZone() : impl_(UtcImpl()) {}

Result<TimeZone> TimeZone::Load(std::string_view name) {
  if (name == "UTC" || name == "Etc/UTC" || name == "Z") return TimeZone();
  if (!IsSafeZoneName(name)) {
    return InvalidArgumentError("unknown time zone \"" + std::string(name.substr(0, 64)) +
                                "\": not an IANA zone name (e.g. Europe/Berlin)");
  }
  cctz::time_zone zone;
  if (!cctz::load_time_zone(std::string(name), &zone)) {
    return InvalidArgumentError("unknown time zone \"" + std::string(name) +
                                "\": not in the system tz database");
  }
  return TimeZone(std::make_shared<const Impl>(Impl{std::string(name), zone}));
}

const std::string& TimeZone::name() const { return impl_->name; }

CivilTime TimeZone::ToCivil(Instant t) const {
  return FromCctz(cctz::convert(ToTimePoint(t.unix_seconds()), impl_->zone));
}

int TimeZone::UtcOffsetSeconds(Instant t) const {
  return impl_->zone.lookup(ToTimePoint(t.unix_seconds())).offset;
}

std::string TimeZone::FormatLocal(Instant t) const {
  return cctz::format("%Y-%m-%dT%H:%M:%S%Ez", ToTimePoint(t.unix_seconds()), impl_->zone);
}

TimeZone::CivilLookup TimeZone::Lookup(const CivilTime& c) const {
  const cctz::time_zone::civil_lookup cl = impl_->zone.lookup(ToCctz(c));
  CivilLookup out;
  switch (cl.kind) {
    case cctz::time_zone::civil_lookup::UNIQUE:
      out.kind = CivilLookup::Kind::kUnique;
      break;
    case cctz::time_zone::civil_lookup::SKIPPED:
      out.kind = CivilLookup::Kind::kSkipped;
      break;
    case cctz::time_zone::civil_lookup::REPEATED:
      out.kind = CivilLookup::Kind::kRepeated;
      break;
  }
  out.pre = FromTimePoint(cl.pre);
  out.trans = FromTimePoint(cl.trans);
  out.post = FromTimePoint(cl.post);
  return out;
}

std::optional<TimeZone::Transition> TimeZone::NextTransition(Instant t) const {
  cctz::time_zone::civil_transition ct;
  if (!impl_->zone.next_transition(ToTimePoint(t.unix_seconds()), &ct)) return std::nullopt;
  const Instant at = FromTimePoint(impl_->zone.lookup(ct.to).trans);
  return Transition{at, FromCctz(ct.from), FromCctz(ct.to)};
}

std::optional<TimeZone::Transition> TimeZone::PrevTransition(Instant t) const {
  cctz::time_zone::civil_transition ct;
  // cctz's prev_transition is strictly before its argument; include `t` itself.
  if (!impl_->zone.prev_transition(ToTimePoint(t.unix_seconds() + 1), &ct)) return std::nullopt;
  const Instant at = FromTimePoint(impl_->zone.lookup(ct.to).trans);
  return Transition{at, FromCctz(ct.from), FromCctz(ct.to)};
}

}  // namespace gnomon
