// JobSpec: what a job is (docs/configuration.md "Jobs files"), with defaults and validation;
// RunRecord: what one attempt of one fire did (docs/guarantees.md 10). Plain values, copyable,
// thread-compatible.
#ifndef GNOMON_JOB_H_
#define GNOMON_JOB_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/cron.h"
#include "gnomon/fire_rules.h"
#include "gnomon/heap_optional.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

// A fire that comes due while a run of the job is live: kForbid skips it, kAllow runs it too,
// kReplace cancels the live run; kBufferOne keeps one such fire waiting until the run ends (later
// ones are skipped), kBufferAll keeps each, in order, up to kMaxBufferedFires (docs/semantics.md
// "Overlap").
enum class OverlapPolicy { kForbid, kAllow, kReplace, kBufferOne, kBufferAll };
// The fires of one job that wait under overlap = buffer_all on a node; later ones are skipped.
inline constexpr size_t kMaxBufferedFires = 100;
// Whether fires of `p` wait for a live run (buffer_one, buffer_all).
constexpr bool IsBuffered(OverlapPolicy p) {
  return p == OverlapPolicy::kBufferOne || p == OverlapPolicy::kBufferAll;
}
enum class MisfirePolicy { kSkip, kOnce, kAll };
enum class LostPolicy { kFail, kRerun };

// Lower-case names as in the jobs file ("forbid", "once", "rerun"), and their parsers.
std::string_view ToString(OverlapPolicy p);
std::string_view ToString(MisfirePolicy p);
std::string_view ToString(LostPolicy p);
Result<OverlapPolicy> ParseOverlapPolicy(std::string_view s);
Result<MisfirePolicy> ParseMisfirePolicy(std::string_view s);
Result<LostPolicy> ParseLostPolicy(std::string_view s);

// An HTTP target: the run is a request; 2xx = success.
struct HttpTarget {
  std::string url;                             // http://host:port/path (required)
  std::string method = "POST";                 // POST or GET
  std::map<std::string, std::string> headers;  // extra request headers
  friend bool operator==(const HttpTarget&, const HttpTarget&) = default;
};

// The keys that decide which instants of a job's schedule fire, and when (gnomon/fire_rules.h,
// docs/semantics.md "Windows, calendars and jitter"). Held on the heap by JobSpec, and only when
// one of them differs from its default: most jobs set none (a million jobs keep 8 bytes each).
struct FireRulesSpec {
  std::optional<Instant> start_at;     // no fire before it (included)
  std::optional<Instant> end_at;       // no fire after it (included)
  int max_runs = 0;                    // only the first N fires from start_at; 0 = no limit
  std::vector<std::string> exclude;    // dates, date ranges, cron expressions (the job's zone)
  std::vector<std::string> calendars;  // ids of named calendars whose entries are excluded too
  bool record_excluded = false;        // excluded instants get a skipped record ("excluded")
  Duration jitter{0};                  // each fire is delayed by an offset in [0, jitter)
  friend bool operator==(const FireRulesSpec&, const FireRulesSpec&) = default;
};

// The jobs a run of this job fires when its final outcome (after retries) is known
// (docs/semantics.md "Dependencies"): each child's fire has this fire's instant, so it is claimed
// once however many nodes see the run end. Held on the heap by JobSpec as FireRulesSpec is.
// A join (`after`) fires this job for an instant once every listed job's fire of that instant
// has succeeded; with a join_timeout, an instant whose listed fires did not all succeed within it
// is recorded as skipped, naming them.
struct DependencySpec {
  std::vector<std::string> on_success;   // fired when the run succeeded
  std::vector<std::string> on_failure;   // fired when it failed or timed out
  std::vector<std::string> on_complete;  // fired whatever its outcome
  std::vector<std::string> after;        // this job joins these jobs' fires of an instant
  Duration join_timeout{0};              // 0 = none: an incomplete join has no record
  friend bool operator==(const DependencySpec&, const DependencySpec&) = default;
};

