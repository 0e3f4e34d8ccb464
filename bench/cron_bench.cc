// Cron engine benchmarks. The reference in the same run is a naive search that steps one second
// (or one minute) at a time and asks Matches(): the ratio shows what field-by-field jumping buys.
// The BM_Starts/* cases are the robfig/cron comparison (bench/robfig/main.go times robfig's
// Schedule.Next on the same cases and start instants; bench/cron_vs_robfig.py prints the ratios).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "gnomon/cron.h"

namespace {

using gnomon::CronExpr;
using gnomon::CronOptions;
using gnomon::Instant;
using gnomon::TimeZone;

const Instant kFrom = Instant::FromUnixSeconds(1741500000);  // 2025-03-09T06:00:00Z

CronExpr Parse(const char* text, const char* zone = "UTC") {
  return *CronExpr::Parse(text, CronOptions{*TimeZone::Load(zone), "bench-job"});
}

void BM_Parse(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(CronExpr::Parse("0 0-59/5 9-17 ? JAN-JUN MON-FRI", CronOptions{}));
  }
}
BENCHMARK(BM_Parse);

void NextLoop(benchmark::State& state, const CronExpr& e) {
  Instant t = kFrom;
  for (auto _ : state) {
    const std::optional<Instant> n = e.Next(t);
    t = n ? *n : kFrom;
    benchmark::DoNotOptimize(t);
  }
}

void BM_NextEveryMinuteUtc(benchmark::State& state) { NextLoop(state, Parse("* * * * *")); }
BENCHMARK(BM_NextEveryMinuteUtc);

void BM_NextDailyNewYork(benchmark::State& state) {
  NextLoop(state, Parse("30 2 * * *", "America/New_York"));
}
BENCHMARK(BM_NextDailyNewYork);

void BM_NextMonthEndWeekdayBerlin(benchmark::State& state) {
  NextLoop(state, Parse("0 0 18 LW * *", "Europe/Berlin"));
}
BENCHMARK(BM_NextMonthEndWeekdayBerlin);

void BM_NextLeapDay(benchmark::State& state) { NextLoop(state, Parse("0 0 12 29 2 *")); }
BENCHMARK(BM_NextLeapDay);

void BM_NextNeverFires(benchmark::State& state) {
  const CronExpr e = Parse("0 0 30 2 *", "America/New_York");
  for (auto _ : state) benchmark::DoNotOptimize(e.Next(kFrom));
}
BENCHMARK(BM_NextNeverFires);

// Reference: step a minute at a time until Matches() (what a naive scheduler does).
void BM_ReferenceMinuteScanDailyNewYork(benchmark::State& state) {
  const CronExpr e = Parse("30 2 * * *", "America/New_York");
  Instant t = kFrom;
  for (auto _ : state) {
    Instant x = Instant::FromUnixSeconds((t.unix_seconds() / 60 + 1) * 60);
    while (!e.Matches(x)) x += std::chrono::minutes(1);
    t = x;
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_ReferenceMinuteScanDailyNewYork);

// The 1,000 start instants of the robfig comparison: whole seconds, uniform over 2025-2030, from
// splitmix64 seeded with 1 (bench/robfig/main.go generates the same ones).
std::vector<Instant> StartInstants() {
  constexpr int64_t kBase = 1735689600;     // 2025-01-01T00:00:00Z
  constexpr uint64_t kSpan = 2191 * 86400;  // six years, 2028's leap day included
  std::vector<Instant> starts;
  uint64_t state = 1;
  for (int i = 0; i < 1000; ++i) {
    state += 0x9e3779b97f4a7c15;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    z ^= z >> 31;
    starts.push_back(Instant::FromUnixSeconds(kBase + static_cast<int64_t>(z % kSpan)));
  }
  return starts;
}

// One `Next` per iteration, cycling through the start instants.
void NextFromStarts(benchmark::State& state, const char* text, const char* zone) {
  const CronExpr e = Parse(text, zone);
  const std::vector<Instant> starts = StartInstants();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(e.Next(starts[i]));
    if (++i == starts.size()) i = 0;
  }
}
// Name, expression, zone: the same in bench/robfig/main.go. The first five are the comparison's
// target cases (docs/benchmarks.md "Cron search"); the sixth is the weekday one in a DST zone.
BENCHMARK_CAPTURE(NextFromStarts, every_5_minutes, "0 */5 * * * *", "UTC")
    ->Name("BM_Starts/every_5_minutes");
BENCHMARK_CAPTURE(NextFromStarts, quarter_hours_weekdays, "*/15 9-17 * * 1-5", "UTC")
    ->Name("BM_Starts/quarter_hours_weekdays");
BENCHMARK_CAPTURE(NextFromStarts, monthly, "0 0 9 1 * *", "Europe/Berlin")
    ->Name("BM_Starts/monthly");
BENCHMARK_CAPTURE(NextFromStarts, leap_day, "0 0 12 29 2 *", "UTC")->Name("BM_Starts/leap_day");
BENCHMARK_CAPTURE(NextFromStarts, new_york_dst, "30 2 * * *", "America/New_York")
    ->Name("BM_Starts/new_york_dst");
BENCHMARK_CAPTURE(NextFromStarts, quarter_hours_weekdays_new_york, "*/15 9-17 * * 1-5",
                  "America/New_York")
    ->Name("BM_Starts/quarter_hours_weekdays_new_york");

}  // namespace

BENCHMARK_MAIN();
