#include "src/coord/etcd/etcd_audit.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

Result<int64_t> EtcdAudit::AppendAudit(const AuditRecord& record, int keep) {
  if (keep < 1) return InvalidArgumentError("append audit: keep < 1");
  const bool failed = record.result != AuditResult::kOk;
  const std::string prefix = keys_.AuditPrefix(failed);
  const std::string sk = keys_.AuditSeqKey();
  for (int round = 0; round < kMaxRounds; ++round) {
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(kv_.Read(s, {sk}));
    int64_t last = 0;
    if (s.Has(sk) && !ParseI64(s.Value(sk), last)) last = 0;
    const int64_t seq = last + 1;
    json j{{"seq", seq},
           {"at", now_().unix_millis()},
           {"who", record.who},
           {"action", record.action},
           {"target", record.target},
           {"status", coord::AuditStoredCode(record.result)},
           {"before", record.before},
           {"after", record.after}};
    Writes w;
    w.Put(sk, std::to_string(seq));
    w.Put(keys_.AuditKey(failed, seq), j.dump(-1, ' ', false, json::error_handler_t::replace));
    // The oldest records of the class beyond the newest keep - 1 (this one is the keep-th).
    Result<std::string> cut = AuditCut(prefix, keep - 1);
    if (!cut.ok()) return cut.status();
    if (!cut->empty()) w.DeleteRange(prefix, *cut);
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
    if (c->succeeded) return seq;
  }
  return kv_.Contention("append audit");
}

Result<std::string> EtcdAudit::AuditCut(const std::string& prefix, int keep) {
  Result<json> count = kv_.client().Call(
      "/v3/kv/range", RangeOp(prefix, PrefixEnd(prefix), {{"count_only", true}})["request_range"]);
  if (!count.ok()) return count.status();
  const int64_t excess = I64(*count, "count") - keep;
  if (excess <= 0) return std::string();
  json body = RangeOp(prefix, PrefixEnd(prefix),
                      {{"sort_order", "ASCEND"},
                       {"sort_target", "KEY"},
                       {"keys_only", true},
                       {"limit", std::to_string(excess)}})["request_range"];
  Result<json> r = kv_.client().Call("/v3/kv/range", body);
  if (!r.ok()) return r.status();
  std::string last;
  if (r->contains("kvs")) {
    for (const json& item : (*r)["kvs"]) {
      Result<Kv> kv = ParseKv(item);
      if (!kv.ok()) return kv.status();
      last = kv->key;
    }
  }
  return last.empty() ? last : last + std::string(1, '\0');
}

Result<std::vector<AuditRecord>> EtcdAudit::ListAudit(int limit, int64_t before_seq) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  if (before_seq < 0) return InvalidArgumentError("list audit: before_seq < 0");
  std::vector<AuditRecord> out;
  // Both classes, newest first; merged by seq below.
  for (bool failed : {false, true}) {
    const std::string prefix = keys_.AuditPrefix(failed);
    const std::string end =
        before_seq == 0 ? PrefixEnd(prefix) : keys_.AuditKey(failed, before_seq);
    json body = RangeOp(prefix, end,
                        {{"sort_order", "DESCEND"},
                         {"sort_target", "KEY"},
                         {"limit", std::to_string(*page)}})["request_range"];
    Result<json> r = kv_.client().Call("/v3/kv/range", body);
    if (!r.ok()) return r.status();
    if (!r->contains("kvs")) continue;
    for (const json& item : (*r)["kvs"]) {
      Result<Kv> kv = ParseKv(item);
      if (!kv.ok()) return kv.status();
      json j = json::parse(kv->value, nullptr, false);
      if (!j.is_object()) continue;
      AuditRecord a;
      a.seq = j.value("seq", int64_t{0});
      a.at = Instant::FromUnixMillis(j.value("at", int64_t{0}));
      a.who = j.value("who", "");
      a.action = j.value("action", "");
      a.target = j.value("target", "");
      a.result = coord::AuditResultOfStoredCode(j.value("status", int64_t{0}));
      a.before = j.value("before", "");
      a.after = j.value("after", "");
      out.push_back(std::move(a));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const AuditRecord& a, const AuditRecord& b) { return a.seq > b.seq; });
  if (out.size() > static_cast<size_t>(*page)) out.resize(static_cast<size_t>(*page));
  return out;
}

}  // namespace gnomon::coord::etcd
