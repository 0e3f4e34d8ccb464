// The next/previous-fire search. Civil time is searched field by field (year, month, day, hour,
// minute, second: each step jumps to the next allowed value, never second by second). Instants
// come from walking the zone's offset segments: inside one segment the offset is constant, so a
// civil match maps to exactly one instant; the DST rule is applied where segments meet.
#include <bit>
#include <cstdint>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

constexpr int64_t kSearchSeconds = int64_t{CronExpr::kSearchYears} * 366 * 86400;

// Smallest set bit >= from, or -1.
template <size_t N>
int NextBit(const std::bitset<N>& bits, int from) {
  if constexpr (N <= 64) {
    if (from >= static_cast<int>(N)) return -1;
    const uint64_t above = bits.to_ullong() >> from;
    return above == 0 ? -1 : from + std::countr_zero(above);
  } else {
    for (int i = from; i < static_cast<int>(N); ++i) {
      if (bits.test(i)) return i;
    }
    return -1;
  }
}

// Largest set bit <= from, or -1.
template <size_t N>
int PrevBit(const std::bitset<N>& bits, int from) {
  if constexpr (N < 64) {
    if (from < 0) return -1;
    const uint64_t below = bits.to_ullong() & ((uint64_t{2} << std::min(from, 62)) - 1);
    return below == 0 ? -1 : 63 - std::countl_zero(below);
  } else {
    for (int i = std::min(from, static_cast<int>(N) - 1); i >= 0; --i) {
      if (bits.test(i)) return i;
    }
    return -1;
  }
}

CivilTime StartOfDay(int64_t y, int m, int d) { return CivilTime{y, m, d, 0, 0, 0}; }
CivilTime EndOfDay(int64_t y, int m, int d) { return CivilTime{y, m, d, 23, 59, 59}; }

// `c` moved to the start of the next day, hour or minute (carries without a calendar
// conversion: CivilNext steps through them on every search).
void ToNextDay(CivilTime& c) {
  c.hour = c.minute = c.second = 0;
  if (++c.day <= DaysInMonth(c.year, c.month)) return;
  c.day = 1;
  if (++c.month <= 12) return;
  c.month = 1;
  ++c.year;
}
void ToNextHour(CivilTime& c) {
  c.minute = c.second = 0;
  if (++c.hour == 24) ToNextDay(c);
}
void ToNextMinute(CivilTime& c) {
  c.second = 0;
  if (++c.minute == 60) ToNextHour(c);
}

CivilTime StartOfNextMonth(int64_t y, int m) {
  return m == 12 ? StartOfDay(y + 1, 1, 1) : StartOfDay(y, m + 1, 1);
}
CivilTime EndOfPrevMonth(int64_t y, int m) {
  return m == 1 ? EndOfDay(y - 1, 12, 31) : EndOfDay(y, m - 1, DaysInMonth(y, m - 1));
}

int LastWeekdayOfMonth(int64_t y, int m) {
  int d = DaysInMonth(y, m);
  const int wd = Weekday(y, m, d);
  if (wd == 6) return d - 1;
  if (wd == 0) return d - 2;
  return d;
}

// The weekday (Mon-Fri) nearest to day `n`, never leaving the month; 0 if the month is shorter.
int NearestWeekday(int64_t y, int m, int n) {
  const int dim = DaysInMonth(y, m);
  if (n > dim) return 0;
  const int wd = Weekday(y, m, n);
  if (wd == 6) return n == 1 ? 3 : n - 1;        // Saturday: Friday before, or Monday the 3rd
  if (wd == 0) return n == dim ? n - 2 : n + 1;  // Sunday: Monday after, or Friday before
  return n;
}

Instant At(int64_t unix_s) { return Instant::FromUnixSeconds(unix_s); }

// The wall time `local_s` seconds after 1970-01-01 00:00:00 (an instant plus its UTC offset).
CivilTime WallTime(int64_t local_s) { return AddSeconds(CivilTime{}, local_s); }

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

