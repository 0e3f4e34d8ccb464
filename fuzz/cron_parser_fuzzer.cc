// Fuzzes CronExpr::Parse and, for what parses, Next/Prev/Matches/Describe. Aborts (a finding)
// when one input takes more than GNOMON_FUZZ_BUDGET_MS (default 10 ms) of CPU time.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "gnomon/cron.h"

namespace {

const gnomon::TimeZone* g_zones[3];
int64_t g_budget_ms = 10;

// CPU time of this thread: a time slice lost to another process is not the parser's cost.
int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Load the zones up front: the first load reads the tz database and is not the parser's cost.
  g_zones[0] = new gnomon::TimeZone();
  g_zones[1] = new gnomon::TimeZone(*gnomon::TimeZone::Load("America/New_York"));
  g_zones[2] = new gnomon::TimeZone(*gnomon::TimeZone::Load("Australia/Lord_Howe"));
  for (const char* name : {"Europe/Berlin", "Asia/Shanghai", "America/Sao_Paulo"}) {
    (void)gnomon::TimeZone::Load(name);
  }
  if (const char* b = std::getenv("GNOMON_FUZZ_BUDGET_MS")) g_budget_ms = std::atoll(b);
  return 0;
}

namespace {

// Runs one input; returns the thread CPU time it took, in ms.
int64_t RunOne(std::string_view text) {
  const int64_t start_ns = ThreadCpuNanos();
  const gnomon::TimeZone& zone = *g_zones[text.size() % 3];
  gnomon::Result<gnomon::CronExpr> expr =
      gnomon::CronExpr::Parse(text, gnomon::CronOptions{zone, "fuzz-job"});
  if (expr.ok()) {
    gnomon::Instant t =
        gnomon::Instant::FromUnixSeconds(1741500000 + static_cast<int64_t>(text.size()) * 7919);
    for (int i = 0; i < 3; ++i) {
      std::optional<gnomon::Instant> next = expr->Next(t);
      if (!next) break;
      if (*next <= t || !expr->Matches(*next)) std::abort();
      t = *next;
    }
    std::optional<gnomon::Instant> prev = expr->Prev(t);
    if (prev && *prev >= t) std::abort();
    (void)expr->Describe();
  }
  return (ThreadCpuNanos() - start_ns) / 1'000'000;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A slow run is repeated once: a real slow input is slow every time, while the allocator
  // returning memory to the OS (ASan) can make any single run slow.
  if (RunOne(text) > g_budget_ms) {
    const int64_t again_ms = RunOne(text);
    if (again_ms > g_budget_ms) {
      std::fprintf(stderr, "slow input: %lld ms of CPU (budget %lld ms): \"%.*s\"\n",
                   static_cast<long long>(again_ms), static_cast<long long>(g_budget_ms),
                   static_cast<int>(size < 200 ? size : 200), text.data());
      std::abort();
    }
  }
  return 0;
}
