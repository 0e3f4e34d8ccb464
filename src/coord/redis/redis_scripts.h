// The Lua scripts of RedisCoordinator (internal). Each multi-step operation is one script, so
// Redis runs it alone and whole. The key layout is documented in gnomon/redis_coordinator.h.
//
// Calling convention, every script:
//   KEYS[1] = the job's base "<prefix>:<ns>:{job}" (or, for global scripts, an index key or the
//             global base), KEYS[2] = the global base "<prefix>:<ns>".
//   ARGV[1] = "now" in unix ms, or "" to read the server's TIME; ARGV[2] = max records per job;
//   ARGV[3] = max records in total; ARGV[4] = fire marker retention in ms. The operation's own
//   arguments follow from ARGV[5]. Numbers are decimal text.
// Replies are arrays whose first element is a word: OK, LEASE (fenced off; then the reason),
// NOTFOUND, EXISTS, PRECOND, or the claim results CLAIMED, ALREADY, EARLY, OVERLAP, PAUSED.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_

#include <string>

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
  kPrune,
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
  kCount,
};

// The full source (shared prelude + body) of script `id`.
std::string Source(Id id);

}  // namespace gnomon::coord::redis_scripts

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_SCRIPTS_H_
