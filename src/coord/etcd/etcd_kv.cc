#include "src/coord/etcd/etcd_kv.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

Result<json> EtcdKv::Txn(const json& compares, const json& success, const json& failure,
                         bool* maybe_applied) {
  json body = json::object();
  if (!compares.empty()) body["compare"] = compares;
  if (!success.empty()) body["success"] = success;
  if (!failure.empty()) body["failure"] = failure;
  return client_.Call("/v3/kv/txn", body, maybe_applied);
}

Status EtcdKv::Read(Snapshot& s, const std::vector<std::string>& keys,
                    const std::vector<std::string>& prefixes) {
  size_t start = 0;
  do {
    const size_t end = std::min(keys.size(), start + kReadBatch);
    const bool with_prefixes = start == 0;
    json ops = json::array();
    for (size_t i = start; i < end; ++i) ops.push_back(RangeOp(keys[i]));
    if (with_prefixes) {
      for (const std::string& p : prefixes) ops.push_back(RangeOp(p, PrefixEnd(p)));
    }
    if (ops.empty()) break;
    Result<json> r = Txn(json::array(), ops, json::array());
    if (!r.ok()) return r.status();
    s.revision = std::max(s.revision, I64((*r)["header"], "revision"));
    const json& responses = (*r)["responses"];
    for (size_t i = start; i < end; ++i) {
      Kv kv;
      kv.key = keys[i];
      const json& rr = responses.at(i - start).at("response_range");
      if (rr.contains("kvs") && !rr["kvs"].empty()) {
        Result<Kv> got = ParseKv(rr["kvs"][0]);
        if (!got.ok()) return got.status();
        kv = std::move(*got);
      }
      s.kvs[kv.key] = std::move(kv);
    }
    if (with_prefixes) {
      for (size_t k = 0; k < prefixes.size(); ++k) {
        const json& rr = responses.at(end - start + k).at("response_range");
        std::vector<Kv>& out = s.prefixes[prefixes[k]];
        out.clear();
        if (!rr.contains("kvs")) continue;
        for (const json& item : rr["kvs"]) {
          Result<Kv> got = ParseKv(item);
          if (!got.ok()) return got.status();
          s.kvs[got->key] = *got;
          out.push_back(std::move(*got));
        }
      }
    }
    start = end;
  } while (start < keys.size());
  return Status::Ok();
}

Result<EtcdKv::Committed> EtcdKv::Commit(const Snapshot& s, const Writes& w, const json& extra,
                                         bool* maybe_applied, json compares) {
  for (const auto& [key, kv] : s.kvs) {
    compares.push_back(json{{"key", coord::Base64Encode(key)},
                            {"target", "MOD"},
                            {"result", "EQUAL"},
                            {"mod_revision", std::to_string(kv.mod_revision)}});
  }
  json ops = w.Ops();
  const size_t n_writes = ops.size();
  for (const json& op : extra) ops.push_back(op);
  Result<json> r = Txn(compares, ops, json::array(), maybe_applied);
  if (!r.ok()) return r.status();
  Committed c;
  c.succeeded = r->value("succeeded", false);
  c.revision = I64((*r)["header"], "revision");
  if (c.succeeded && r->contains("responses")) {
    c.responses = json::array();
    const json& all = (*r)["responses"];
    for (size_t i = n_writes; i < all.size(); ++i) c.responses.push_back(all[i]);
  }
  return c;
}

Status EtcdKv::Contention(const std::string& what) {
  return UnavailableError("etcd: " + what + ": gave up after " + std::to_string(kMaxRounds) +
                          " conflicting rounds");
}

Result<EtcdKv::Lease> EtcdKv::Grant(Duration ttl) {
  const int64_t secs = std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(ttl).count());
  Result<json> r = client_.Call("/v3/lease/grant", json{{"TTL", std::to_string(secs)}});
  if (!r.ok()) return r.status();
  Lease lease{I64(*r, "ID"), I64(*r, "TTL")};
  if (lease.id == 0 || lease.ttl_s <= 0) {
    return UnavailableError("etcd: lease grant refused: " + r->dump().substr(0, 200));
  }
  return lease;
}
Result<bool> EtcdKv::KeepAlive(int64_t id) {
  Result<json> r = client_.Call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}});
  if (!r.ok()) return r.status();
  return I64(r->value("result", json::object()), "TTL") > 0;
}
Result<EtcdKv::Lease> EtcdKv::LeaseFor(std::optional<Lease>& lease, Duration ttl) {
  if (!lease) {
    Result<Lease> granted = Grant(ttl);
    if (!granted.ok()) return granted.status();
    lease = *granted;
  }
  return *lease;
}

Status EtcdKv::Scan(const std::string& from, const std::string& to, int64_t batch, bool keys_only,
                    const std::function<bool(const Kv&)>& visit) {
  std::string start = from;
  for (;;) {
    json extra{{"limit", std::to_string(batch)}};
    if (keys_only) extra["keys_only"] = true;
    json body = RangeOp(start, to, extra)["request_range"];
    Result<json> r = client_.Call("/v3/kv/range", body);
    if (!r.ok()) return r.status();
    if (!r->contains("kvs")) return Status::Ok();
    std::string last;
    for (const json& item : (*r)["kvs"]) {
      Result<Kv> kv = ParseKv(item);
      if (!kv.ok()) return kv.status();
      last = kv->key;
      if (!visit(*kv)) return Status::Ok();
    }
    if (!r->value("more", false)) return Status::Ok();
    start = last + std::string(1, '\0');
  }
}

}  // namespace gnomon::coord::etcd
