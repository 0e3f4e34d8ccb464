// TimeZone and civil-calendar helpers, on top of cctz (the system tz database).
#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

#include <cstdio>
#include <optional>

#include "gnomon/time.h"

namespace gnomon {

struct TimeZone::Impl {
  std::string name;
  cctz::time_zone zone;
  // A zone without transitions (UTC, Etc/GMT+5) is one segment: its offset, looked up once.
  std::optional<int> fixed_offset_s;
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
      std::make_shared<const TimeZone::Impl>(TimeZone::Impl{"UTC", cctz::utc_time_zone(), 0}));
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

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Civil-calendar arithmetic in O(1) (H. Hinnant's days_from_civil / civil_from_days, proleptic
// Gregorian). cctz normalises a large addition by looping over years, and the cron search adds
// up to 100 years on every call: cctz's normalisation was 41% of `Next`'s CPU (perf on
// bench/cron_bench.cc's BM_Starts/every_5_minutes).
// Days from 1970-01-01 to (year, month, day); month and day may be out of range (normalised).
int64_t DaysSinceEpoch(int64_t year, int64_t month, int64_t day) {
  int64_t y = year + FloorDiv(month - 1, 12);
  const int64_t m = FloorMod(month - 1, 12) + 1;  // 1-12
  y -= m <= 2;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;                                    // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5;          // [0, 365], day 1
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy + day - 1;  // day may overflow
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t days, int64_t* year, int* month, int* day) {
  const int64_t z = days + 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;                                       // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  *day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *year = yoe + era * 400 + (*month <= 2);
}

}  // namespace

bool IsLeapYear(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int64_t year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && IsLeapYear(year)) return 29;
  return kDays[month - 1];
}

int Weekday(int64_t year, int month, int day) {
  // 1970-01-01 was a Thursday.
  return static_cast<int>(FloorMod(DaysSinceEpoch(year, month, day) + 4, 7));
}

CivilTime AddSeconds(const CivilTime& c, int64_t seconds) {
  const int64_t s = CivilSecondsSinceEpoch(c) + seconds;
  const int64_t days = FloorDiv(s, 86400);
  const int64_t second_of_day = s - days * 86400;
  CivilTime out;
  CivilFromDays(days, &out.year, &out.month, &out.day);
  out.hour = static_cast<int>(second_of_day / 3600);
  out.minute = static_cast<int>(second_of_day / 60 % 60);
  out.second = static_cast<int>(second_of_day % 60);
  return out;
}

int64_t CivilSecondsSinceEpoch(const CivilTime& c) {
  return DaysSinceEpoch(c.year, c.month, c.day) * 86400 + int64_t{c.hour} * 3600 +
         int64_t{c.minute} * 60 + c.second;
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
  Impl impl{std::string(name), zone, std::nullopt};
  cctz::time_zone::civil_transition ct;
  if (!zone.next_transition(Seconds::min(), &ct))
    impl.fixed_offset_s = zone.lookup(Seconds()).offset;
  return TimeZone(std::make_shared<const Impl>(std::move(impl)));
}

const std::string& TimeZone::name() const { return impl_->name; }

CivilTime TimeZone::ToCivil(Instant t) const {
  return FromCctz(cctz::convert(ToTimePoint(t.unix_seconds()), impl_->zone));
}

int TimeZone::UtcOffsetSeconds(Instant t) const {
  if (impl_->fixed_offset_s) return *impl_->fixed_offset_s;
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

TimeZone::Segment TimeZone::SegmentAt(Instant t) const {
  if (impl_->fixed_offset_s) return Segment{Instant::Min(), Instant::Max(), *impl_->fixed_offset_s};
  const Seconds tp = ToTimePoint(t.unix_seconds());
  Segment seg{Instant::Min(), Instant::Max(), impl_->zone.lookup(tp).offset};
  // At a transition the wall clock jumps from ct.from (read in the offset that ends there) to
  // ct.to (in the one that begins): `t`'s offset gives both instants without a civil lookup.
  cctz::time_zone::civil_transition ct;
  if (impl_->zone.prev_transition(tp + cctz::seconds(1), &ct)) {
    seg.start =
        Instant::FromUnixSeconds(CivilSecondsSinceEpoch(FromCctz(ct.to)) - seg.utc_offset_s);
  }
  if (impl_->zone.next_transition(tp, &ct)) {
    seg.end =
        Instant::FromUnixSeconds(CivilSecondsSinceEpoch(FromCctz(ct.from)) - seg.utc_offset_s);
  }
  return seg;
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
