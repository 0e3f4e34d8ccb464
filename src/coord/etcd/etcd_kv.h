// EtcdKv: the etcd v3 KV and lease calls the coordinator makes through EtcdClient (internal):
// optimistic transactions (read keys into a Snapshot at their mod revisions, then commit
// Writes only if none of them changed), paged scans, and etcd leases.
//
// Thread safety: as EtcdClient (safe from many threads); a Snapshot and Writes belong to one
// operation on one thread.
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_KV_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_KV_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/coord/etcd/etcd_client.h"
#include "src/coord/etcd/etcd_keyspace.h"

namespace gnomon::coord::etcd {

// Rounds of an optimistic transaction before giving up with Unavailable (each round that fails
// means another caller committed a conflicting change, so the system as a whole progresses).
inline constexpr int kMaxRounds = 64;
// Keys deleted per trimming/pruning txn (etcd's default --max-txn-ops is 128).
inline constexpr size_t kDeleteBatch = 50;
// Point reads per txn when fetching many keys.
inline constexpr size_t kReadBatch = 100;

// The keys read by one round of an optimistic transaction, at (or after) one revision.
struct Snapshot {
  int64_t revision = 0;
  std::map<std::string, Kv> kvs;                    // every key read; absent ones too
  std::map<std::string, std::vector<Kv>> prefixes;  // prefix -> present keys, in key order

  bool Has(const std::string& key) const {
    auto it = kvs.find(key);
    return it != kvs.end() && it->second.mod_revision != 0;
  }
  const Kv* Find(const std::string& key) const {
    auto it = kvs.find(key);
    return it == kvs.end() || it->second.mod_revision == 0 ? nullptr : &it->second;
  }
  const std::string& Value(const std::string& key) const {
    static const std::string kEmpty;
    auto it = kvs.find(key);
    return it == kvs.end() ? kEmpty : it->second.value;
  }
};

// Puts and deletes of one commit (etcd refuses a txn naming a key twice: the last one wins).
class Writes {
 public:
  void Put(const std::string& key, std::string value, int64_t lease = 0) {
    ops_[key] = Op{std::move(value), lease};
  }
  void Delete(const std::string& key) { ops_[key] = std::nullopt; }
  // A range delete [from, to); must not overlap other keys of the txn.
  void DeleteRange(const std::string& from, const std::string& to) {
    ranges_.push_back({from, to});
  }
  bool empty() const { return ops_.empty() && ranges_.empty(); }
  json Ops() const {
    json ops = json::array();
    for (const auto& [key, value] : ops_) {
      if (value) {
        json put{{"key", coord::Base64Encode(key)}, {"value", coord::Base64Encode(value->value)}};
        if (value->lease != 0) put["lease"] = std::to_string(value->lease);
        ops.push_back(json{{"request_put", std::move(put)}});
      } else {
        ops.push_back(json{{"request_delete_range", {{"key", coord::Base64Encode(key)}}}});
      }
    }
    for (const auto& [from, to] : ranges_) {
      ops.push_back(
          json{{"request_delete_range",
                {{"key", coord::Base64Encode(from)}, {"range_end", coord::Base64Encode(to)}}}});
    }
    return ops;
  }

 private:
  struct Op {
    std::string value;
    int64_t lease = 0;  // etcd lease the key is attached to (0 = none)
  };
  std::map<std::string, std::optional<Op>> ops_;
  std::vector<std::pair<std::string, std::string>> ranges_;
};

class EtcdKv {
 public:
  struct Committed {
    bool succeeded = false;
    int64_t revision = 0;
    json responses;  // of the success ops: the writes, then `extra`
  };

  struct Lease {
    int64_t id = 0;
    int64_t ttl_s = 0;  // as granted (etcd raises a TTL below its minimum)
  };

  // REQUIRES: `client` outlives this object.
  explicit EtcdKv(EtcdClient& client) : client_(client) {}
  EtcdClient& client() { return client_; }

  // One txn call; `maybe_applied`: see EtcdClient::Call.
  Result<json> Txn(const json& compares, const json& success, const json& failure,
                   bool* maybe_applied = nullptr);
  // Reads `keys` and the keys under each of `prefixes` into `s` (a txn of ranges per
  // kReadBatch keys; the prefixes go with the first).
  Status Read(Snapshot& s, const std::vector<std::string>& keys,
              const std::vector<std::string>& prefixes = {});
  // Commits `w` (plus the read-only `extra` ops) if every key of `s` still has the mod_revision
  // it was read at and the further `compares` hold. `maybe_applied`: see EtcdClient::Call.
  Result<Committed> Commit(const Snapshot& s, const Writes& w, const json& extra = json::array(),
                           bool* maybe_applied = nullptr, json compares = json::array());
  // The Unavailable answer of an operation that lost kMaxRounds rounds.
  Status Contention(const std::string& what);
  // Keys in [from, to), at most `batch` per request, page after page, until `visit` says stop.
  Status Scan(const std::string& from, const std::string& to, int64_t batch, bool keys_only,
              const std::function<bool(const Kv&)>& visit);

  // A new etcd lease of at least `ttl`, in whole seconds.
  Result<Lease> Grant(Duration ttl);
  // Refreshes lease `id` to its granted TTL: false when etcd no longer has it (it expired or was
  // revoked, and its keys are gone).
  Result<bool> KeepAlive(int64_t id);
  // The lease for this operation's attempt: granted on first use, kept across conflict rounds.
  Result<Lease> LeaseFor(std::optional<Lease>& lease, Duration ttl);

 private:
  EtcdClient& client_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_KV_H_
