// fleet_load: one node's side of the backend benchmarks (bench/backend_bench.py runs three of
// these at once against one backend; docs/benchmarks.md "Backends: throughput, lateness,
// failover").
//
//   fleet_load claims   --backend URL [--threads 4] [--seconds 10] [--jobs 1000] [--node n1]
//                        [--tag run1]
//   fleet_load lateness --backend URL [--jobs 1000] [--seconds 20] [--node n1] [--workers 16]
//   fleet_load scale    --backend URL [--jobs N] [--per-second K] [--seconds S] [--node n1]
//                        [--kinds 10s,1m,5m,1h,1d] [--measure-at UNIX_S] [--drain 10]
//   fleet_load output   --backend URL --op pair|1k|64k [--count 2000] [--tag run1]
//
// Backend URLs: those of `gnomon serve --backend` (src/server/backend.h): redis://host:port[/db],
// rediss://..., redis+cluster://h1:p1[,h2:p2...] (every Redis primary must run with appendonly
// yes: Open refuses otherwise), etcd://host:port[,host:port...][/prefix], sqlite:///abs/path.
//
// claims: each of --threads threads opens its OWN coordinator (the Redis coordinator serialises
// its calls on one connection, and SQLite on one connection per coordinator, so one per thread
// is what several nodes would do; etcd pools connections either way) and loops Claim + Report
// (final, succeeded) as fast as it can for --seconds. Fires are distinct per operation: job
// "<tag>-j<k % jobs>" at a past instant (a fixed day-aligned base minus a counter unique to
// (node, thread, iteration)), lease 30 s, overlap allow. Prints one JSON line: ops (claim +
// completion pairs), errors, seconds, cpu_s (getrusage user + sys of the whole process).
//
// lateness: one gnomon::Scheduler (default options but --workers) with --jobs in-process jobs
// "late-<k>" firing every second (`* * * * * *`, overlap allow), whose handler records
// start - scheduled (wall clock) and returns OK at once. Runs for --seconds, stops gracefully,
// writes one line "<scheduled unix ms> <lateness us>" per run to --samples (if given) and prints
// one JSON line: runs, p50_ms, p99_ms, max_ms, seconds, cpu_s.
//
// output: one coordinator, one thread, --count operations of one kind, timed (steady clock):
// `pair` = Claim + final Report of a distinct past fire (the reference: what every fire costs),
// `1k` / `64k` = SaveLiveOutput of 1 KiB / 64 KiB (the most a tail holds) into one held claim.
// Prints one JSON line: op, count, seconds, us_per_op, cpu_s (bench/live_output_bench.py runs
// it and reads the server's CPU around it).
//
// Exit status 0 on success, 1 on a setup error (with the message on stderr).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/cron.h"
#include "gnomon/in_process_executor.h"
#include "gnomon/job.h"
#include "gnomon/redis_coordinator.h"
#include "gnomon/scheduler.h"
#include "gnomon/status.h"
#include "gnomon/time.h"
#include "src/coord/redis/redis_scripts.h"
#include "src/server/backend.h"

