#include "src/cron/field_spec.h"

#include <array>
#include <cstdint>
#include <vector>

namespace gnomon::cron {
namespace {

constexpr std::array<std::string_view, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kDayNames = {"SUN", "MON", "TUE", "WED",
                                                       "THU", "FRI", "SAT"};

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Upper(a[i]) != Upper(b[i])) return false;
  }
  return true;
}

Status Error(std::string_view field, std::string_view what, size_t offset) {
  std::string m(field);
  m += ": ";
  m += what;
  if (offset != std::string_view::npos) m += " (column " + std::to_string(offset + 1) + ")";
  return InvalidArgumentError(std::move(m));
}

std::string Quote(std::string_view s) {
  std::string out(s.substr(0, 32));
  if (s.size() > 32) out += "...";
  return out;
}

Status ReadValue(const FieldSpec& spec, std::string_view item, size_t& pos, size_t item_offset,
                 bool range_end, int& out) {
  const size_t begin = pos;
  auto col = [&](size_t p) {
    return item_offset == std::string_view::npos ? item_offset : item_offset + p;
  };
  if (pos < item.size() && IsDigit(item[pos])) {
    int64_t v = 0;
    while (pos < item.size() && IsDigit(item[pos])) {
      v = v * 10 + (item[pos] - '0');
      if (v > 1'000'000) {
        while (pos < item.size() && IsDigit(item[pos])) ++pos;
        return Error(spec.name,
                     Quote(item.substr(begin, pos - begin)) + " is out of range " +
                         std::to_string(spec.min) + "-" + std::to_string(spec.max),
                     col(begin));
      }
      ++pos;
    }
    if (v < spec.min || v > spec.max) {
      return Error(spec.name,
                   std::to_string(v) + " is out of range " + std::to_string(spec.min) + "-" +
                       std::to_string(spec.max),
                   col(begin));
    }
    out = static_cast<int>(v);
    return Status::Ok();
  }
  if (pos < item.size() && IsAlpha(item[pos]) &&
      (spec.kind == FieldKind::kMonth || spec.kind == FieldKind::kDayOfWeek)) {
    size_t end = pos;
    while (end < item.size() && IsAlpha(item[end])) ++end;
    // A trailing L on a day name is the "last" marker (FRIL is not a name, FRI + L is).
    std::string_view word = item.substr(pos, end - pos);
    if (spec.kind == FieldKind::kDayOfWeek && word.size() == 4 && Upper(word[3]) == 'L') {
      word = word.substr(0, 3);
    }
    const auto& names = spec.kind == FieldKind::kMonth
                            ? std::vector<std::string_view>(kMonthNames.begin(), kMonthNames.end())
                            : std::vector<std::string_view>(kDayNames.begin(), kDayNames.end());
    for (size_t i = 0; i < names.size(); ++i) {
      if (EqualsIgnoreCase(word, names[i])) {
        out = spec.kind == FieldKind::kMonth ? static_cast<int>(i) + 1 : static_cast<int>(i);
        if (spec.kind == FieldKind::kDayOfWeek && range_end && out == 0) out = 7;
        pos += word.size();
        return Status::Ok();
      }
    }
    return Error(spec.name,
                 "unknown name " + Quote(item.substr(pos, end - pos)) +
                     (spec.kind == FieldKind::kMonth ? " (use JAN-DEC)" : " (use SUN-SAT)"),
                 col(begin));
  }
  if (pos >= item.size()) return Error(spec.name, "missing value in " + Quote(item), col(pos));
  return Error(spec.name, "unexpected " + Quote(item.substr(pos)), col(pos));
}

Status ReadStep(const FieldSpec& spec, std::string_view item, size_t& pos, size_t item_offset,
                int& step) {
  auto col = [&](size_t p) {
    return item_offset == std::string_view::npos ? item_offset : item_offset + p;
  };
  const size_t begin = pos;
  if (pos >= item.size() || !IsDigit(item[pos])) {
    return Error(spec.name, "step must be a number in " + Quote(item), col(pos));
  }
  int64_t v = 0;
  while (pos < item.size() && IsDigit(item[pos])) {
    v = v * 10 + (item[pos] - '0');
    if (v > 1'000'000) {
      return Error(spec.name, "step " + Quote(item.substr(begin)) + " is too large", col(begin));
    }
    ++pos;
  }
  if (v == 0) return Error(spec.name, "step 0 is not allowed", col(begin));
  step = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace gnomon::cron
