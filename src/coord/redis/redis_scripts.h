// The Lua scripts of RedisCoordinator (internal). Each multi-step operation is one script, so
// Redis runs it alone and whole. The key layout is documented in gnomon/redis_coordinator.h.
//
// Calling convention, every script:
//   KEYS[1] = the job's base "<prefix>:<ns>:{g<group>}:job:<job>" (or, for the other scripts,
//             an index key or the shared base), KEYS[2] = the shared base
//             "<prefix>:<ns>:{~shared}".
//   ARGV[1] = "now" in unix ms, or "" to read the server's TIME; ARGV[2] = max records per job;
//   ARGV[3] = max records in total; ARGV[4] = fire marker retention in ms. The operation's own
//   arguments follow from ARGV[5]. Numbers are decimal text.
// Replies are arrays whose first element is a word: OK, LEASE (fenced off; then the reason),
// NOTFOUND, EXISTS, PRECOND, or the claim results CLAIMED, ALREADY, EARLY, OLD, OVERLAP, PAUSED.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gnomon::coord::redis_scripts {

// Scripts in registration order (RedisConnection::AddScript ids).
enum Id {
  kRenew,
  kNextAttempt,
  kReportMany,
  kListExpired,
  kResolveLost,
  kRecordSkipped,
  kSaveCheckpoint,
  kSaveLiveOutput,
  kSetPaused,
  kPruneMany,
  kListRuns,
  kGetRun,
  kHeartbeat,
  kListNodes,
  kPutJob,
  kDeleteJob,
  kAppendAudit,
  kFiresRecorded,
  kClaimMany,
  kGetJobStates,
  kCancelFire,
  kRerunFire,
  kUnclaim,
  kBumpJobsVersion,
  kSweepNewRuns,
  kCount,
};

// Where the scripts run.
//   kSingle   one primary (with replicas or Sentinel): the calling convention above.
//   kCluster  a Redis Cluster. A script's source starts with "#!lua", so the server refuses a
//             key outside the slot of its KEYS, but for the batch scripts (CrossSlot: their
//             source starts "#!lua flags=allow-cross-slot-keys"), which may touch every slot of
//             the primary they run on and no other. A key group's script (the fire scripts) has
//             KEYS[2] = the group's base "<prefix>:<ns>:{g<group>}" and KEYS[1] = a job's base in
//             that group (or the group's base); a batch script's KEYS[2] is the base of any group
//             of its primary, and its fires may be of any group of that primary (a claim or
//             report batch reads one key of each group before it writes, so a group served
//             elsewhere fails the call with nothing written). A lease is indexed in its job's group
//             (GB:leases of that group), new history members go to the runs_new of KEYS[2]'s group,
//             and the all-jobs listing is not touched. A script of the shared slot has KEYS[1] =
//             KEYS[2] = the shared base; it publishes with SPUBLISH. A pause-state change cannot
//             bump the jobs version from a key group's slot: kSetPaused and kCancelFire leave it,
//             and their caller runs kBumpJobsVersion in the shared slot next (docs/redis-cluster.md
//             "Shared keys").
enum class Topology { kSingle, kCluster };

// True for the scripts that can list new history records: under a Cluster they leave them in
// the key group's runs_new, which RedisStore then copies into the all-jobs listing.
bool ListsRecords(Id id);

// True for the batch scripts (RedisStore::EvalBatch, and kUnclaim on a batch's part) and the
// scans (kListExpired, kSweepNewRuns): under a Cluster one call covers key groups of one primary.
bool CrossSlot(Id id);

// The full source (shared prelude + body) of script `id`.
std::string Source(Id id, Topology topology = Topology::kSingle);
// A one-off script (the layout moves, redis_layout.cc): `body` after the shared definitions it
// names, without a "#!lua" line (it may touch any key of its first key's slot on a Cluster too).
std::string SourceOf(std::string body);

// --- Argument layouts ------------------------------------------------------------------------
// The one description of what each script reads: ARGV[1..4] are kCommonArgs; a script's own
// arguments, from ARGV[5] on, are ArgNames(id), in order. A name ending in "..." is a rest of
// any length (the batch scripts' items: kClaimItem for claim_one, kReportItem for report_one,
// kPruneItem for prune_one).
// The C++ call sites build their argument vectors through ArgList against these names, and
// redis_scripts_test checks every script's source against them: the "-- ARGV[5..]:" (or, for
// an item function, "-- A[i..]:") line the script carries and the ARGV[n] / A[i + n] it reads.
// bench/redis_script_cost.py passes the claim and report batches in the same layout.

inline constexpr std::string_view kCommonArgs[] = {"now_ms", "max_records_per_job",
                                                   "max_records_total", "fire_retention_ms"};
inline constexpr std::string_view kClaimItem[] = {"job",         "group",    "ms",     "shard",
                                                  "shard_count", "node",     "ttl_ms", "skew_ms",
                                                  "overlap",     "deadline", "cause",  "member"};
inline constexpr std::string_view kReportItem[] = {
    "job", "group", "fid", "token", "member", "final", "failure_effect", "record"};
inline constexpr std::string_view kPruneItem[] = {"job", "group", "keep_last", "max_age_ms"};

// The script's own arguments (ARGV[5] on).
std::span<const std::string_view> ArgNames(Id id);

// An argument vector built by name: each Add must name the layout's next argument (a rest name
// takes any number of values), else GNOMON_CHECK aborts, so no call site can pass arguments in
// another order than the script reads them.
class ArgList {
 public:
  // `head`: arguments before the layout's (for a script, the kCommonArgs values).
  explicit ArgList(std::span<const std::string_view> names, std::vector<std::string> head = {})
      : names_(names), args_(std::move(head)) {}
  ArgList& Add(std::string_view name, std::string value);
  // The arguments (moved out). REQUIRES: every name but a final rest was added.
  std::vector<std::string> Take();

 private:
  std::span<const std::string_view> names_;
  size_t next_ = 0;
  std::vector<std::string> args_;
};

}  // namespace gnomon::coord::redis_scripts

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_