namespace {

using gnomon::Coordinator;
using gnomon::Duration;
using gnomon::Instant;
using gnomon::Result;
using gnomon::Status;

struct Flags {
  std::string mode;
  std::string backend;
  std::string node = "n1";
  std::string tag = "run";
  std::string samples;
  int threads = 4;
  int jobs = 1000;
  int workers = 16;
  int per_second = 1000;  // scale: jobs firing every second (the rest: every 10 s .. daily)
  std::string kinds = "10s,1m,5m,1h,1d";  // scale: the schedules the rest is spread over
  double measure_at = 0;  // scale: unix seconds when the measurement starts (0 = after warm-up)
  double drain = 10;      // scale: seconds after the window that its fires may still run in
  double seconds = 10;
  std::string op = "pair";  // output: pair, 1k or 64k
  int64_t count = 2000;     // output: operations
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// The backend of `url`, opened as `gnomon serve` opens it (src/server/backend.h).
Result<std::unique_ptr<Coordinator>> OpenBackend(const std::string& url) {
  Result<gnomon::server::OpenedBackend> opened =
      gnomon::server::OpenBackend(url, /*allow_unsafe=*/false);
  if (!opened.ok()) return opened.status();
  return std::move(opened->coordinator);
}

// Waits `d` of monotonic time on the system clock (the Clock owns waiting: docs/architecture.md
// rule 2).
void WaitFor(Duration d) {
  std::mutex mu;
  std::condition_variable never;
  std::unique_lock<std::mutex> lock(mu);
  gnomon::SystemClock::Get().WaitFor(lock, never, d, [] { return false; });
}

Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// ------------------------------------------------------------------------------- claims --

struct ClaimsResult {
  int64_t ops = 0;
  int64_t errors = 0;
  std::string first_error;
};

// One thread's loop: Claim + Report(final) of distinct past fires until `stop`.
void ClaimLoop(Coordinator& coord, const Flags& f, int writer, int writers,
               const std::atomic<bool>& stop, ClaimsResult& out) {
  // A day-aligned base one day back: the same in every process of a run, far in the past.
  const int64_t now_ms = gnomon::SystemClock::Get().Now().unix_millis();
  const int64_t base_ms = now_ms - now_ms % 86'400'000 - 86'400'000;
  for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
    const int64_t seq = i * writers + writer;
    gnomon::ClaimRequest req;
    req.fire.job_id = f.tag + "-j" + std::to_string(seq % f.jobs);
    req.fire.scheduled_at = Instant::FromUnixMillis(base_ms - seq);
    req.node_id = f.node;
    req.overlap = gnomon::OverlapPolicy::kAllow;
    Result<gnomon::ClaimOutcome> claimed = coord.Claim(req);
    Status s = claimed.ok() ? Status::Ok() : claimed.status();
    if (s.ok() && claimed->result != gnomon::ClaimOutcome::Result::kClaimed) {
      s = gnomon::InternalError("claim of " + req.fire.RunId() + " was refused");
    }
    if (s.ok()) {
      const gnomon::Claim& c = *claimed->claim;
      gnomon::RunRecord r;
      r.run_id = req.fire.RunId();
      r.job_id = req.fire.job_id;
      r.scheduled_at = req.fire.scheduled_at;
      r.attempt = c.attempt;
      r.fencing_token = c.fencing_token;
      r.node_id = f.node;
      r.started_at = claimed->backend_now;
      r.finished_at = claimed->backend_now;
      r.outcome = gnomon::RunOutcome::kSucceeded;
      r.exit_code = 0;
      s = coord.Report(c, r, /*final=*/true);
    }
    if (s.ok()) {
      ++out.ops;
    } else {
      if (out.errors++ == 0) out.first_error = s.ToString();
    }
  }
}

int RunClaims(const Flags& f) {
  std::vector<std::unique_ptr<Coordinator>> coords;
  for (int t = 0; t < f.threads; ++t) {
    Result<std::unique_ptr<Coordinator>> c = OpenBackend(f.backend);
    if (!c.ok()) {
      std::cerr << "fleet_load: " << c.status().ToString() << "\n";
      return 1;
    }
    coords.push_back(std::move(*c));
  }
  // Writers are numbered across the three processes by the node's trailing digit, so fires
  // stay distinct between processes too.
  int node_index = 0;
  if (!f.node.empty()) {
    std::from_chars(f.node.data() + f.node.size() - 1, f.node.data() + f.node.size(), node_index);
  }
  const int writers = f.threads * 10;
  std::atomic<bool> stop{false};
  std::vector<ClaimsResult> results(f.threads);
  const double cpu0 = CpuSeconds();
  const Duration start = gnomon::SystemClock::Get().SteadyNow();
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < f.threads; ++t) {
      threads.emplace_back([&, t] {
        ClaimLoop(*coords[t], f, node_index * f.threads + t, writers, stop, results[t]);
      });
    }
    WaitFor(Seconds(f.seconds));
    stop = true;
  }
  const double elapsed =
      std::chrono::duration<double>(gnomon::SystemClock::Get().SteadyNow() - start).count();
  const double cpu = CpuSeconds() - cpu0;
  ClaimsResult total;
  for (const ClaimsResult& r : results) {
    total.ops += r.ops;
    total.errors += r.errors;
    if (total.first_error.empty()) total.first_error = r.first_error;
  }
  if (!total.first_error.empty()) std::cerr << "fleet_load: " << total.first_error << "\n";
  std::printf(
      "{\"mode\":\"claims\",\"node\":\"%s\",\"threads\":%d,\"ops\":%lld,\"errors\":%lld,"
      "\"seconds\":%.3f,\"cpu_s\":%.3f}\n",
      f.node.c_str(), f.threads, static_cast<long long>(total.ops),
      static_cast<long long>(total.errors), elapsed, cpu);
  return 0;
}

