// Instant formatting/parsing and durations.
#include <cctz/civil_time.h>
#include <cctz/time_zone.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "gnomon/time.h"

namespace gnomon {
namespace {

cctz::time_point<cctz::seconds> ToTimePoint(int64_t unix_s) {
  return std::chrono::time_point_cast<cctz::seconds>(std::chrono::system_clock::from_time_t(0)) +
         cctz::seconds(unix_s);
}

std::string FormatUtc(const Instant& t, bool with_ms) {
  const int64_t s = t.unix_seconds();
  const int64_t ms = t.unix_millis() - s * 1000;
  const cctz::civil_second c = cctz::convert(ToTimePoint(s), cctz::utc_time_zone());
  char buf[64];
  if (with_ms) {
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d.%03lldZ",
                  static_cast<long long>(c.year()), c.month(), c.day(), c.hour(), c.minute(),
                  c.second(), static_cast<long long>(ms));
  } else {
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02dZ",
                  static_cast<long long>(c.year()), c.month(), c.day(), c.hour(), c.minute(),
                  c.second());
  }
  return buf;
}

// Reads exactly `n` ASCII digits at `pos`.
bool Digits(std::string_view s, size_t& pos, int n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (int i = 0; i < n; ++i) {
    const char ch = s[pos + i];
    if (ch < '0' || ch > '9') return false;
    out = out * 10 + (ch - '0');
  }
  pos += n;
  return true;
}

bool Expect(std::string_view s, size_t& pos, std::string_view chars) {
  if (pos >= s.size() || chars.find(s[pos]) == std::string_view::npos) return false;
  ++pos;
  return true;
}

}  // namespace

std::string Instant::ToRfc3339() const { return FormatUtc(*this, true); }
std::string Instant::ToRfc3339Seconds() const { return FormatUtc(*this, false); }

Result<Instant> Instant::ParseRfc3339(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid RFC 3339 instant \"" + std::string(text.substr(0, 64)) +
                                "\": " + std::string(why) +
                                " (expected e.g. 2026-11-29T21:30:00Z)");
  };
  size_t pos = 0;
  int y, mo, d, h, mi, sec;
  if (!Digits(text, pos, 4, y) || !Expect(text, pos, "-") || !Digits(text, pos, 2, mo) ||
      !Expect(text, pos, "-") || !Digits(text, pos, 2, d)) {
    return bad("date must be YYYY-MM-DD");
  }
  if (!Expect(text, pos, "Tt ")) return bad("missing 'T' between date and time");
  if (!Digits(text, pos, 2, h) || !Expect(text, pos, ":") || !Digits(text, pos, 2, mi) ||
      !Expect(text, pos, ":") || !Digits(text, pos, 2, sec)) {
    return bad("time must be hh:mm:ss");
  }
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || sec > 59) {
    return bad("a field is out of range");
  }
  int64_t ms = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 3) ms = ms * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0 || digits > 9) return bad("fraction must have 1 to 9 digits");
    for (int i = digits; i < 3; ++i) ms *= 10;
  }
  int offset_s = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!Digits(text, pos, 2, oh) || !Expect(text, pos, ":") || !Digits(text, pos, 2, om) ||
        oh > 23 || om > 59) {
      return bad("offset must be Z or +hh:mm");
    }
    offset_s = sign * (oh * 3600 + om * 60);
  } else {
    return bad("missing zone offset (Z or +hh:mm)");
  }
  if (pos != text.size()) return bad("unexpected text after the offset");
  const cctz::civil_second c(y, mo, d, h, mi, sec);
  const int64_t local_s = (c - cctz::civil_second(1970, 1, 1, 0, 0, 0));
  return Instant::FromUnixMillis((local_s - offset_s) * 1000 + ms);
}

Result<Duration> ParseDuration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid duration \"" + std::string(text.substr(0, 64)) + "\": " +
                                std::string(why) + " (expected e.g. 500ms, 90s, 1h30m, 2d)");
  };
  if (text.empty()) return bad("empty");
  if (text.size() > 64) return bad("too long");
  long double total_ms = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    while (pos < text.size() && ((text[pos] >= '0' && text[pos] <= '9') || text[pos] == '.')) ++pos;
    const std::string_view num = text.substr(start, pos - start);
    if (num.empty()) {
      return text[start] == '-' ? bad("negative durations are not allowed") : bad("missing number");
    }
    if (num.find('.') != num.rfind('.') || num.front() == '.' || num.back() == '.') {
      return bad("malformed number");
    }
    long double value = 0, scale = 0;
    for (char ch : num) {
      if (ch == '.') {
        scale = 1;
        continue;
      }
      value = value * 10 + (ch - '0');
      if (scale > 0) scale *= 10;
    }
    if (scale > 0) value /= scale;
    const size_t ustart = pos;
    while (pos < text.size() && ((text[pos] >= 'a' && text[pos] <= 'z') || text[pos] == 'u')) ++pos;
    const std::string_view unit = text.substr(ustart, pos - ustart);
    long double unit_ms;
    if (unit == "ms") {
      unit_ms = 1;
    } else if (unit == "s") {
      unit_ms = 1000;
    } else if (unit == "m") {
      unit_ms = 60'000;
    } else if (unit == "h") {
      unit_ms = 3'600'000;
    } else if (unit == "d") {
      unit_ms = 86'400'000;
    } else if (unit.empty()) {
      return bad("missing unit (ms, s, m, h or d)");
    } else {
      return bad("unknown unit \"" + std::string(unit) + "\" (use ms, s, m, h or d)");
    }
    total_ms += value * unit_ms;
    if (total_ms > static_cast<long double>(kMaxConfigDuration.count())) {
      return bad("longer than the maximum of 100 years");
    }
  }
  return Duration(static_cast<int64_t>(std::floor(total_ms)));
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  const int64_t days = ms / 86'400'000;
  ms %= 86'400'000;
  const int64_t hours = ms / 3'600'000;
  ms %= 3'600'000;
  const int64_t minutes = ms / 60'000;
  ms %= 60'000;
  const int64_t seconds = ms / 1000;
  ms %= 1000;
  if (days) out += std::to_string(days) + "d";
  if (hours) out += std::to_string(hours) + "h";
  if (minutes) out += std::to_string(minutes) + "m";
  if (seconds) out += std::to_string(seconds) + "s";
  if (ms) out += std::to_string(ms) + "ms";
  return out;
}

}  // namespace gnomon
