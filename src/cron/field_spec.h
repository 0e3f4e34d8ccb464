// FieldSpec: the fields of gnomon's cron dialect (internal to src/cron): each field's kind,
// name and range, and the lexical pieces CronParser builds on: reading one value (a number, or a
// three-letter month or day name) or step of a list item, and errors that name the field, the
// offending text and its 1-based column.
//
// Thread safety: constants and pure functions.
#ifndef GNOMON_SRC_CRON_FIELD_SPEC_H_
#define GNOMON_SRC_CRON_FIELD_SPEC_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "gnomon/cron.h"
#include "gnomon/status.h"

namespace gnomon::cron {

enum class FieldKind { kSecond, kMinute, kHour, kDayOfMonth, kMonth, kDayOfWeek, kYear };

struct FieldSpec {
  FieldKind kind;
  const char* name;
  int min;
  int max;  // day of week: 7 (= Sunday) is accepted and folded to 0
};

inline constexpr FieldSpec kSecondSpec{FieldKind::kSecond, "second", 0, 59};
inline constexpr FieldSpec kMinuteSpec{FieldKind::kMinute, "minute", 0, 59};
inline constexpr FieldSpec kHourSpec{FieldKind::kHour, "hour", 0, 23};
inline constexpr FieldSpec kDomSpec{FieldKind::kDayOfMonth, "day-of-month", 1, 31};
inline constexpr FieldSpec kMonthSpec{FieldKind::kMonth, "month", 1, 12};
inline constexpr FieldSpec kDowSpec{FieldKind::kDayOfWeek, "day-of-week", 0, 7};
inline constexpr FieldSpec kYearSpec{FieldKind::kYear, "year", CronExpr::kMinYear,
                                     CronExpr::kMaxYear};

inline char Upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// InvalidArgument "<field>: <what> (column <offset + 1>)"; no column when `offset` is npos.
Status Error(std::string_view field, std::string_view what, size_t offset);
// Quotes at most 32 characters of `s` for an error message.
std::string Quote(std::string_view s);

// Reads a value (number or, for months and days of week, a three-letter name) of list item
// `item` at `pos`, advancing `pos` past it. `item_offset` is the item's column in the input
// (npos: none, for macro expansions). `range_end` lets the name SUN mean 7 at the end of a range
// ("SAT-SUN").
Status ReadValue(const FieldSpec& spec, std::string_view item, size_t& pos, size_t item_offset,
                 bool range_end, int& out);
// Reads the step after '/' at `pos` (a number 1 to 1,000,000), advancing `pos` past it.
Status ReadStep(const FieldSpec& spec, std::string_view item, size_t& pos, size_t item_offset,
                int& step);

}  // namespace gnomon::cron

#endif  // GNOMON_SRC_CRON_FIELD_SPEC_H_