// ----------------------------------------------------------------------------- lateness --

struct Sample {
  int64_t scheduled_ms;
  int64_t lateness_us;
};

int RunLateness(const Flags& f) {
  Result<std::unique_ptr<Coordinator>> coord = OpenBackend(f.backend);
  if (!coord.ok()) {
    std::cerr << "fleet_load: " << coord.status().ToString() << "\n";
    return 1;
  }
  gnomon::SystemClock& clock = gnomon::SystemClock::Get();
  std::mutex mu;
  std::vector<Sample> samples;  // guarded by mu
  samples.reserve(static_cast<size_t>(f.jobs * (f.seconds + 2)));
  gnomon::InProcessExecutor executor;
  gnomon::SchedulerOptions options;
  options.node_id = f.node;
  options.worker_threads = f.workers;
  options.shutdown_grace = std::chrono::seconds(5);
  gnomon::Scheduler scheduler(options, **coord, executor, clock);
  for (int k = 0; k < f.jobs; ++k) {
    char id[32];
    std::snprintf(id, sizeof id, "late-%04d", k);
    gnomon::JobSpec job;
    job.id = id;
    job.schedule = "* * * * * *";
    job.overlap = gnomon::OverlapPolicy::kAllow;
    job.in_process = true;
    Status s = executor.Register(id, [&](const gnomon::RunContext& ctx) {
      // Microseconds from the wall clock itself: Instant has millisecond resolution, too coarse
      // for a p50 of a few milliseconds.
      const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      const int64_t scheduled_ms = ctx.scheduled_at.unix_millis();
      const Sample one{scheduled_ms, now_us - scheduled_ms * 1000};
      std::lock_guard<std::mutex> lock(mu);
      samples.push_back(one);
      return Status::Ok();
    });
    if (s.ok()) s = scheduler.AddJob(job);
    if (!s.ok()) {
      std::cerr << "fleet_load: " << s.ToString() << "\n";
      return 1;
    }
  }
  const double cpu0 = CpuSeconds();
  if (Status s = scheduler.Start(); !s.ok()) {
    std::cerr << "fleet_load: " << s.ToString() << "\n";
    return 1;
  }
  WaitFor(Seconds(f.seconds));
  scheduler.Stop();
  const double cpu = CpuSeconds() - cpu0;
  std::vector<Sample> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    all = samples;
  }
  if (!f.samples.empty()) {
    std::ofstream out(f.samples);
    for (const Sample& s : all) out << s.scheduled_ms << ' ' << s.lateness_us << '\n';
    if (!out) {
      std::cerr << "fleet_load: cannot write " << f.samples << "\n";
      return 1;
    }
  }
  std::vector<int64_t> late;
  late.reserve(all.size());
  for (const Sample& s : all) late.push_back(s.lateness_us);
  std::sort(late.begin(), late.end());
  auto pct = [&](double p) {
    if (late.empty()) return 0.0;
    const size_t i = std::min(late.size() - 1, static_cast<size_t>(p * late.size()));
    return late[i] / 1000.0;
  };
  std::printf(
      "{\"mode\":\"lateness\",\"node\":\"%s\",\"runs\":%zu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
      "\"max_ms\":%.3f,\"seconds\":%.3f,\"cpu_s\":%.3f}\n",
      f.node.c_str(), late.size(), pct(0.5), pct(0.99), late.empty() ? 0.0 : late.back() / 1000.0,
      f.seconds, cpu);
  return 0;
}

// --------------------------------------------------------------------------------- scale --

// Resident memory of this process (VmRSS), in MiB.
double RssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

