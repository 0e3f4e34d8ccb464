// api_seed: fills a SQLite backend file for the HTTP API load benchmark (bench/api_load.sh,
// docs/benchmarks.md "HTTP API under load").
//
//   api_seed --db PATH [--jobs 10000] [--runs 1000000]
//
// It goes through the Coordinator API only, as a node would: PutJob for each dynamic job
// definition (the JSON the HTTP API stores, so `gnomon serve` installs them at start), then one
// Claim + Report per history record, spread evenly over the jobs (record k of job j is its
// (k+1)-th hourly fire before the seed time). Coordinator has no batch write, so this loops; each
// Claim and Report is one transaction. The file must not exist yet (a seed is never appended to).
//
// The seeded definitions are chosen so that serving them adds no work of its own during a
// benchmark: they fire yearly on 29 February (`H H 29 2 *`: no fire, so no claim or process, while
// the load runs), misfire = skip, and history_keep / history_max_age keep every seeded record
// (the scheduler's PruneHistory deletes nothing: 100 records per job < history_keep, and none is
// older than history_max_age = 3650d).
//
// Prints the time each phase took. Exit status 0 on success, 1 on any error (with the message).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "gnomon/coordinator.h"
#include "gnomon/job.h"
#include "gnomon/sqlite_coordinator.h"
#include "gnomon/time.h"
#include "src/server/job_json.h"

namespace {

using gnomon::Duration;
using gnomon::Instant;

// Zones cycled over the jobs, so the job list describes schedules in several zones.
constexpr std::string_view kZones[] = {"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"};

std::string JobId(int i) {
  char id[32];
  std::snprintf(id, sizeof id, "bench.job-%05d", i);
  return id;
}

int Fail(std::string_view what, const gnomon::Status& s) {
  std::cerr << "api_seed: " << what << ": " << s.message() << "\n";
  return 1;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string db_path;
  int jobs = 10000;
  int64_t runs = 1000000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "api_seed: " << arg << " needs a value\n";
      return 2;
    }
    if (arg == "--db") {
      db_path = argv[++i];
    } else if (arg == "--jobs") {
      jobs = std::atoi(argv[++i]);
    } else if (arg == "--runs") {
      runs = std::atoll(argv[++i]);
    } else {
      std::cerr << "usage: api_seed --db PATH [--jobs N] [--runs N]\n";
      return 2;
    }
  }
  if (db_path.empty() || jobs < 1 || runs < 0) {
    std::cerr << "usage: api_seed --db PATH [--jobs N >= 1] [--runs N >= 0]\n";
    return 2;
  }
  if (std::filesystem::exists(db_path)) {
    std::cerr << "api_seed: " << db_path << " exists; a seed is written to a new file\n";
    return 2;
  }

  gnomon::SystemClock& clock = gnomon::SystemClock::Get();
  gnomon::Result<std::unique_ptr<gnomon::SqliteCoordinator>> opened =
      gnomon::SqliteCoordinator::Open(db_path, clock);
  if (!opened.ok()) return Fail("open " + db_path, opened.status());
  gnomon::Coordinator& coord = **opened;

  // --- definitions ---------------------------------------------------------------------------
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < jobs; ++i) {
    gnomon::JobSpec spec;
    spec.id = JobId(i);
    spec.schedule = "H H 29 2 *";
    spec.timezone = std::string(kZones[i % std::size(kZones)]);
    spec.command = "/bin/true";
    spec.misfire = gnomon::MisfirePolicy::kSkip;
    spec.timeout = std::chrono::minutes(5);
    spec.description = "load benchmark job " + std::to_string(i);
    spec.history_keep = 100'000;
    spec.history_max_age = std::chrono::hours(24 * 3650);
    if (gnomon::Status s = gnomon::ValidateJobSpec(spec); !s.ok()) return Fail(spec.id, s);
    const std::string definition = gnomon::server::DumpJson(gnomon::server::JobSpecToJson(spec));
    gnomon::Result<int64_t> v = coord.PutJob(spec.id, definition, 0);
    if (!v.ok()) return Fail("PutJob " + spec.id, v.status());
  }
  const double jobs_seconds = SecondsSince(start);
  std::cout << "api_seed: " << jobs << " job definitions (PutJob) in " << jobs_seconds << " s\n"
            << std::flush;

  // --- history -------------------------------------------------------------------------------
  // Record i belongs to job i % jobs; its fire is (i / jobs + 1) hours before the seed time's
  // hour, plus a per-job offset inside the hour.
  const int64_t base_ms = clock.Now().unix_millis() / 3'600'000 * 3'600'000;
  start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < runs; ++i) {
    const int j = static_cast<int>(i % jobs);
    const int64_t k = i / jobs;
    gnomon::ClaimRequest req;
    req.fire.job_id = JobId(j);
    req.fire.scheduled_at =
        Instant::FromUnixMillis(base_ms - (k + 1) * 3'600'000 + (j % 3600) * 1000);
    req.node_id = j % 2 == 0 ? "bench-node-a" : "bench-node-b";
    req.overlap = gnomon::OverlapPolicy::kAllow;
    gnomon::Result<gnomon::ClaimOutcome> claimed = coord.Claim(req);
    if (!claimed.ok()) return Fail("Claim " + req.fire.RunId(), claimed.status());
    if (claimed->result != gnomon::ClaimOutcome::Result::kClaimed) {
      return Fail("Claim " + req.fire.RunId(),
                  gnomon::InternalError("not claimed (is the file fresh?)"));
    }
    const gnomon::Claim& claim = *claimed->claim;
    gnomon::RunRecord r;
    r.run_id = req.fire.RunId();
    r.job_id = req.fire.job_id;
    r.scheduled_at = req.fire.scheduled_at;
    r.attempt = claim.attempt;
    r.fencing_token = claim.fencing_token;
    r.node_id = req.node_id;
    r.started_at = req.fire.scheduled_at + std::chrono::milliseconds(20 + i % 50);
    r.finished_at = r.started_at + std::chrono::milliseconds(100 * (1 + i % 40));
    if (i % 20 == 7) {
      r.outcome = gnomon::RunOutcome::kFailed;
      r.exit_code = 1;
      r.error = "exit status 1";
      r.output = "error: upstream answered 503\n";
    } else {
      r.outcome = gnomon::RunOutcome::kSucceeded;
      r.exit_code = 0;
      r.output = "ok\n";
    }
    if (gnomon::Status s = coord.Report(claim, r, true); !s.ok())
      return Fail("Report " + r.run_id, s);
    if ((i + 1) % 100000 == 0) {
      std::cout << "api_seed: " << (i + 1) << " history records, " << SecondsSince(start) << " s\n"
                << std::flush;
    }
  }
  const double runs_seconds = SecondsSince(start);
  std::cout << "api_seed: " << runs << " history records (Claim + Report) in " << runs_seconds
            << " s (" << (runs_seconds > 0 ? static_cast<double>(runs) / runs_seconds : 0)
            << " records/s)\n";
  return 0;
}
