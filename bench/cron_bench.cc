// Cron engine benchmarks. The reference in the same run is a naive search that steps one second
// (or one minute) at a time and asks Matches(): the ratio shows what field-by-field jumping buys.
#include <benchmark/benchmark.h>

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

}  // namespace

BENCHMARK_MAIN();