// Counts claim attempts (claimed + lost to another node) and the runs of this node, errors and
// lost-run resolutions; the first errors go to stderr with their time (unix ms).
class CountingObserver final : public gnomon::Observer {
 public:
  void OnEvent(const gnomon::SchedulerEvent& e) override {
    using K = gnomon::SchedulerEvent::Kind;
    if (e.kind == K::kClaimed) ++claimed;
    if (e.kind == K::kClaimed && e.catch_up) ++catch_ups;
    if (e.kind == K::kClaimLost) ++lost;
    if (e.kind == K::kSkipped) ++skipped;
    if (e.kind == K::kLostRun) ++lost_runs;
    const int64_t at = e.scheduled_at.unix_millis();
    if (e.kind == K::kError && at >= win0 && at < win1) ++window_errors;
    if (e.kind == K::kError && errors++ < 20) {
      std::fprintf(stderr, "fleet_load: error at %lld: %s %lld: %s\n",
                   static_cast<long long>(e.at.unix_millis()), e.job_id.c_str(),
                   static_cast<long long>(e.scheduled_at.unix_millis()), e.detail.c_str());
    }
  }
  std::atomic<int64_t> claimed{0}, lost{0}, skipped{0}, catch_ups{0}, lost_runs{0}, errors{0};
  std::atomic<int64_t> window_errors{0};  // errors of fires scheduled in [win0, win1)
  int64_t win0 = 0, win1 = 0;             // unix ms; set before the scheduler starts
};

