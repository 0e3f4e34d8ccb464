// CronExpr::Describe: a plain-language reading of a schedule, built from the parsed field sets
// (so "*/15" and "0,15,30,45" read the same).
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

constexpr std::array<const char*, 13> kMonthNames = {
    "",     "January", "February",  "March",   "April",    "May",     "June",
    "July", "August",  "September", "October", "November", "December"};
constexpr std::array<const char*, 7> kDayNames = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                  "Thursday", "Friday", "Saturday"};
constexpr std::array<const char*, 6> kOrdinals = {"",      "first",  "second",
                                                  "third", "fourth", "fifth"};

std::string Two(int v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d", v);
  return buf;
}

// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

template <size_t N>
std::vector<int> Values(const std::bitset<N>& bits, int offset = 0) {
  std::vector<int> out;
  for (size_t i = 0; i < N; ++i) {
    if (bits.test(i)) out.push_back(static_cast<int>(i) + offset);
  }
  return out;
}

// Describes a set of values: a run "9 through 17", a step "every 15th", or a list.
// `name` maps a value to its text. Returns "" for the full range [lo, hi].
std::string DescribeSet(const std::vector<int>& v, int lo, int hi, const char* (*name)(int)) {
  if (v.empty()) return "";
  if (static_cast<int>(v.size()) == hi - lo + 1) return "";
  auto text = [&](int x) { return name ? std::string(name(x)) : std::to_string(x); };
  if (v.size() == 1) return text(v[0]);
  bool run = true;
  for (size_t i = 1; i < v.size(); ++i) run = run && v[i] == v[i - 1] + 1;
  if (run && v.size() > 2) return text(v.front()) + " through " + text(v.back());
  std::vector<std::string> items;
  for (int x : v) items.push_back(text(x));
  return JoinAnd(items);
}

// The step k when `v` is {lo, lo+k, lo+2k, ...} covering the range to within one step; else 0.
int StepOf(const std::vector<int>& v, int lo, int hi) {
  if (v.size() < 2 || v[0] != lo) return 0;
  const int k = v[1] - v[0];
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] - v[i - 1] != k) return 0;
  }
  return v.back() + k > hi ? k : 0;
}

std::string Plural(int n, const char* unit) {
  return n == 1 ? std::string("every ") + unit : "every " + std::to_string(n) + " " + unit + "s";
}

std::string TimeOfDay(const CronExpr::Fields& f) {
  const std::vector<int> secs = Values(f.seconds);
  const std::vector<int> mins = Values(f.minutes);
  const std::vector<int> hours = Values(f.hours);
  const bool zero_sec = secs.size() == 1 && secs[0] == 0;
  if (secs.size() == 1 && mins.size() == 1 && hours.size() == 1) {
    std::string out = "at " + Two(hours[0]) + ":" + Two(mins[0]);
    if (!zero_sec) out += ":" + Two(secs[0]);
    return out;
  }
  std::string out;
  // Seconds.
  if (!zero_sec) {
    if (const int k = StepOf(secs, 0, 59); secs.size() == 60) {
      out = "every second";
    } else if (k) {
      out = Plural(k, "second");
    } else {
      out = "at second " + DescribeSet(secs, 0, 59, nullptr);
    }
  }
  // Minutes.
  std::string minute_text;
  if (mins.size() == 60) {
    minute_text = zero_sec ? "every minute" : "";
  } else if (const int k = StepOf(mins, 0, 59)) {
    minute_text = Plural(k, "minute");
  } else if (mins.size() == 1) {
    minute_text = hours.size() == 24 && zero_sec && mins[0] == 0
                      ? "every hour"
                      : "at minute " + std::to_string(mins[0]) + " past the hour";
  } else {
    minute_text = "at minutes " + DescribeSet(mins, 0, 59, nullptr) + " past the hour";
  }
  if (!minute_text.empty()) out += out.empty() ? minute_text : ", " + minute_text;
  // Hours.
  if (hours.size() != 24) {
    std::string hour_text;
    bool run = true;
    for (size_t i = 1; i < hours.size(); ++i) run = run && hours[i] == hours[i - 1] + 1;
    if (const int k = StepOf(hours, 0, 23)) {
      hour_text = Plural(k, "hour");
    } else if (run && hours.size() > 1) {
      hour_text = "between " + Two(hours.front()) + ":00 and " + Two(hours.back()) + ":59";
    } else {
      std::vector<std::string> items;
      for (int h : hours) items.push_back(Two(h) + ":00");
      hour_text =
          "during the hour" + std::string(hours.size() > 1 ? "s" : "") + " from " + JoinAnd(items);
    }
    out += ", " + hour_text;
  }
  return out;
}

