// AuditLog: the cluster's record of the calls that change jobs (who, what, when, before/after),
// kept in the backend (Coordinator::AppendAudit) so every node serves the whole trail.
//
// - Successful calls and failed ones (status >= 400) are kept apart, each up to its own cap, so a
//   flood of failing calls never evicts the record of a successful change.
// - A record the backend cannot take (unreachable) waits in memory and is written, in order,
//   before the next one; at most `keep` wait (the oldest are dropped and counted).
// - Definitions in records carry no secret values: env and HTTP header values are replaced by
//   kSecretPlaceholder before a record is written (src/server/job_json.h, RedactSecrets).
//
// Thread safety: thread-safe; Record holds mu_ across the backend write (records stay in order).
#ifndef GNOMON_SRC_SERVER_AUDIT_LOG_H_
#define GNOMON_SRC_SERVER_AUDIT_LOG_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/status.h"

namespace gnomon::server {

struct AuditLogOptions {
  // Records of successful calls kept in the backend (the newest). Default 10,000.
  int keep = 10000;
  // Records of failed calls (status >= 400) kept in the backend, apart. Default 10,000.
  int keep_failed = 10000;
};

class AuditLog {
 public:
  // `coordinator` must outlive this object.
  AuditLog(Coordinator& coordinator, AuditLogOptions options);

  // Writes `record` (seq and at are assigned by the backend) after any records still waiting.
  void Record(AuditRecord record);
  // Newest first: at most `limit` records with seq < before (0 = from the newest), successful
  // and failed ones together.
  Result<std::vector<AuditRecord>> List(int limit, int64_t before) const;
  // Records dropped because the backend was unreachable for too long.
  int64_t dropped() const;

 private:
  Coordinator& coordinator_;
  const AuditLogOptions options_;
  mutable std::mutex mu_;
  std::deque<AuditRecord> pending_;  // guarded by mu_, oldest first
  int64_t dropped_ = 0;              // guarded by mu_
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_AUDIT_LOG_H_