uint32_t CronExpr::DayMask(int64_t year, int month) const {
  const Fields& f = fields_;
  if (f.year_restricted) {
    if (year < kMinYear || year > kMaxYear || !f.years.test(year - kMinYear)) return 0;
  }
  if (!f.months.test(month)) return 0;
  const int dim = DaysInMonth(year, month);
  const uint32_t month_days = ((uint32_t{1} << dim) - 1) << 1;  // bits 1..dim
  if (!f.dom_restricted && !f.dow_restricted) return month_days;
  uint32_t dom = 0;
  if (f.dom_restricted) {
    dom = static_cast<uint32_t>(f.days_of_month.to_ulong());
    if (f.last_day) dom |= uint32_t{1} << dim;
    if (f.last_weekday) dom |= uint32_t{1} << LastWeekdayOfMonth(year, month);
    for (uint32_t nw = static_cast<uint32_t>(f.nearest_weekday.to_ulong()); nw != 0; nw &= nw - 1) {
      if (const int d = NearestWeekday(year, month, std::countr_zero(nw))) dom |= uint32_t{1} << d;
    }
  }
  uint32_t dow = 0;
  if (f.dow_restricted) {
    const int first_weekday = Weekday(year, month, 1);
    // Bit k of `week` set = weekday k % 7 allowed; day d falls on weekday (first_weekday + d - 1).
    uint64_t week = 0;
    for (int wd = 0; wd < 7; ++wd) {
      if (f.days_of_week.test(wd)) week |= uint64_t{0x8102040810204081} << wd;
    }
    dow = static_cast<uint32_t>((week << 1) >> first_weekday);
    if (f.last_of_month.any() || f.nth[0].any() || f.nth[1].any() || f.nth[2].any() ||
        f.nth[3].any() || f.nth[4].any() || f.nth[5].any() || f.nth[6].any()) {
      for (int wd = 0; wd < 7; ++wd) {
        const int first = 1 + (wd - first_weekday + 7) % 7;  // first day of the month on wd
        for (int n = 1; n <= 5; ++n) {
          if (f.nth[wd].test(n) && first + 7 * (n - 1) <= dim)
            dow |= uint32_t{1} << (first + 7 * (n - 1));
        }
        if (f.last_of_month.test(wd)) dow |= uint32_t{1} << (first + 7 * ((dim - first) / 7));
      }
    }
  }
  return (dom | dow) & month_days;  // both restricted: Vixie OR; one: the other is 0
}

bool CronExpr::DayMatches(int64_t year, int month, int day) const {
  return (DayMask(year, month) >> day) & 1;
}

bool CronExpr::CivilMatches(const CivilTime& c) const {
  return fields_.seconds.test(c.second) && fields_.minutes.test(c.minute) &&
         fields_.hours.test(c.hour) && DayMatches(c.year, c.month, c.day);
}

