// Helpers shared by the Coordinator backends (internal; not part of the public API): argument
// validation, the history listing order and its opaque cursor, output truncation and the
// consecutive-failure rule. Keeping them in one place keeps every backend's answers identical.
#ifndef GNOMON_SRC_COORD_COORDINATOR_UTIL_H_
#define GNOMON_SRC_COORD_COORDINATOR_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gnomon/coordinator.h"

namespace gnomon::coord {

// Largest page ListRuns returns and largest batch ListExpired returns.
inline constexpr int kMaxPageSize = 1000;

// InvalidArgument unless the job id is valid, 0 <= shard < shard_count and shard_count >= 1.
Status ValidateFireKey(const FireKey& fire);
// ValidateFireKey plus a non-empty node id, lease_ttl > 0 and skew_tolerance >= 0.
Status ValidateClaimRequest(const ClaimRequest& req);
// InvalidArgument unless ttl > 0 (`what` names the argument in the message).
Status ValidateTtl(Duration ttl, std::string_view what);
// The arguments of Coordinator::ResolveLost (a rerun needs a ttl and a node).
Status ValidateResolveLost(const ExpiredFire& expired, const std::string& node_id,
                           LostPolicy policy, Duration ttl);
// InvalidArgument unless `record` describes `claim`'s attempt (run id, job, scheduled instant,
// shard, attempt and fencing token all match) and, when `final`, its outcome is not running.
Status ValidateReport(const Claim& claim, const RunRecord& record, bool final);
// The limit a listing uses: InvalidArgument when < 1, else min(limit, kMaxPageSize).
Result<int> PageLimit(int limit);

// `output` cut to its last kMaxOutputBytes bytes.
std::string TruncateOutput(std::string output);

// How a final outcome moves JobState::consecutive_failures.
enum class FailureEffect { kReset, kIncrement, kUnchanged };
FailureEffect FailureEffectOf(RunOutcome outcome);

// Position of a history record in ListRuns order: scheduled_at descending, then job id and shard
// ascending (a total order across jobs and shards), then attempt descending.
struct RunPosition {
  int64_t scheduled_ms = 0;
  std::string job_id;
  int shard = 0;
  int attempt = 1;
};
RunPosition PositionOf(const RunRecord& record);
// Whether `a` is listed before `b`.
bool ListedBefore(const RunPosition& a, const RunPosition& b);
// The opaque cursor naming "after this record", and its parser (InvalidArgument when malformed).
std::string EncodeCursor(const RunPosition& last);
Result<RunPosition> DecodeCursor(std::string_view cursor);
// A query's cursor: nullopt for an empty one (the first page), else DecodeCursor.
Result<std::optional<RunPosition>> PageStart(std::string_view cursor);

// The ClaimOutcome for a request, with backend_now set and the given result.
ClaimOutcome MakeOutcome(ClaimOutcome::Result result, Instant backend_now);

// A history record for attempt `attempt` of `fire`, with the identifying fields filled in.
RunRecord NewRecord(const FireKey& fire, int attempt, int64_t fencing_token,
                    const std::string& node_id, Instant started_at, RunOutcome outcome);

// Coordinator::CancelFire's change to the record of the fire's current attempt: a running one
// ends `cancelled` at `now` with `reason` as its error; one that already ended (the fire waits
// for its retry) keeps its outcome, and its error says the retry was cancelled.
void CancelRecord(RunRecord& record, const std::string& reason, Instant now);

// Coordinator::CancelFire's answers for a fire that cannot be cancelled.
Status NoSuchFire(const FireKey& fire);
Status FireEnded(const FireKey& fire);
// Coordinator::RerunFire's argument checks, and its answer for a fire that has not ended.
Status ValidateRerun(const FireKey& fire, const std::string& node_id, Duration ttl,
                     const std::string& cause);
Status FireNotEnded(const FireKey& fire);

// DefinitionStore::GetJob's answer for a job without a definition.
Status JobNotFound(const std::string& job_id);

// An audit record's result as the stores keep it: the number the releases before AuditResult
// wrote in its place (an HTTP status: 200, 400, 403, 404, 409, 429, 503, 500), so that records of
// either release list alike, an older node reads the newer records, and the class split the
// stores make on the number (>= 400: not done) still holds.
int64_t AuditStoredCode(AuditResult result);
// The result of a stored number: any of the above, and the other statuses older releases
// stored (2xx and 3xx: ok; 401: denied; 412: conflict; 504: unavailable; other 4xx: invalid;
// other 5xx: failed).
AuditResult AuditResultOfStoredCode(int64_t code);

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_COORDINATOR_UTIL_H_
