#include "src/server/audit_log.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

namespace gnomon::server {

AuditResult AuditResultOfHttpStatus(int status) {
  if (status < 400) return AuditResult::kOk;
  if (status == 401 || status == 403) return AuditResult::kDenied;
  if (status == 404) return AuditResult::kNotFound;
  if (status == 409 || status == 412) return AuditResult::kConflict;
  if (status == 429) return AuditResult::kRateLimited;
  if (status == 503 || status == 504) return AuditResult::kUnavailable;
  return status < 500 ? AuditResult::kInvalid : AuditResult::kFailed;
}

int HttpStatusOfAudit(const AuditRecord& record) {
  static const std::map<AuditResult, int> kRefused = {
      {AuditResult::kInvalid, 400},     {AuditResult::kDenied, 403},
      {AuditResult::kNotFound, 404},    {AuditResult::kConflict, 409},
      {AuditResult::kRateLimited, 429}, {AuditResult::kUnavailable, 503},
      {AuditResult::kFailed, 500}};
  if (auto it = kRefused.find(record.result); it != kRefused.end()) return it->second;
  static const std::map<std::string, int, std::less<>> kDone = {
      {"create", 201}, {"delete", 204}, {"trigger", 202}, {"backfill", 202}, {"rerun", 202}};
  auto it = kDone.find(record.action);
  return it == kDone.end() ? 200 : it->second;
}

AuditLog::AuditLog(AuditStore& store, AuditLogOptions options) : store_(store), options_(options) {}

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
    const int keep = r.result == AuditResult::kOk ? options_.keep : options_.keep_failed;
    if (!store_.AppendAudit(r, std::max(1, keep)).ok()) break;
    pending_.pop_front();
  }
}

Result<std::vector<AuditRecord>> AuditLog::List(int limit, int64_t before) const {
  return store_.ListAudit(limit, before);
}

int64_t AuditLog::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace gnomon::server
