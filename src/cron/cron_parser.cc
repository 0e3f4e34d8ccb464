// Parser for gnomon's cron dialect. One left-to-right pass over the input (linear time); every
// error names the field, the offending text and its 1-based column.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/cron.h"
#include "src/cron/field_spec.h"

namespace gnomon {
namespace {

using cron::EqualsIgnoreCase;
using cron::Error;
using cron::FieldKind;
using cron::FieldSpec;
using cron::IsDigit;
using cron::kDomSpec;
using cron::kDowSpec;
using cron::kHourSpec;
using cron::kMinuteSpec;
using cron::kMonthSpec;
using cron::kSecondSpec;
using cron::kYearSpec;
using cron::Quote;
using cron::ReadStep;
using cron::ReadValue;
using cron::Upper;

// FNV-1a, 64 bit: stable across platforms and releases, so every node hashes `H` alike.
uint64_t StableHash(std::string_view job_id, std::string_view field) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
  };
  mix(job_id);
  mix("\x1f");
  mix(field);
  return h;
}

}  // namespace

// Builds a CronExpr; a friend of CronExpr. Holds the input and reports errors with columns.
class CronParser {
 public:
  CronParser(std::string_view text, const CronOptions& options) : text_(text), options_(options) {}

  Result<CronExpr> Parse() {
    if (text_.size() > CronExpr::kMaxLength) {
      return InvalidArgumentError("expression is " + std::to_string(text_.size()) +
                                  " characters long; the limit is " +
                                  std::to_string(CronExpr::kMaxLength));
    }
    int commas = 0;
    for (size_t i = 0; i < text_.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(text_[i]);
      if (c >= 0x80) {
        return Error("expression", "non-ASCII character", i);
      }
      if (c == '\t') return Error("expression", "tab is not a field separator (use spaces)", i);
      if (c < 0x20 || c == 0x7f) return Error("expression", "control character", i);
      if (c == ',') ++commas;
    }
    if (commas + 1 > CronExpr::kMaxListItems) {
      return InvalidArgumentError("expression has " + std::to_string(commas + 1) +
                                  " list items; the limit is " +
                                  std::to_string(CronExpr::kMaxListItems));
    }

    CronExpr expr;
    // Surrounding spaces are not part of the expression (columns still count them).
    const size_t text_begin = text_.find_first_not_of(' ');
    const size_t text_end = text_.find_last_not_of(' ');
    if (text_begin != std::string_view::npos) {
      expr.text_ = std::string(text_.substr(text_begin, text_end - text_begin + 1));
    }
    expr.zone_ = options_.time_zone;

    // Split into space-separated words, remembering each word's offset.
    std::vector<std::pair<std::string_view, size_t>> words;
    for (size_t i = 0; i < text_.size();) {
      if (text_[i] == ' ') {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < text_.size() && text_[j] != ' ') ++j;
      words.emplace_back(text_.substr(i, j - i), i);
      i = j;
    }
    if (words.empty()) return InvalidArgumentError("expression is empty");

    size_t first = 0;
    for (std::string_view prefix : {"CRON_TZ=", "TZ="}) {
      if (words[0].first.substr(0, prefix.size()) == prefix) {
        const std::string_view zone_name = words[0].first.substr(prefix.size());
        Result<TimeZone> zone = TimeZone::Load(zone_name);
        if (!zone.ok()) return Error("time zone", zone.status().message(), words[0].second);
        expr.zone_ = *zone;
        first = 1;
        break;
      }
    }
    if (first == words.size()) return InvalidArgumentError("expression has a zone but no schedule");

    if (words[first].first.front() == '@') {
      GNOMON_RETURN_IF_ERROR(ParseMacro(words, first, expr));
    } else {
      const size_t n = words.size() - first;
      if (n < 5 || n > 7) {
        return InvalidArgumentError("expected 5, 6 or 7 fields, found " + std::to_string(n));
      }
      std::vector<std::pair<std::string_view, size_t>> fields(words.begin() + first, words.end());
      if (n == 5) fields.insert(fields.begin(), {std::string_view("0"), std::string_view::npos});
      GNOMON_RETURN_IF_ERROR(ParseFields(fields, expr));
    }
    return expr;
  }