std::optional<CivilTime> CronExpr::CivilNext(const CivilTime& from, const CivilTime& until) const {
  const Fields& f = fields_;
  CivilTime c = from;
  while (c < until) {
    if (f.year_restricted) {
      const int y = c.year < kMinYear   ? NextBit(f.years, 0)
                    : c.year > kMaxYear ? -1
                                        : NextBit(f.years, static_cast<int>(c.year - kMinYear));
      if (y < 0) return std::nullopt;
      if (y + kMinYear != c.year) {
        c = StartOfDay(y + kMinYear, 1, 1);
        continue;
      }
    }
    const int m = NextBit(f.months, c.month);
    if (m < 0) {
      c = StartOfDay(c.year + 1, 1, 1);
      continue;
    }
    if (m != c.month) {
      c = StartOfDay(c.year, m, 1);
      continue;
    }
    const uint32_t days = DayMask(c.year, c.month) & ~((uint32_t{1} << c.day) - 1);
    if (days == 0) {
      c = StartOfNextMonth(c.year, c.month);
      continue;
    }
    const int d = std::countr_zero(days);
    if (d != c.day) {
      c = StartOfDay(c.year, c.month, d);
      continue;
    }
    const int h = NextBit(f.hours, c.hour);
    if (h < 0) {
      ToNextDay(c);
      continue;
    }
    if (h != c.hour) {
      c.hour = h;
      c.minute = 0;
      c.second = 0;
    }
    const int mi = NextBit(f.minutes, c.minute);
    if (mi < 0) {
      ToNextHour(c);
      continue;
    }
    if (mi != c.minute) {
      c.minute = mi;
      c.second = 0;
    }
    const int s = NextBit(f.seconds, c.second);
    if (s < 0) {
      ToNextMinute(c);
      continue;
    }
    c.second = s;
    return c < until ? std::optional<CivilTime>(c) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<CivilTime> CronExpr::CivilPrev(const CivilTime& before,
                                             const CivilTime& since) const {
  const Fields& f = fields_;
  CivilTime c = before;
  while (c > since) {
    if (f.year_restricted) {
      const int y = c.year > kMaxYear   ? PrevBit(f.years, kMaxYear - kMinYear)
                    : c.year < kMinYear ? -1
                                        : PrevBit(f.years, static_cast<int>(c.year - kMinYear));
      if (y < 0) return std::nullopt;
      if (y + kMinYear != c.year) {
        c = EndOfDay(y + kMinYear, 12, 31);
        continue;
      }
    }
    const int m = PrevBit(f.months, c.month);
    if (m < 1) {
      c = EndOfDay(c.year - 1, 12, 31);
      continue;
    }
    if (m != c.month) {
      c = EndOfDay(c.year, m, DaysInMonth(c.year, m));
      continue;
    }
    if (c.day > DaysInMonth(c.year, c.month)) c.day = DaysInMonth(c.year, c.month);
    const uint32_t days = DayMask(c.year, c.month) & ((uint32_t{2} << c.day) - 1);
    if (days == 0) {
      c = EndOfPrevMonth(c.year, c.month);
      continue;
    }
    const int d = 31 - std::countl_zero(days);
    if (d != c.day) {
      c = EndOfDay(c.year, c.month, d);
      continue;
    }
    const int h = PrevBit(f.hours, c.hour);
    if (h < 0) {
      c = AddSeconds(StartOfDay(c.year, c.month, c.day), -1);
      continue;
    }
    if (h != c.hour) {
      c.hour = h;
      c.minute = 59;
      c.second = 59;
    }
    const int mi = PrevBit(f.minutes, c.minute);
    if (mi < 0) {
      c = AddSeconds(CivilTime{c.year, c.month, c.day, c.hour, 0, 0}, -1);
      continue;
    }
    if (mi != c.minute) {
      c.minute = mi;
      c.second = 59;
    }
    const int s = PrevBit(f.seconds, c.second);
    if (s < 0) {
      c = AddSeconds(CivilTime{c.year, c.month, c.day, c.hour, c.minute, 0}, -1);
      continue;
    }
    c.second = s;
    return c > since ? std::optional<CivilTime>(c) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<Instant> CronExpr::Next(Instant after) const {
  if (every_s_ > 0) {
    const int64_t period_ms = every_s_ * 1000;
    return Instant::FromUnixMillis((FloorDiv(after.unix_millis(), period_ms) + 1) * period_ms);
  }
  int64_t t = after.unix_seconds() + 1;  // fires are whole seconds, strictly after `after`
  const int64_t limit = t + kSearchSeconds;
  if (std::optional<Instant> fire = NextInSegment(t, limit)) return fire;
  if (fixed_time_ && IsGapFire(At(t))) return At(t);
  // A rare schedule (a year, a leap day) would walk many offset segments with nothing in them.
  // Jump to two days before the first civil match: no fire can come earlier (gap fires are
  // within hours of a civil match, never days). One exception: `t` in the first pass of a
  // fall-back overlap, whose second pass repeats wall times before c0; the search then starts
  // where the repeated range starts, so its second pass is not jumped over.
  {
    const CivilTime c0 = zone_.ToCivil(At(t));
    CivilTime search = c0;
    if (const std::optional<TimeZone::Transition> tr = zone_.NextTransition(At(t));
        tr && tr->to < tr->from && tr->to <= c0) {
      search = tr->to;
    }
    const std::optional<CivilTime> first = CivilNext(search, AddSeconds(c0, limit - t + 2 * 86400));
    if (!first) return std::nullopt;
    const CivilTime jump = AddSeconds(*first, -2 * 86400);
    if (jump > AddSeconds(c0, 2 * 86400)) t = std::max(t, zone_.Lookup(jump).pre.unix_seconds());
  }
  while (t <= limit) {
    // Segment [t, seg_end): one UTC offset, so civil and instant move together.
    const std::optional<TimeZone::Transition> tr = zone_.NextTransition(At(t));
    const CivilTime c0 = zone_.ToCivil(At(t));
    const int64_t c0_s = CivilSecondsSinceEpoch(c0);
    const bool last_segment = !tr || tr->at.unix_seconds() > limit;
    const CivilTime c_end = last_segment ? AddSeconds(c0, limit - t + 1) : tr->from;
    CivilTime from = c0;
    while (std::optional<CivilTime> c = CivilNext(from, c_end)) {
      const int64_t i = t + (CivilSecondsSinceEpoch(*c) - c0_s);
      if (fixed_time_) {
        // Fixed time in a fall-back overlap: only the first occurrence fires.
        const TimeZone::CivilLookup cl = zone_.Lookup(*c);
        if (cl.kind == TimeZone::CivilLookup::Kind::kRepeated && cl.pre.unix_seconds() != i) {
          from = AddSeconds(*c, 1);
          continue;
        }
      }
      return At(i);
    }
    if (last_segment) return std::nullopt;
    // Fixed time swallowed by a spring-forward gap: fires once, when the gap ends.
    if (fixed_time_ && tr->to > tr->from && CivilNext(tr->from, tr->to)) return tr->at;
    t = tr->at.unix_seconds();
  }
  return std::nullopt;
}

std::optional<Instant> CronExpr::NextInSegment(int64_t t, int64_t limit) const {
  // Inside one offset segment, local seconds (instant + offset) and civil time move together:
  // the first civil match there is the answer, found with one zone lookup and no civil
  // conversion per step. Anything else goes to the segment walk in Next: no match before the
  // segment ends; a fixed-time schedule at a transition (a gap fire at `t`) or within two days
  // after one, where its wall time may repeat one that fired before the transition (an overlap's
  // second pass; two days exceed any UTC offset difference, so no earlier segment can repeat a
  // later wall time).
  const TimeZone::Segment seg = zone_.SegmentAt(At(t));
  const int64_t start = seg.start.unix_seconds();
  if (fixed_time_ && start == t) return std::nullopt;
  const int64_t end = std::min(seg.end.unix_seconds(), limit + 1);
  const std::optional<CivilTime> c =
      CivilNext(WallTime(t + seg.utc_offset_s), WallTime(end + seg.utc_offset_s));
  if (!c) return std::nullopt;
  const int64_t fire = CivilSecondsSinceEpoch(*c) - seg.utc_offset_s;
  if (fixed_time_ && fire - start < 2 * 86400) return std::nullopt;
  return At(fire);
}

std::optional<Instant> CronExpr::Prev(Instant before) const {
  if (every_s_ > 0) {
    const int64_t period_ms = every_s_ * 1000;
    return Instant::FromUnixMillis((FloorDiv(before.unix_millis() - 1, period_ms)) * period_ms);
  }
  // The last whole second strictly before `before`.
  int64_t t = FloorDiv(before.unix_millis() - 1, 1000);
  const int64_t limit = t - kSearchSeconds;
  {  // Same jump as in Next, backwards; `t` in the second pass of a fall-back overlap searches
     // from the end of the repeated range, so its first pass is not jumped over.
    const CivilTime top = zone_.ToCivil(At(t));
    CivilTime search = top;
    if (const std::optional<TimeZone::Transition> tr = zone_.PrevTransition(At(t));
        tr && tr->to < tr->from && top < tr->from) {
      search = AddSeconds(tr->from, -1);
    }
    const std::optional<CivilTime> last =
        CivilPrev(search, AddSeconds(top, -(t - limit) - 2 * 86400));
    if (!last) return std::nullopt;
    const CivilTime jump = AddSeconds(*last, 2 * 86400);
    if (jump < AddSeconds(top, -2 * 86400)) t = std::min(t, zone_.Lookup(jump).post.unix_seconds());
  }
  while (t >= limit) {
    // Segment [seg_start, t]: one UTC offset.
    const std::optional<TimeZone::Transition> tr = zone_.PrevTransition(At(t));
    const CivilTime top = zone_.ToCivil(At(t));
    const int64_t top_s = CivilSecondsSinceEpoch(top);
    const bool last_segment = !tr || tr->at.unix_seconds() < limit;
    const CivilTime since =
        last_segment ? AddSeconds(top, -(t - limit) - 1) : AddSeconds(tr->to, -1);
    CivilTime from = top;
    while (std::optional<CivilTime> c = CivilPrev(from, since)) {
      const int64_t i = t - (top_s - CivilSecondsSinceEpoch(*c));
      if (fixed_time_) {
        const TimeZone::CivilLookup cl = zone_.Lookup(*c);
        if (cl.kind == TimeZone::CivilLookup::Kind::kRepeated && cl.pre.unix_seconds() != i) {
          from = AddSeconds(*c, -1);
          continue;
        }
      }
      return At(i);
    }
    if (last_segment) return std::nullopt;
    if (fixed_time_ && tr->to > tr->from && CivilNext(tr->from, tr->to)) return tr->at;
    t = tr->at.unix_seconds() - 1;
  }
  return std::nullopt;
}

bool CronExpr::Matches(Instant t) const {
  if (t.unix_millis() % 1000 != 0) return false;
  if (every_s_ > 0) return t.unix_seconds() % every_s_ == 0;
  const CivilTime c = zone_.ToCivil(t);
  if (CivilMatches(c)) {
    if (!fixed_time_) return true;
    const TimeZone::CivilLookup cl = zone_.Lookup(c);
    return cl.kind != TimeZone::CivilLookup::Kind::kRepeated || cl.pre == t;
  }
  return fixed_time_ && IsGapFire(t);
}

bool CronExpr::IsGapFire(Instant t) const {
  // A gap ends at `t` when the offset grows there: the wall clock jumped from t's wall time in the
  // old offset to t's in the new one. Two offset lookups, not a transition search: Matches asks
  // this of every non-matching instant of a fixed-time schedule.
  const int before = zone_.UtcOffsetSeconds(t - std::chrono::seconds(1));
  const int after = zone_.UtcOffsetSeconds(t);
  if (after <= before) return false;
  return CivilNext(WallTime(t.unix_seconds() + before), WallTime(t.unix_seconds() + after))
      .has_value();
}

}  // namespace gnomon
