// AuditLog: the cluster's record of the calls that change jobs (who, what, when, before/after),
// kept in the backend (AuditStore, gnomon/audit_store.h) so every node serves the whole trail.
//
// - A record carries how the call ended (AuditResult), mapped from its HTTP status here; the API
//   shows that result and the HTTP status of such an answer.
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

#include "gnomon/audit_store.h"
#include "gnomon/status.h"

namespace gnomon::server {

struct AuditLogOptions {
  // Records of successful calls kept in the backend (the newest). Default 10,000.
  int keep = 10000;
  // Records of failed calls (status >= 400) kept in the backend, apart. Default 10,000.
  int keep_failed = 10000;
};

// The result of an audited call the API answered with HTTP `status`: 2xx and 3xx ok; 401 and 403
// denied; 404 not_found; 409 and 412 conflict; 429 rate_limited; 503 and 504 unavailable; other
// 4xx invalid; other 5xx failed.
AuditResult AuditResultOfHttpStatus(int status);
// The HTTP status the API shows for a record: the status of an answer with its result (for a call
// that was done, its action's: create 201, delete 204, trigger, backfill and rerun 202, else 200).
int HttpStatusOfAudit(const AuditRecord& record);

class AuditLog {
 public:
  // `store` must outlive this object.
  AuditLog(AuditStore& store, AuditLogOptions options);

  // Writes `record` (seq and at are assigned by the backend) after any records still waiting.
  void Record(AuditRecord record);
  // Newest first: at most `limit` records with seq < before (0 = from the newest), successful
  // and failed ones together.
  Result<std::vector<AuditRecord>> List(int limit, int64_t before) const;
  // Records dropped because the backend was unreachable for too long.
  int64_t dropped() const;

 private:
  AuditStore& store_;
  const AuditLogOptions options_;
  mutable std::mutex mu_;
  std::deque<AuditRecord> pending_;  // guarded by mu_, oldest first
  int64_t dropped_ = 0;              // guarded by mu_
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_AUDIT_LOG_H_
