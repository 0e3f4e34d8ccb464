#include "src/server/audit_log.h"

#include <algorithm>

namespace gnomon::server {

AuditLog::AuditLog(Coordinator& coordinator, AuditLogOptions options)
    : coordinator_(coordinator), options_(options) {}

void AuditLog::Record(AuditRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(std::move(record));
  const size_t cap = static_cast<size_t>(std::max(1, options_.keep));
  while (pending_.size() > cap) {
    pending_.pop_front();
    ++dropped_;
  }
  while (!pending_.empty()) {
    const AuditRecord& r = pending_.front();
    const int keep = r.status >= 400 ? options_.keep_failed : options_.keep;
    if (!coordinator_.AppendAudit(r, std::max(1, keep)).ok()) break;
    pending_.pop_front();
  }
}

Result<std::vector<AuditRecord>> AuditLog::List(int limit, int64_t before) const {
  return coordinator_.ListAudit(limit, before);
}

int64_t AuditLog::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace gnomon::server
