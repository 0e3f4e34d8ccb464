// CivilSearch: the civil-time half of CronExpr's search (internal to src/cron). Given a parsed
// expression's field sets, it finds the first or last matching wall time in a range, field by
// field (year, month, day, hour, minute, second: each step jumps to the next allowed value,
// never second by second), and tells which days of a month match (DOM/DOW with the Vixie OR
// rule, L, LW, nW, d#n, dL). No zones and no instants: CronExpr maps wall times to instants.
//
// Thread safety: immutable; pure functions of the fields. Holds a reference to them.
#ifndef GNOMON_SRC_CRON_CIVIL_SEARCH_H_
#define GNOMON_SRC_CRON_CIVIL_SEARCH_H_

#include <cstdint>
#include <optional>

#include "gnomon/cron.h"
#include "gnomon/time.h"

namespace gnomon {

class CivilSearch {
 public:
  // REQUIRES: `fields` outlives this object.
  explicit CivilSearch(const CronExpr::Fields& fields) : f_(fields) {}

  // The days of (year, month) that match the day fields (DOM/DOW with the OR rule, year, month):
  // bit d set = day d matches.
  uint32_t DayMask(int64_t year, int month) const;
  bool DayMatches(int64_t year, int month, int day) const;
  // Whether the wall time `c` matches every field.
  bool Matches(const CivilTime& c) const;
  // The first matching civil time in [from, until) or nullopt.
  std::optional<CivilTime> Next(const CivilTime& from, const CivilTime& until) const;
  // The last matching civil time in (since, before] or nullopt.
  std::optional<CivilTime> Prev(const CivilTime& before, const CivilTime& since) const;

 private:
  const CronExpr::Fields& f_;
};

}  // namespace gnomon

#endif  // GNOMON_SRC_CRON_CIVIL_SEARCH_H_
