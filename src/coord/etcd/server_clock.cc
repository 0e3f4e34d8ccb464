#include "src/coord/etcd/server_clock.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gnomon::coord {
namespace {

bool Digits(std::string_view s, int& out) {
  if (s.empty()) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

}  // namespace

std::optional<Instant> ParseHttpDate(std::string_view text) {
  // "Mon, 30 Nov 2026 02:29:52 GMT": fixed width.
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (text.size() != 29 || text.substr(3, 2) != ", " || text[7] != ' ' || text[11] != ' ' ||
      text[16] != ' ' || text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT") {
    return std::nullopt;
  }
  CivilTime c;
  int year = 0;
  if (!Digits(text.substr(5, 2), c.day) || !Digits(text.substr(12, 4), year) ||
      !Digits(text.substr(17, 2), c.hour) || !Digits(text.substr(20, 2), c.minute) ||
      !Digits(text.substr(23, 2), c.second)) {
    return std::nullopt;
  }
  c.year = year;
  c.month = 0;
  for (int m = 0; m < 12; ++m) {
    if (text.substr(8, 3) == kMonths[m]) c.month = m + 1;
  }
  if (c.month == 0 || c.day < 1 || c.day > DaysInMonth(c.year, c.month) || c.hour > 23 ||
      c.minute > 59 || c.second > 60) {
    return std::nullopt;
  }
  return Instant::FromUnixSeconds(CivilSecondsSinceEpoch(c));
}

ServerClock::ServerClock(int64_t drift_ppm, Duration resolution)
    : drift_(static_cast<double>(std::max<int64_t>(0, drift_ppm)) / 1e6),
      resolution_(static_cast<double>(std::max<int64_t>(1, resolution.count()))) {}

void ServerClock::Restart(double sent, double lo, double hi, double rtt) {
  known_ = true;
  ref_ = sent;
  lo_ = lo;
  hi_ = hi;
  min_rtt_ = rtt;
}

bool ServerClock::Add(Duration sent, Duration received, Instant date) {
  const double s = static_cast<double>(sent.count());
  const double r = static_cast<double>(std::max(sent, received).count());
  const double d = static_cast<double>(date.unix_millis());
  // Steady times are whole milliseconds (truncated): the true receive time may be up to 1 ms
  // later than `received`, hence the extra millisecond on the low side.
  const double lo = d - r - 1;
  const double hi = d + resolution_ - s;
  if (!known_) {
    Restart(s, lo, hi, r - s);
    return true;
  }
  // The sample's bounds hold at its answer (>= s) and widen with drift after it; normalised to
  // ref_ like lo_/hi_ (see Age).
  const double new_lo = std::max(lo_, lo + Age(s));
  const double new_hi = std::min(hi_, hi - Age(s));
  if (new_lo - Age(r) > new_hi + Age(r)) {
    ++resets_;
    Restart(s, lo, hi, r - s);
    return false;
  }
  lo_ = new_lo;
  hi_ = new_hi;
  min_rtt_ = std::min(min_rtt_, r - s);
  return true;
}

std::optional<ServerClock::Reading> ServerClock::Read(Duration steady) const {
  if (!known_) return std::nullopt;
  const double t = static_cast<double>(steady.count());
  const double mid = (lo_ + hi_) / 2;
  const double half = (hi_ - lo_) / 2 + Age(t);
  return Reading{Instant::FromUnixMillis(std::llround(t + mid)),
                 Duration(static_cast<int64_t>(std::ceil(half)))};
}

Duration ServerClock::Target() const {
  return Duration(std::max<int64_t>(5, static_cast<int64_t>(std::ceil(min_rtt_))));
}

std::optional<Duration> ServerClock::NextProbe(Duration steady) const {
  const double t = static_cast<double>(steady.count());
  if (!known_) return steady;
  const double lo = lo_ - Age(t);
  const double hi = hi_ + Age(t);
  const double width = hi - lo;
  if (width / 2 <= static_cast<double>(Target().count())) return std::nullopt;
  const double step = std::max(width / 16, 1.0);
  // The server's clock reaches B (a whole second) at a steady time in [B − hi, B − lo]: take
  // the first such window that still has room for a probe after now.
  const double boundary = std::ceil((t + lo + step) / resolution_) * resolution_;
  // A probe answered before B moves the window's start up to its send time; one answered at or
  // after B moves the window's end down to its receive time.
  const double at = std::max(t, boundary - hi + step);
  return Duration(static_cast<int64_t>(std::ceil(at)));
}

Duration ServerClock::WhenUncertaintyExceeds(Duration limit) const {
  if (!known_) return Duration(std::numeric_limits<int64_t>::min() / 4);
  if (drift_ <= 0) return Duration(std::numeric_limits<int64_t>::max() / 4);
  const double spare = static_cast<double>(limit.count()) - (hi_ - lo_) / 2;
  return Duration(static_cast<int64_t>(std::floor(ref_ + spare / drift_)));
}

}  // namespace gnomon::coord
