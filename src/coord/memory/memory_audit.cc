#include "src/coord/memory/memory_audit.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::memory {

Result<int64_t> MemoryAudit::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::lock_guard<std::mutex> lock(s_.mu);
  AuditRecord r = record;
  r.seq = ++s_.audit_seq;
  r.at = s_.clock.Now();
  std::deque<AuditRecord>& log = s_.audit[r.result == AuditResult::kOk ? 0 : 1];
  log.push_back(std::move(r));
  while (log.size() > static_cast<size_t>(keep)) log.pop_front();
  return s_.audit_seq;
}

Result<std::vector<AuditRecord>> MemoryAudit::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  const size_t n = static_cast<size_t>(*page);
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  std::lock_guard<std::mutex> lock(s_.mu);
  std::vector<AuditRecord> out;
  auto ok = s_.audit[0].rbegin(), failed = s_.audit[1].rbegin();
  auto skip = [&](auto& it, const auto& end) {
    while (it != end && before_seq != 0 && it->seq >= before_seq) ++it;
  };
  skip(ok, s_.audit[0].rend());
  skip(failed, s_.audit[1].rend());
  while (out.size() < n && (ok != s_.audit[0].rend() || failed != s_.audit[1].rend())) {
    const bool take_ok =
        failed == s_.audit[1].rend() || (ok != s_.audit[0].rend() && ok->seq > failed->seq);
    out.push_back(take_ok ? *ok++ : *failed++);
  }
  return out;
}

}  // namespace gnomon::coord::memory
