#include "src/coord/redis/redis_audit.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

}  // namespace

Result<int64_t> RedisAudit::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  std::string encoded;
  AppendField(encoded, record.who);
  AppendField(encoded, record.action);
  AppendField(encoded, record.target);
  AppendField(encoded, std::to_string(coord::AuditStoredCode(record.result)));
  AppendField(encoded, record.before);
  AppendField(encoded, record.after);
  std::vector<std::string> args = store_.CommonArgs();
  // Failed calls go to their own capped set (B:audit_failed), so they never evict the others.
  args.insert(args.end(),
              {std::to_string(keep), encoded, record.result == AuditResult::kOk ? "ok" : "failed"});
  Result<RedisReply> r =
      store_.Eval(scripts::kAppendAudit, {store_.shared(), store_.shared()}, args);
  if (!r.ok()) return r.status();
  int64_t seq = 0;
  if (!IsArray(*r, 2) || Word(*r) != "OK" || !IntAt(*r, 1, seq)) return Malformed("append audit");
  return seq;
}

Result<std::vector<AuditRecord>> RedisAudit::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  const std::string max = before_seq == 0 ? "+inf" : "(" + std::to_string(before_seq);
  std::vector<AuditRecord> out;
  // Both sets, newest first; merged by seq below.
  for (const char* set : {":audit", ":audit_failed"}) {
    Result<RedisReply> r =
        store_.Command(store_.shared(), {"ZREVRANGEBYSCORE", store_.shared() + set, max, "-inf",
                                         "LIMIT", "0", std::to_string(*page)});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray) return Malformed("list audit");
    for (const RedisReply& e : r->elements) {
      std::string_view in = e.str;
      AuditRecord a;
      size_t nl1 = in.find('\n');
      size_t nl2 = nl1 == std::string_view::npos ? nl1 : in.find('\n', nl1 + 1);
      int64_t at = 0, status = 0;
      std::string s_status;
      if (nl2 == std::string_view::npos || !ParseInt(in.substr(0, nl1), a.seq) ||
          !ParseInt(in.substr(nl1 + 1, nl2 - nl1 - 1), at)) {
        return Malformed("list audit");
      }
      in.remove_prefix(nl2 + 1);
      if (!ReadField(in, a.who) || !ReadField(in, a.action) || !ReadField(in, a.target) ||
          !ReadField(in, s_status) || !ParseInt(s_status, status) || !ReadField(in, a.before) ||
          !ReadField(in, a.after)) {
        return Malformed("list audit");
      }
      a.at = Instant::FromUnixMillis(at);
      a.result = coord::AuditResultOfStoredCode(status);
      out.push_back(std::move(a));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const AuditRecord& a, const AuditRecord& b) { return a.seq > b.seq; });
  if (out.size() > static_cast<size_t>(*page)) out.resize(static_cast<size_t>(*page));
  return out;
}

}  // namespace gnomon::coord