// scale: --jobs in-process jobs on one node, --per-second of them every second and the rest
// spread over every 10 s, every minute, every 5 minutes, hourly and daily (seconds spread by
// H-like offsets so they do not all fire at :00). The window is the --seconds after --measure-at
// (rounded up to a whole second), in scheduled instants. Prints: the fires the whole job set
// schedules in it (counted from the schedules), how many of them this node ran by the window's
// end + --drain, their lateness percentiles (a reservoir of samples), all runs and claim attempts
// during the window (wall clock; catch_ups: the claims that were missed fires' catch-ups), CPU
// and resident memory after loading and at the end, and the worst lateness of each scheduled
// second of the window.
int RunScale(const Flags& f) {
  Result<std::unique_ptr<Coordinator>> coord = OpenBackend(f.backend);
  if (!coord.ok()) {
    std::cerr << "fleet_load: " << coord.status().ToString() << "\n";
    return 1;
  }
  gnomon::SystemClock& clock = gnomon::SystemClock::Get();
  std::mutex mu;
  std::vector<int64_t> reservoir;        // lateness us of the window's fires; guarded by mu
  int64_t runs = 0;                      // every run; guarded by mu
  int64_t window_runs = 0;               // runs of fires scheduled in the window; guarded by mu
  std::vector<int64_t> worst_by_second;  // per scheduled second of the window; guarded by mu
  int64_t very_late = 0, very_late_retries = 0;  // window runs over 5 s late; guarded by mu
  // The measured window, as scheduled instants [win0, win1) in unix ms (whole seconds): set
  // before the scheduler starts, read-only after.
  double measure_at = f.measure_at;
  if (measure_at <= 0) {
    measure_at =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() +
        std::min(10.0, f.seconds / 3);
  }
  const int64_t win0 = static_cast<int64_t>(std::ceil(measure_at)) * 1000;
  const int64_t win1 = win0 + static_cast<int64_t>(f.seconds * 1000);
  worst_by_second.assign(static_cast<size_t>((win1 - win0 + 999) / 1000), 0);
  std::mt19937_64 rng(42);
  constexpr size_t kReservoir = 200000;
  gnomon::InProcessExecutor executor;
  CountingObserver counts;
  gnomon::SchedulerOptions options;
  options.node_id = f.node;
  options.worker_threads = f.workers;
  options.shutdown_grace = std::chrono::seconds(5);
  counts.win0 = win0;
  counts.win1 = win1;
  options.observer = &counts;
  gnomon::Scheduler scheduler(options, **coord, executor, clock);
  const double rss0 = RssMib();
  auto handler = [&](const gnomon::RunContext& ctx) {
    const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t at = ctx.scheduled_at.unix_millis();
    const int64_t late = now_us - at * 1000;
    std::lock_guard<std::mutex> lock(mu);
    ++runs;
    if (at < win0 || at >= win1) return Status::Ok();
    ++window_runs;
    int64_t& worst = worst_by_second[static_cast<size_t>((at - win0) / 1000)];
    worst = std::max(worst, late);
    if (late > 5'000'000) {
      ++very_late;
      if (ctx.attempt > 1) ++very_late_retries;
      if (very_late <= 10) {
        std::fprintf(stderr, "fleet_load: run %lld ms late: %s %lld attempt %d token %lld\n",
                     static_cast<long long>(late / 1000), ctx.job_id.c_str(),
                     static_cast<long long>(at), ctx.attempt,
                     static_cast<long long>(ctx.fencing_token));
      }
    }
    if (reservoir.size() < kReservoir) {
      reservoir.push_back(late);
    } else if (const uint64_t k = rng() % static_cast<uint64_t>(window_runs); k < kReservoir) {
      reservoir[k] = late;
    }
    return Status::Ok();
  };
  // The minute of an every-5-minutes job is its offset in 0-4 ("%d/5"), so it fires 12 times an
  // hour whatever the offset.
  const char* kSlow[] = {"%d/10 * * * * *", "%d * * * * *", "%d %d/5 * * * *", "%d %d * * * *",
                         "%d %d 3 * * *"};
  const char* kKindNames[] = {"10s", "1m", "5m", "1h", "1d"};
  std::vector<int> kinds;  // indexes into kSlow, from --kinds
  for (size_t at = 0; at <= f.kinds.size();) {
    const size_t comma = std::min(f.kinds.find(',', at), f.kinds.size());
    const std::string name = f.kinds.substr(at, comma - at);
    const auto known = std::find(std::begin(kKindNames), std::end(kKindNames), name);
    if (known == std::end(kKindNames)) {
      std::cerr << "fleet_load: --kinds: unknown kind \"" << name << "\" (10s 1m 5m 1h 1d)\n";
      return 1;
    }
    kinds.push_back(static_cast<int>(known - std::begin(kKindNames)));
    at = comma + 1;
  }
  const int n_kinds = static_cast<int>(kinds.size());
  // One dispatching handler for every job (as an embedder with a million jobs would have), not a
  // registration per job.
  executor.SetFallback(handler);
  const double t0 = gnomon::SystemClock::Get().SteadyNow().count() / 1000.0;
  std::map<std::string, int64_t> jobs_per_schedule;
  for (int k = 0; k < f.jobs; ++k) {
    char id[32];
    std::snprintf(id, sizeof id, "s-%07d", k);
    gnomon::JobSpec job;
    job.id = id;
    char sched[64];
    if (k < f.per_second) {
      std::snprintf(sched, sizeof sched, "* * * * * *");
    } else {
      const int kind = kinds[k % n_kinds];
      const int sec = (k / n_kinds) % (kind == 0 ? 10 : 60),
                min = (k / (60 * n_kinds)) % (kind == 2 ? 5 : 60);
      std::snprintf(sched, sizeof sched, kSlow[kind], sec, min);
    }
    job.schedule = sched;
    ++jobs_per_schedule[job.schedule];
    job.overlap = gnomon::OverlapPolicy::kAllow;
    job.in_process = true;
    job.history_keep = 10;
    Status s = scheduler.AddJob(job);
    if (!s.ok()) {
      std::cerr << "fleet_load: " << s.ToString() << "\n";
      return 1;
    }
  }
  const double load_s = gnomon::SystemClock::Get().SteadyNow().count() / 1000.0 - t0;
  const double rss_loaded = RssMib();
  // The fires every node's job set schedules in the window: the reference that runs are
  // counted against (each fire runs on one node).
  int64_t scheduled = 0;
  for (const auto& [text, n] : jobs_per_schedule) {
    Result<gnomon::CronExpr> expr = gnomon::CronExpr::Parse(text);
    if (!expr.ok()) {
      std::cerr << "fleet_load: " << expr.status().ToString() << "\n";
      return 1;
    }
    for (std::optional<Instant> at = expr->Next(Instant::FromUnixMillis(win0 - 1));
         at && at->unix_millis() < win1; at = expr->Next(*at)) {
      scheduled += n;
    }
  }
  if (Status s = scheduler.Start(); !s.ok()) {
    std::cerr << "fleet_load: " << s.ToString() << "\n";
    return 1;
  }
  // Warm-up (ownership settles once every node has read the others' heartbeats), then the
  // window; with --measure-at every node measures the same one.
  auto wait_until_ms = [](int64_t unix_ms) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    if (unix_ms > now_ms) WaitFor(Seconds((unix_ms - now_ms) / 1000.0));
  };
  wait_until_ms(win0);
  int64_t runs0 = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    runs0 = runs;
  }
  const int64_t claimed0 = counts.claimed, lost0 = counts.lost, catch_ups0 = counts.catch_ups;
  const double cpu0 = CpuSeconds();
  wait_until_ms(win1);
  const double cpu = CpuSeconds() - cpu0;
  int64_t runs1 = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    runs1 = runs;
  }
  const int64_t claimed = counts.claimed - claimed0, lost = counts.lost - lost0,
                catch_ups = counts.catch_ups - catch_ups0;
  // The window's last fires get --drain seconds to run; one still waiting then counts as not run.
  wait_until_ms(win1 + static_cast<int64_t>(f.drain * 1000));
  int64_t ran = 0;
  std::vector<int64_t> late, worst;
  int64_t over_5s = 0, over_5s_retries = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    ran = window_runs;
    late = reservoir;
    worst = worst_by_second;
    over_5s = very_late;
    over_5s_retries = very_late_retries;
  }
  const double rss = RssMib();
  scheduler.Stop();
  std::sort(late.begin(), late.end());
  auto pct = [&](double p) {
    if (late.empty()) return 0.0;
    return late[std::min(late.size() - 1, static_cast<size_t>(p * late.size()))] / 1000.0;
  };
  // The worst lateness of each scheduled second of the window, in ms: lines up with the Redis
  // server's own events (scale_bench samples its AOF rewrites).
  std::string worst_list;
  for (size_t i = 0; i < worst.size(); ++i) {
    worst_list += (i ? "," : "") + std::to_string(worst[i] / 1000);
  }
  std::printf(
      "{\"mode\":\"scale\",\"node\":\"%s\",\"jobs\":%d,\"per_second\":%d,\"runs\":%lld,"
      "\"claimed\":%lld,\"catch_ups\":%lld,\"claim_lost\":%lld,\"seconds\":%.3f,\"cpu_s\":%.3f,"
      "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"load_s\":%.3f,\"rss_start_mib\":%.1f,"
      "\"rss_loaded_mib\":%.1f,\"rss_mib\":%.1f,\"scheduled\":%lld,\"window_runs\":%lld,"
      "\"drain_s\":%.3f,\"worst_ms_by_second\":[%s],\"over_5s\":%lld,"
      "\"over_5s_retries\":%lld,\"errors\":%lld,\"window_errors\":%lld,\"lost_runs\":%lld,"
      "\"window_start_ms\":%lld}\n",
      f.node.c_str(), f.jobs, f.per_second, static_cast<long long>(runs1 - runs0),
      static_cast<long long>(claimed), static_cast<long long>(catch_ups),
      static_cast<long long>(lost), f.seconds, cpu, pct(0.5), pct(0.99),
      late.empty() ? 0.0 : late.back() / 1000.0, load_s, rss0, rss_loaded, rss,
      static_cast<long long>(scheduled), static_cast<long long>(ran), f.drain, worst_list.c_str(),
      static_cast<long long>(over_5s), static_cast<long long>(over_5s_retries),
      static_cast<long long>(counts.errors.load()),
      static_cast<long long>(counts.window_errors.load()),
      static_cast<long long>(counts.lost_runs.load()), static_cast<long long>(win0));
  return 0;
}