struct JobSpec {
  std::string id;  // required, [A-Za-z0-9_.-]{1,128}
  // The cron dialect (gnomon/cron.h); empty = no schedule: the job fires only as a child
  // (DependencySpec), by a trigger or by a backfill.
  std::string schedule;
  std::string timezone = "UTC";  // IANA zone the schedule is read in
  // Which instants of the schedule fire, and when (FireRulesSpec); unset = all of them, at their
  // instant. Read it with FireRulesOf, change it with SetFireRules.
  HeapOptional<FireRulesSpec> fire_rules;
  // The jobs its runs fire when they end; read with DependenciesOf, change with SetDependencies.
  HeapOptional<DependencySpec> dependencies;
  // The executor: exactly one of command, argv, http, or an in-process handler (registered by
  // an embedder under the job id; see Scheduler::AddJob).
  std::string command;            // run with /bin/sh -c
  std::vector<std::string> argv;  // exec'd directly, never through a shell
  HeapOptional<HttpTarget> http;  // as std::optional, held on the heap (8 bytes when unset)
  bool in_process = false;        // set by Scheduler::AddJob with a handler
  Duration timeout{0};            // 0 = none; else cancels the run
  int retries = 0;                // further attempts after a failure, 0-100
  Duration retry_backoff = std::chrono::seconds(10);  // first delay; doubles, full jitter
  OverlapPolicy overlap = OverlapPolicy::kForbid;
  MisfirePolicy misfire = MisfirePolicy::kOnce;
  Duration catchup_window = std::chrono::hours(1);
  LostPolicy on_lost = LostPolicy::kFail;
  int shards = 1;                    // 1-1024 fires per instant
  int max_consecutive_failures = 0;  // 0 = off; else auto-pause
  bool enabled = true;               // false = defined but never scheduled
  std::string description;
  // Default parameters: a JSON object as compact text ("" = none), at most kMaxParamsBytes. A
  // trigger or re-run may pass parameters merged over these (MergeParams); a run sees the result
  // (RunContext::params, GNOMON_PARAMS).
  std::string params;
  std::map<std::string, std::string> env;                 // extra environment (process jobs)
  Duration kill_grace = std::chrono::seconds(10);         // SIGTERM -> SIGKILL delay
  int history_keep = 100;                                 // history: last N records per job
  Duration history_max_age = std::chrono::hours(24 * 7);  // history: max age
  // Queue mode: the worker tag whose stream its fires are published to ([A-Za-z0-9_.-]{1,64});
  // `gnomon worker --tags` picks the tags a worker takes. Ignored when fires run locally.
  std::string queue = "default";
  // Process jobs (docs/operations.md "Running safely"): the user (and group) the process runs as,
  // "user[:group]" by name or number; empty = the daemon's user (or the namespace policy's
  // run_as for jobs defined through the API). Switching needs gnomon to run as root.
  std::string run_as;
  // Names of the daemon's environment variables a process run inherits; it sees no other.
  std::vector<std::string> inherit_env;
  // Per-run limits of process jobs; 0 = none. memory_max: bytes (cgroup v2 memory.max when the
  // controller is delegated, else RLIMIT_AS of each process); cpu_max: CPU time of each process
  // (RLIMIT_CPU: SIGXCPU, then SIGKILL a second later); pids_max: processes of the run (cgroup
  // v2 pids.max when delegated, else RLIMIT_NPROC of a run_as user); open_files: descriptors of
  // each process (RLIMIT_NOFILE).
  int64_t memory_max = 0;
  Duration cpu_max{0};
  int pids_max = 0;
  int open_files = 0;

  // Where the definition came from ("jobs.toml:12", "api"); config-file jobs are read-only in
  // the API.
  std::string source;
  bool read_only = false;
};

// The job's FireRulesSpec, or the defaults when it sets none.
const FireRulesSpec& FireRulesOf(const JobSpec& job);
// Sets the job's FireRulesSpec (kept unset when `rules` is all defaults).
void SetFireRules(JobSpec& job, FireRulesSpec rules);
// The job's DependencySpec (empty lists when it names no child), and its setter.
const DependencySpec& DependenciesOf(const JobSpec& job);
void SetDependencies(JobSpec& job, DependencySpec deps);

// Largest retry backoff (the doubling is capped here).
inline constexpr Duration kMaxRetryBackoff = std::chrono::minutes(10);

// Longest RunRecord::cause.
inline constexpr size_t kMaxCauseBytes = 256;

// Largest parameters object (JSON text) a job or a run may carry.
inline constexpr size_t kMaxParamsBytes = 16 * 1024;

// Parameters of a run: `overrides` (a JSON object as text; "" = none) merged key by key over the
// job's `defaults` (the same), as compact JSON text ("" when both are empty). InvalidArgument
// naming what is wrong: not JSON, not an object, or larger than kMaxParamsBytes once merged.
Result<std::string> MergeParams(std::string_view defaults, std::string_view overrides);