 private:
  Status ParseMacro(const std::vector<std::pair<std::string_view, size_t>>& words, size_t first,
                    CronExpr& expr) {
    const std::string_view macro = words[first].first;
    const size_t at = words[first].second;
    if (EqualsIgnoreCase(macro, "@every")) {
      if (words.size() != first + 2) {
        return Error("@every", "expects one duration, e.g. @every 90s", at);
      }
      const std::string_view text = words[first + 1].first;
      Result<Duration> d = ParseDuration(text);
      if (!d.ok()) return Error("@every", d.status().message(), words[first + 1].second);
      if (d->count() % 1000 != 0 || d->count() < 1000) {
        return Error("@every", Quote(text) + " is not a whole number of seconds of at least 1s",
                     words[first + 1].second);
      }
      expr.every_s_ = d->count() / 1000;
      return Status::Ok();
    }
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kMacros = {{
        {"@yearly", "0 0 0 1 1 *"},
        {"@annually", "0 0 0 1 1 *"},
        {"@monthly", "0 0 0 1 * *"},
        {"@weekly", "0 0 0 * * 0"},
        {"@daily", "0 0 0 * * *"},
        {"@midnight", "0 0 0 * * *"},
        {"@hourly", "0 0 * * * *"},
    }};
    if (words.size() != first + 1) return Error("expression", "text after " + Quote(macro), at);
    for (const auto& [name, expansion] : kMacros) {
      if (!EqualsIgnoreCase(macro, name)) continue;
      std::vector<std::pair<std::string_view, size_t>> fields;
      for (size_t i = 0; i < expansion.size(); i += 2) {
        fields.emplace_back(expansion.substr(i, 1), at);
      }
      return ParseFields(fields, expr);
    }
    return Error("expression",
                 "unknown macro " + Quote(macro) +
                     " (use @yearly @annually @monthly @weekly @daily @midnight @hourly @every)",
                 at);
  }

  Status ParseFields(const std::vector<std::pair<std::string_view, size_t>>& fields,
                     CronExpr& expr) {
    CronExpr::Fields& f = expr.fields_;
    static constexpr const FieldSpec* kSpecs[] = {&kSecondSpec, &kMinuteSpec, &kHourSpec, &kDomSpec,
                                                  &kMonthSpec,  &kDowSpec,    &kYearSpec};
    for (size_t i = 0; i < fields.size(); ++i) {
      GNOMON_RETURN_IF_ERROR(ParseField(*kSpecs[i], fields[i].first, fields[i].second, f));
    }
    if (fields.size() < 7) {
      f.years.set();
      f.year_restricted = false;
    }
    expr.fixed_time_ = f.seconds.count() == 1 && f.minutes.count() == 1 && f.hours.count() == 1;
    return Status::Ok();
  }

  // Sets bit `v` of the field's set (day of week 7 folds to 0; years are offset).
  static void SetValue(const FieldSpec& spec, CronExpr::Fields& f, int v) {
    switch (spec.kind) {
      case FieldKind::kSecond:
        f.seconds.set(v);
        break;
      case FieldKind::kMinute:
        f.minutes.set(v);
        break;
      case FieldKind::kHour:
        f.hours.set(v);
        break;
      case FieldKind::kDayOfMonth:
        f.days_of_month.set(v);
        break;
      case FieldKind::kMonth:
        f.months.set(v);
        break;
      case FieldKind::kDayOfWeek:
        f.days_of_week.set(v % 7);
        break;
      case FieldKind::kYear:
        f.years.set(v - CronExpr::kMinYear);
        break;
    }
  }