std::string DayOfMonthText(const CronExpr::Fields& f) {
  std::vector<std::string> parts;
  const std::string days = DescribeSet(Values(f.days_of_month), 1, 31, nullptr);
  if (!days.empty()) {
    const int k = StepOf(Values(f.days_of_month), 1, 31);
    parts.push_back(k ? Plural(k, "day") + " of the month"
                      : std::string(f.days_of_month.count() > 1 ? "on days " : "on day ") + days +
                            " of the month");
  }
  if (f.last_day) parts.push_back("on the last day of the month");
  if (f.last_weekday) parts.push_back("on the last weekday of the month");
  for (int n = 1; n <= 31; ++n) {
    if (f.nearest_weekday.test(n))
      parts.push_back("on the weekday nearest day " + std::to_string(n));
  }
  return JoinAnd(parts);
}

std::string DayOfWeekText(const CronExpr::Fields& f) {
  std::vector<std::string> parts;
  const std::string days =
      DescribeSet(Values(f.days_of_week), 0, 6, [](int d) { return kDayNames[d]; });
  if (!days.empty()) parts.push_back("on " + days);
  for (int d = 0; d < 7; ++d) {
    for (int n = 1; n <= 5; ++n) {
      if (f.nth[d].test(n)) {
        parts.push_back(std::string("on the ") + kOrdinals[n] + " " + kDayNames[d] +
                        " of the month");
      }
    }
    if (f.last_of_month.test(d)) {
      parts.push_back(std::string("on the last ") + kDayNames[d] + " of the month");
    }
  }
  return JoinAnd(parts);
}

}  // namespace

std::string CronExpr::Describe() const {
  std::string out;
  if (every_s_ > 0) {
    out = "Every " + FormatDuration(Duration(every_s_ * 1000)) +
          ", at whole multiples of it since the Unix epoch";
  } else {
    const Fields& f = fields_;
    out = TimeOfDay(f);
    const std::string dom = f.dom_restricted ? DayOfMonthText(f) : "";
    const std::string dow = f.dow_restricted ? DayOfWeekText(f) : "";
    if (!dom.empty() && !dow.empty()) {
      out += ", " + dom + " or " + dow;
    } else if (!dom.empty() || !dow.empty()) {
      out += ", " + dom + dow;
    } else if (fixed_time_) {
      out += ", every day";
    }
    const std::string months =
        DescribeSet(Values(f.months), 1, 12, [](int m) { return kMonthNames[m]; });
    if (!months.empty()) out += ", in " + months;
    if (f.year_restricted) {
      const std::vector<int> years = Values(f.years, kMinYear);
      if (years.empty()) {
        out += ", never";
      } else if (const int k = StepOf(years, kMinYear, kMaxYear)) {
        out += ", " + Plural(k, "year");
      } else {
        out += ", in " + DescribeSet(years, kMinYear, kMaxYear, nullptr);
      }
    }
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  }
  if (zone_.name() != "UTC" && every_s_ == 0) out += " (" + zone_.name() + " time)";
  return out;
}

}  // namespace gnomon
