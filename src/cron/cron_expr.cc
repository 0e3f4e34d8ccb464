// The next/previous-fire search. Civil time is searched field by field (CivilSearch,
// civil_search.h: each step jumps to the next allowed value, never second by second). Instants
// come from walking the zone's offset segments: inside one segment the offset is constant, so a
// civil match maps to exactly one instant; the DST rule is applied where segments meet.
#include <bit>
#include <cstdint>

#include "gnomon/cron.h"
#include "src/cron/civil_search.h"

namespace gnomon {
namespace {

constexpr int64_t kSearchSeconds = int64_t{CronExpr::kSearchYears} * 366 * 86400;

Instant At(int64_t unix_s) { return Instant::FromUnixSeconds(unix_s); }

// The wall time `local_s` seconds after 1970-01-01 00:00:00 (an instant plus its UTC offset).
CivilTime WallTime(int64_t local_s) { return AddSeconds(CivilTime{}, local_s); }

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

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
    const std::optional<CivilTime> first =
        CivilSearch(fields_).Next(search, AddSeconds(c0, limit - t + 2 * 86400));
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
    while (std::optional<CivilTime> c = CivilSearch(fields_).Next(from, c_end)) {
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
    if (fixed_time_ && tr->to > tr->from && CivilSearch(fields_).Next(tr->from, tr->to))
      return tr->at;
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
      CivilSearch(fields_).Next(WallTime(t + seg.utc_offset_s), WallTime(end + seg.utc_offset_s));
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
        CivilSearch(fields_).Prev(search, AddSeconds(top, -(t - limit) - 2 * 86400));
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
    while (std::optional<CivilTime> c = CivilSearch(fields_).Prev(from, since)) {
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
    if (fixed_time_ && tr->to > tr->from && CivilSearch(fields_).Next(tr->from, tr->to))
      return tr->at;
    t = tr->at.unix_seconds() - 1;
  }
  return std::nullopt;
}

bool CronExpr::Matches(Instant t) const {
  if (t.unix_millis() % 1000 != 0) return false;
  if (every_s_ > 0) return t.unix_seconds() % every_s_ == 0;
  const CivilTime c = zone_.ToCivil(t);
  if (CivilSearch(fields_).Matches(c)) {
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
  return CivilSearch(fields_)
      .Next(WallTime(t.unix_seconds() + before), WallTime(t.unix_seconds() + after))
      .has_value();
}

}  // namespace gnomon