int Usage() {
  std::cerr
      << "usage: fleet_load claims|lateness|scale --backend URL [--threads T] "
         "[--seconds S] [--jobs J] [--node N] [--tag T] [--workers W] [--samples PATH]\n"
         "       fleet_load scripts DIR   (writes the Redis claim, report and prune scripts)\n";
  return 1;
}

// scripts DIR: the Redis claim, report and prune batch scripts, as RedisCoordinator loads them,
// for bench/redis_script_cost.py.
int WriteScripts(const std::string& dir) {
  namespace rs = gnomon::coord::redis_scripts;
  for (const auto& [name, id] :
       {std::pair{"claim_many.lua", rs::kClaimMany}, std::pair{"report_many.lua", rs::kReportMany},
        std::pair{"prune_many.lua", rs::kPruneMany}}) {
    std::ofstream out(dir + "/" + name);
    out << rs::Source(id);
    if (!out) {
      std::cerr << "fleet_load: cannot write " << dir << "/" << name << "\n";
      return 1;
    }
  }
  return 0;
}

// ------------------------------------------------------------------------------- output --

int RunOutput(const Flags& f) {
  Result<std::unique_ptr<Coordinator>> opened = OpenBackend(f.backend);
  if (!opened.ok()) {
    std::cerr << "fleet_load: " << opened.status().ToString() << "\n";
    return 1;
  }
  Coordinator& coord = **opened;
  const int64_t now_ms = gnomon::SystemClock::Get().Now().unix_millis();
  const int64_t base_ms = now_ms - now_ms % 86'400'000 - 86'400'000;
  auto claim = [&](int64_t seq) -> Result<gnomon::ClaimOutcome> {
    gnomon::ClaimRequest req;
    req.fire.job_id = f.tag + "-j" + std::to_string(seq % f.jobs);
    req.fire.scheduled_at = Instant::FromUnixMillis(base_ms - seq);
    req.node_id = f.node;
    req.lease_ttl = std::chrono::minutes(10);
    req.overlap = gnomon::OverlapPolicy::kAllow;
    Result<gnomon::ClaimOutcome> out = coord.Claim(req);
    if (out.ok() && out->result != gnomon::ClaimOutcome::Result::kClaimed) {
      return gnomon::InternalError("claim of " + req.fire.RunId() + " was refused");
    }
    return out;
  };
  std::string text;
  std::optional<gnomon::Claim> held;
  if (f.op != "pair") {
    text.assign(f.op == "64k" ? gnomon::kMaxOutputBytes : 1024, 'o');
    Result<gnomon::ClaimOutcome> c = claim(f.count);  // a fire no pair uses
    if (!c.ok()) {
      std::cerr << "fleet_load: " << c.status().ToString() << "\n";
      return 1;
    }
    held = *c->claim;
  }
  const double cpu0 = CpuSeconds();
  const Duration t0 = gnomon::SystemClock::Get().SteadyNow();
  for (int64_t i = 0; i < f.count; ++i) {
    Status s;
    if (held) {
      text[static_cast<size_t>(i) % text.size()] = static_cast<char>('a' + i % 26);
      s = coord.SaveLiveOutput(*held, text);
    } else if (Result<gnomon::ClaimOutcome> c = claim(i); c.ok()) {
      gnomon::RunRecord r;
      r.run_id = c->claim->fire.RunId();
      r.job_id = c->claim->fire.job_id;
      r.scheduled_at = c->claim->fire.scheduled_at;
      r.attempt = c->claim->attempt;
      r.fencing_token = c->claim->fencing_token;
      r.node_id = f.node;
      r.started_at = c->backend_now;
      r.finished_at = c->backend_now;
      r.outcome = gnomon::RunOutcome::kSucceeded;
      s = coord.Report(*c->claim, r, /*final=*/true);
    } else {
      s = c.status();
    }
    if (!s.ok()) {
      std::cerr << "fleet_load: " << s.ToString() << "\n";
      return 1;
    }
  }
  const double secs =
      std::chrono::duration<double>(gnomon::SystemClock::Get().SteadyNow() - t0).count();
  std::printf(
      "{\"op\": \"%s\", \"count\": %lld, \"seconds\": %.3f, \"us_per_op\": %.1f, "
      "\"cpu_s\": %.3f}\n",
      f.op.c_str(), static_cast<long long>(f.count), secs, secs * 1e6 / f.count,
      CpuSeconds() - cpu0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  if (std::string_view(argv[1]) == "scripts") return argc == 3 ? WriteScripts(argv[2]) : Usage();
  Flags f;
  f.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--backend") {
      f.backend = value;
    } else if (flag == "--node") {
      f.node = value;
    } else if (flag == "--tag") {
      f.tag = value;
    } else if (flag == "--samples") {
      f.samples = value;
    } else if (flag == "--threads") {
      f.threads = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--jobs") {
      f.jobs = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--measure-at") {
      f.measure_at = std::atof(value.c_str());
    } else if (flag == "--drain") {
      f.drain = std::atof(value.c_str());
    } else if (flag == "--op") {
      f.op = value;
    } else if (flag == "--count") {
      f.count = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--kinds") {
      f.kinds = value;
    } else if (flag == "--per-second") {
      f.per_second = std::max(0, std::atoi(value.c_str()));
    } else if (flag == "--workers") {
      f.workers = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--seconds") {
      f.seconds = std::max(0.1, std::atof(value.c_str()));
    } else {
      return Usage();
    }
  }
  if (f.backend.empty()) return Usage();
  if (f.mode == "claims") return RunClaims(f);
  if (f.mode == "lateness") return RunLateness(f);
  if (f.mode == "scale") return RunScale(f);
  if (f.mode == "output") return RunOutput(f);
  return Usage();
}