  Status ParseField(const FieldSpec& spec, std::string_view field, size_t offset,
                    CronExpr::Fields& f) {
    const bool unrestricted = field == "*" || field == "?" || field == "*/1";
    if (spec.kind == FieldKind::kDayOfMonth) f.dom_restricted = !unrestricted;
    if (spec.kind == FieldKind::kDayOfWeek) f.dow_restricted = !unrestricted;
    if (spec.kind == FieldKind::kYear) f.year_restricted = !unrestricted;
    size_t start = 0;
    while (true) {
      const size_t comma = field.find(',', start);
      const std::string_view item = field.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      const size_t item_offset = offset == std::string_view::npos ? offset : offset + start;
      if (item.empty()) return Error(spec.name, "empty list item", item_offset);
      GNOMON_RETURN_IF_ERROR(ParseItem(spec, item, item_offset, f));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return Status::Ok();
  }

  Status ParseItem(const FieldSpec& spec, std::string_view item, size_t item_offset,
                   CronExpr::Fields& f) {
    auto col = [&](size_t p) {
      return item_offset == std::string_view::npos ? item_offset : item_offset + p;
    };
    const bool dom = spec.kind == FieldKind::kDayOfMonth;
    const bool dow = spec.kind == FieldKind::kDayOfWeek;
    const int field_max = dow ? 6 : spec.max;  // `*` and `a/n` expand over 0-6 for days of week

    // Day-of-month specials: L, LW, nW.
    if (dom && EqualsIgnoreCase(item, "L")) {
      f.last_day = true;
      return Status::Ok();
    }
    if (dom && EqualsIgnoreCase(item, "LW")) {
      f.last_weekday = true;
      return Status::Ok();
    }
    if (dom && item.size() >= 2 && Upper(item.back()) == 'W' && IsDigit(item[0])) {
      size_t pos = 0;
      int v;
      GNOMON_RETURN_IF_ERROR(ReadValue(spec, item, pos, item_offset, false, v));
      if (pos != item.size() - 1) return Error(spec.name, "unexpected " + Quote(item), col(pos));
      f.nearest_weekday.set(v);
      return Status::Ok();
    }

    int lo = spec.min;
    int hi = field_max;
    int step = 1;
    size_t pos = 0;
    bool hashed = false;
    if (item[0] == '*' || item[0] == '?') {
      pos = 1;
    } else if (item[0] == 'H' || item[0] == 'h') {
      // H, H(a-b), H/n, H(a-b)/n: a value derived from the job id. Days of month hash over 1-28
      // so the job fires every month.
      hashed = true;
      pos = 1;
      if (dom) hi = 28;
      if (pos < item.size() && item[pos] == '(') {
        ++pos;
        GNOMON_RETURN_IF_ERROR(ReadValue(spec, item, pos, item_offset, false, lo));
        if (pos >= item.size() || item[pos] != '-') {
          return Error(spec.name, "H(a-b) needs a range", col(pos));
        }
        ++pos;
        GNOMON_RETURN_IF_ERROR(ReadValue(spec, item, pos, item_offset, true, hi));
        if (pos >= item.size() || item[pos] != ')') {
          return Error(spec.name, "missing ')' in " + Quote(item), col(pos));
        }
        ++pos;
        if (lo > hi) {
          return Error(spec.name,
                       "range " + std::to_string(lo) + "-" + std::to_string(hi) + " is reversed",
                       col(0));
        }
      }
    } else {
      GNOMON_RETURN_IF_ERROR(ReadValue(spec, item, pos, item_offset, false, lo));
      hi = lo;
      if (pos < item.size() && item[pos] == '-') {
        ++pos;
        GNOMON_RETURN_IF_ERROR(ReadValue(spec, item, pos, item_offset, true, hi));
        if (lo > hi) {
          return Error(spec.name,
                       "range " + Quote(item.substr(0, pos)) +
                           " is reversed (wrap-around ranges "
                           "are not supported)",
                       col(0));
        }
      } else if (pos < item.size() && item[pos] == '/') {
        hi = field_max;  // "a/n" means a-max/n
        if (lo > hi) {
          return Error(spec.name,
                       Quote(item) + " starts after the end of the range " +
                           std::to_string(spec.min) + "-" + std::to_string(field_max),
                       col(0));
        }
      }
      if (dow && pos < item.size() && (item[pos] == '#' || Upper(item[pos]) == 'L')) {
        return ParseDowSpecial(spec, item, pos, item_offset, lo, hi, f);
      }
    }
    if (pos < item.size() && item[pos] == '/') {
      ++pos;
      GNOMON_RETURN_IF_ERROR(ReadStep(spec, item, pos, item_offset, step));
    }
    if (pos != item.size()) {
      return Error(spec.name, "unexpected " + Quote(item.substr(pos)) + " in " + Quote(item),
                   col(pos));
    }
    if (hashed) {
      const uint64_t h = StableHash(options_.job_id, spec.name);
      if (step == 1 && item.find('/') == std::string_view::npos) {
        SetValue(spec, f, lo + static_cast<int>(h % static_cast<uint64_t>(hi - lo + 1)));
        return Status::Ok();
      }
      lo += static_cast<int>(h % static_cast<uint64_t>(std::min(step, hi - lo + 1)));
    }
    for (int v = lo; v <= hi; v += step) SetValue(spec, f, v);
    return Status::Ok();
  }

  // After a day-of-week value or range: "#n", "#L" or "L" (the n-th / last such day of month).
  Status ParseDowSpecial(const FieldSpec& spec, std::string_view item, size_t pos,
                         size_t item_offset, int lo, int hi, CronExpr::Fields& f) {
    auto col = [&](size_t p) {
      return item_offset == std::string_view::npos ? item_offset : item_offset + p;
    };
    if (Upper(item[pos]) == 'L') {
      if (pos + 1 != item.size()) return Error(spec.name, "unexpected " + Quote(item), col(pos));
      for (int d = lo; d <= hi; ++d) f.last_of_month.set(d % 7);
      return Status::Ok();
    }
    ++pos;  // '#'
    if (lo != hi) return Error(spec.name, "'#' needs a single day, not a range", col(0));
    if (pos < item.size() && Upper(item[pos]) == 'L' && pos + 1 == item.size()) {
      f.last_of_month.set(lo % 7);
      return Status::Ok();
    }
    if (pos + 1 != item.size() || !IsDigit(item[pos]) || item[pos] < '1' || item[pos] > '5') {
      return Error(spec.name, "#" + Quote(item.substr(pos)) + " must be #1 to #5 or #L", col(pos));
    }
    f.nth[lo % 7].set(item[pos] - '0');
    return Status::Ok();
  }

  std::string_view text_;
  const CronOptions& options_;
};

Result<CronExpr> CronExpr::Parse(std::string_view text, const CronOptions& options) {
  return CronParser(text, options).Parse();
}

}  // namespace gnomon
