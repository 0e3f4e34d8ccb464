// AuditStore: the role of the coordinator that keeps the audit log, the cluster's record of the
// calls that changed (or tried to change) jobs: who, what, when, how it ended, before/after.
// Part of Coordinator (gnomon/coordinator.h).
//
// Records are kept in two classes, bounded apart: calls that were done (result kOk) and the
// others, so a flood of refused calls never evicts the record of a change.
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_AUDIT_STORE_H_
#define GNOMON_AUDIT_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

// How an audited call ended.
enum class AuditResult {
  kOk,           // done
  kInvalid,      // refused: the request was malformed or out of bounds
  kDenied,       // refused: the caller may not make it (a role, a namespace, a policy, a quota)
  kNotFound,     // refused: its target does not exist
  kConflict,     // refused: the target's state or version does not allow it
  kRateLimited,  // refused: the caller made too many calls
  kUnavailable,  // not done: the backend or a node could not be reached
  kFailed,       // not done: an internal error
};

// "ok", "invalid", "denied", "not_found", "conflict", "rate_limited", "unavailable", "failed".
constexpr std::string_view AuditResultName(AuditResult result) {
  switch (result) {
    case AuditResult::kOk:
      return "ok";
    case AuditResult::kInvalid:
      return "invalid";
    case AuditResult::kDenied:
      return "denied";
    case AuditResult::kNotFound:
      return "not_found";
    case AuditResult::kConflict:
      return "conflict";
    case AuditResult::kRateLimited:
      return "rate_limited";
    case AuditResult::kUnavailable:
      return "unavailable";
    case AuditResult::kFailed:
      return "failed";
  }
  return "failed";
}

// One audited call. before/after are opaque text to the store (gnomon's server keeps a job's
// JSON there, secrets redacted).
struct AuditRecord {
  int64_t seq = 0;     // assigned by AppendAudit: strictly increasing per backend
  Instant at;          // assigned by AppendAudit: the backend's clock
  std::string who;     // the caller's name (gnomon's server: the token's), or "anonymous"
  std::string action;  // "create", "replace", "delete", "pause", "resume", "trigger", ...
  std::string target;  // job id
  AuditResult result = AuditResult::kOk;
  std::string before;  // the definition/state before ("" = none)
  std::string after;   // after ("" = none)
};

class AuditStore {
 public:
  virtual ~AuditStore() = default;

  // Appends `record` (its seq and at are assigned here) and drops the oldest records of its
  // class (done: result kOk; not done: every other result) beyond the newest `keep` (>= 1) of
  // that class. Returns the record's seq. InvalidArgument for keep < 1.
  virtual Result<int64_t> AppendAudit(const AuditRecord& record, int keep) = 0;
  // Records of both classes, newest first, with seq < before_seq (0 = from the newest), at most
  // `limit` (1 or more; capped at 1000 by implementations).
  virtual Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) = 0;
};

}  // namespace gnomon

#endif  // GNOMON_AUDIT_STORE_H_
