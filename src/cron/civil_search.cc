#include "src/cron/civil_search.h"

#include <algorithm>
#include <bit>

namespace gnomon {
namespace {

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

}  // namespace

uint32_t CivilSearch::DayMask(int64_t year, int month) const {
  const CronExpr::Fields& f = f_;
  if (f.year_restricted) {
    if (year < CronExpr::kMinYear || year > CronExpr::kMaxYear ||
        !f.years.test(year - CronExpr::kMinYear))
      return 0;
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

bool CivilSearch::DayMatches(int64_t year, int month, int day) const {
  return (DayMask(year, month) >> day) & 1;
}

bool CivilSearch::Matches(const CivilTime& c) const {
  return f_.seconds.test(c.second) && f_.minutes.test(c.minute) && f_.hours.test(c.hour) &&
         DayMatches(c.year, c.month, c.day);
}

std::optional<CivilTime> CivilSearch::Next(const CivilTime& from, const CivilTime& until) const {
  const CronExpr::Fields& f = f_;
  CivilTime c = from;
  while (c < until) {
    if (f.year_restricted) {
      const int y = c.year < CronExpr::kMinYear ? NextBit(f.years, 0)
                    : c.year > CronExpr::kMaxYear
                        ? -1
                        : NextBit(f.years, static_cast<int>(c.year - CronExpr::kMinYear));
      if (y < 0) return std::nullopt;
      if (y + CronExpr::kMinYear != c.year) {
        c = StartOfDay(y + CronExpr::kMinYear, 1, 1);
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

std::optional<CivilTime> CivilSearch::Prev(const CivilTime& before, const CivilTime& since) const {
  const CronExpr::Fields& f = f_;
  CivilTime c = before;
  while (c > since) {
    if (f.year_restricted) {
      const int y = c.year > CronExpr::kMaxYear
                        ? PrevBit(f.years, CronExpr::kMaxYear - CronExpr::kMinYear)
                    : c.year < CronExpr::kMinYear
                        ? -1
                        : PrevBit(f.years, static_cast<int>(c.year - CronExpr::kMinYear));
      if (y < 0) return std::nullopt;
      if (y + CronExpr::kMinYear != c.year) {
        c = EndOfDay(y + CronExpr::kMinYear, 12, 31);
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

}  // namespace gnomon