// A definition checked and its schedule compiled in its zone: what Scheduler::AddJob and SetJobs
// take, so that a node checks and compiles each definition once (CompileJob), wherever it came
// from (a jobs file, the API, another node through the backend).
struct CompiledJob {
  JobSpec spec;
  std::shared_ptr<const CronExpr> schedule;  // spec.schedule in spec.timezone; never null
  std::shared_ptr<const FireRules> rules;    // window, exclusions, jitter; null when none
};

// Checks every field and compiles the schedule in its zone; the error names the field
// ("job \"x\": retries: -1 is out of range 0-100"). Jobs with the same schedule and zone share
// one compiled expression (a million jobs have few distinct schedules; it lives while a job
// uses it), unless the schedule may use H, which hashes the job id. `calendars`: the named
// calendars a job's `calendars` key may reference (null: none). Thread-safe.
Result<CompiledJob> CompileJob(JobSpec job, const Calendars* calendars = nullptr);
// CompileJob's checks, for a definition that is only checked (its compiled schedule dropped).
Status ValidateJobSpec(const JobSpec& job, const Calendars* calendars = nullptr);
// Whether `id` matches [A-Za-z0-9_.-]{1,128} and is not made only of dots ("." and ".." would
// name other paths in URLs and files).
bool IsValidJobId(std::string_view id);
// A size in bytes: a non-negative integer with an optional binary unit, "512", "64K", "512M",
// "2G", "1T" (K = 1024; "KiB", "MiB", "GiB", "TiB" too). InvalidArgument naming what is wrong.
Result<int64_t> ParseByteSize(std::string_view s);

// Whether `name` is an HTTP header name (an RFC 9110 token: letters, digits, !#$%&'*+-.^_`|~).
bool IsHttpHeaderName(std::string_view name);
// Whether `value` can be an HTTP header value: no CR, LF, NUL or other control byte but tab.
bool IsHttpHeaderValue(std::string_view value);

// One fire: (job, scheduled instant, shard). Its run id is the same on every node.
struct FireKey {
  std::string job_id;
  Instant scheduled_at;
  int shard = 0;
  int shard_count = 1;
  // "<job>@<scheduled unix ms>" plus "#<shard>" when the job has more than one shard.
  std::string RunId() const;
  friend bool operator==(const FireKey& a, const FireKey& b) {
    return a.job_id == b.job_id && a.scheduled_at == b.scheduled_at && a.shard == b.shard;
  }
};

enum class RunOutcome {
  kRunning,  // claimed, executing (or waiting for a retry)
  kSucceeded,
  kFailed,     // non-zero exit, non-2xx, handler error, failed to start
  kTimedOut,   // cancelled by `timeout`
  kCancelled,  // cancelled by shutdown, by overlap = replace, or by self-fencing
  kSkipped,    // not run: see skip_reason
  kLost,       // its holder vanished (lease expired) and on_lost = fail
};
std::string_view ToString(RunOutcome o);
Result<RunOutcome> ParseRunOutcome(std::string_view s);

// The children a run of `job` whose final outcome is `outcome` fires, each once, in the order
// named: succeeded fires on_success, failed, timed_out and lost fire on_failure, and these and
// cancelled fire on_complete; a skipped or running fire fires none.
std::vector<std::string> ChildrenFor(const JobSpec& job, RunOutcome outcome);

// Last bytes of output kept per attempt.
inline constexpr size_t kMaxOutputBytes = 64 * 1024;

struct RunRecord {
  std::string run_id;  // FireKey::RunId()
  std::string job_id;
  Instant scheduled_at;
  int shard = 0;
  int shard_count = 1;
  int attempt = 1;            // 1-based
  int64_t fencing_token = 0;  // 0 for skipped fires that were never claimed
  std::string node_id;
  Instant started_at;  // claim instant for skipped ones
  Instant finished_at;
  RunOutcome outcome = RunOutcome::kRunning;
  std::optional<int> exit_code;
  std::string error;
  std::string output;       // the last kMaxOutputBytes of stdout+stderr / response body
  std::string skip_reason;  // "overlap", "misfire", "paused", "disabled"
  std::string params;       // the run's parameters (JSON object text; "" = none)
  std::string cause;        // why the attempt ran when not by schedule ("rerun by ops"), <= 256
};

}  // namespace gnomon

#endif  // GNOMON_JOB_H_
