#include "src/server/run_json.h"

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace gnomon::server {

using nlohmann::json;

namespace {

// The first and last instants formatted with a four-digit year: 0000-01-01T00:00:00.000Z and
// 9999-12-31T23:59:59.999Z. Others take Instant::ToRfc3339's path.
constexpr int64_t kFirstFourDigitYearMs = -62167219200000;
constexpr int64_t kLastFourDigitYearMs = 253402300799999;

// Writes `v` (0 <= v < 10^n) as exactly `n` decimal digits.
void PutDigits(char* p, int64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

}  // namespace

void AppendRfc3339Json(std::string& out, Instant t) {
  const int64_t ms = t.unix_millis();
  if (ms < kFirstFourDigitYearMs || ms > kLastFourDigitYearMs) {
    out += '"';
    out += t.ToRfc3339();
    out += '"';
    return;
  }
  // Floor divisions (instants before 1970 are negative), then the proleptic Gregorian date of a
  // day number (H. Hinnant's civil_from_days, which cctz agrees with in this range).
  const int64_t seconds = t.unix_seconds();
  const int64_t milli = ms - seconds * 1000;
  int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  const int64_t second_of_day = seconds - days * 86400;
  days += 719468;  // from 1970-01-01 to 0000-03-01
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t day_of_era = days - era * 146097;
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_from_march = (5 * day_of_year + 2) / 153;
  const int64_t day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  const int64_t month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  char buf[] = "\"YYYY-MM-DDThh:mm:ss.mmmZ\"";
  PutDigits(buf + 1, year, 4);
  PutDigits(buf + 6, month, 2);
  PutDigits(buf + 9, day, 2);
  PutDigits(buf + 12, second_of_day / 3600, 2);
  PutDigits(buf + 15, second_of_day / 60 % 60, 2);
  PutDigits(buf + 18, second_of_day % 60, 2);
  PutDigits(buf + 21, milli, 3);
  out.append(buf, sizeof buf - 1);
}

void AppendJsonString(std::string& out, std::string_view s) {
  // Non-ASCII text (rare in run records) goes through nlohmann::json, which validates the UTF-8
  // and replaces invalid bytes: one implementation of that, so the output cannot drift.
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    out += '\\';
    switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '\b':
        out += 'b';
        break;
      case '\t':
        out += 't';
        break;
      case '\n':
        out += 'n';
        break;
      case '\f':
        out += 'f';
        break;
      case '\r':
        out += 'r';
        break;
      default:
        out += "u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
        break;
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

void AppendRunJson(std::string& out, const RunRecord& r, bool with_output) {
  // Keys in sorted order, as nlohmann::json (a std::map) writes them.
  out += "{\"attempt\":";
  AppendInt(out, r.attempt);
  out += ",\"cause\":";
  AppendJsonString(out, r.cause);
  out += ",\"error\":";
  AppendJsonString(out, r.error);
  out += ",\"exit_code\":";
  if (r.exit_code) {
    AppendInt(out, *r.exit_code);
  } else {
    out += "null";
  }
  out += ",\"fencing_token\":";
  AppendInt(out, r.fencing_token);
  out += ",\"finished_at\":";
  if (r.outcome == RunOutcome::kRunning) {
    out += "null";
  } else {
    AppendRfc3339Json(out, r.finished_at);
  }
  out += ",\"job_id\":";
  AppendJsonString(out, r.job_id);
  out += ",\"node_id\":";
  AppendJsonString(out, r.node_id);
  out += ",\"outcome\":";
  AppendJsonString(out, ToString(r.outcome));
  if (with_output) {
    out += ",\"output\":";
    AppendJsonString(out, r.output);
  }
  // The record's parameters come from the backend: sent as they are only when they are a JSON
  // object (what every writer stores), else as none.
  out += ",\"params\":";
  if (!r.params.empty() && r.params.front() == '{' && json::accept(r.params)) {
    out += r.params;
  } else {
    out += "{}";
  }
  out += ",\"run_id\":";
  AppendJsonString(out, r.run_id);
  out += ",\"scheduled_at\":";
  AppendRfc3339Json(out, r.scheduled_at);
  out += ",\"shard\":";
  AppendInt(out, r.shard);
  out += ",\"shard_count\":";
  AppendInt(out, r.shard_count);
  out += ",\"skip_reason\":";
  AppendJsonString(out, r.skip_reason);
  out += ",\"started_at\":";
  AppendRfc3339Json(out, r.started_at);
  out += '}';
}

}  // namespace gnomon::server
