#include "src/coord/etcd/etcd_keyspace.h"

#include <algorithm>
#include <charconv>
#include <climits>

#include "src/coord/coordinator_util.h"
#include "src/coord/etcd/etcd_client.h"

namespace gnomon::coord::etcd {

std::string Pad(int64_t v, int width) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}

bool ParseI64(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char c = static_cast<unsigned char>(prefix.back());
    if (c < 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // the whole key space
}

int64_t I64(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t v = 0;
  if (it->is_string() && ParseI64(it->get<std::string>(), v)) return v;
  return 0;
}

Result<Kv> ParseKv(const json& j) {
  Kv kv;
  Result<std::string> key = coord::Base64Decode(j.value("key", ""));
  Result<std::string> value = coord::Base64Decode(j.value("value", ""));
  if (!key.ok() || !value.ok()) return InternalError("etcd: a key or value is not base64");
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  kv.mod_revision = I64(j, "mod_revision");
  kv.create_revision = I64(j, "create_revision");
  return kv;
}

json RangeOp(const std::string& key, const std::string& end, json extra) {
  json r = std::move(extra);
  r["key"] = coord::Base64Encode(key);
  if (!end.empty()) r["range_end"] = coord::Base64Encode(end);
  return json{{"request_range", std::move(r)}};
}

std::string Encode(const FireRec& f) {
  return json{{"sc", f.sc},       {"att", f.att}, {"node", f.node},
              {"lease", f.lease}, {"lid", f.lid}, {"lttl", f.lttl}}
      .dump();
}

FireRec DecodeFire(const std::string& text) {
  FireRec f;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return f;
  f.sc = j.value("sc", 1);
  f.att = j.value("att", 1);
  f.node = j.value("node", "");
  f.lease = j.value("lease", int64_t{0});
  f.lid = j.value("lid", int64_t{0});
  f.lttl = j.value("lttl", int64_t{0});
  return f;
}

std::string Encode(const StateRec& s) {
  json j{{"paused", s.paused}, {"reason", s.reason}, {"fails", s.fails}};
  if (s.last) j["last"] = *s.last;
  if (s.pruned) j["pruned"] = *s.pruned;
  return j.dump();
}

StateRec DecodeState(const std::string& text) {
  StateRec s;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return s;
  // Backend data: a field of the wrong type reads as absent rather than throwing.
  if (auto it = j.find("paused"); it != j.end() && it->is_boolean()) s.paused = it->get<bool>();
  if (auto it = j.find("reason"); it != j.end() && it->is_string()) {
    s.reason = it->get<std::string>();
  }
  if (auto it = j.find("fails"); it != j.end() && it->is_number_integer()) {
    s.fails = static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, INT_MAX));
  }
  if (auto it = j.find("last"); it != j.end() && it->is_number_integer()) {
    s.last = it->get<int64_t>();
  }
  if (auto it = j.find("pruned"); it != j.end() && it->is_number_integer()) {
    s.pruned = it->get<int64_t>();
  }
  return s;
}

JobState ToJobState(const StateRec& s) {
  JobState out;
  out.paused = s.paused;
  out.pause_reason = s.reason;
  out.consecutive_failures = s.fails;
  if (s.last) out.last_scheduled = Instant::FromUnixMillis(*s.last);
  return out;
}

StateRec ToStateRec(const JobState& s) {
  StateRec out;
  out.paused = s.paused;
  out.reason = s.pause_reason;
  out.fails = s.consecutive_failures;
  if (s.last_scheduled) out.last = s.last_scheduled->unix_millis();
  return out;
}

std::string Encode(const RunRecord& r) {
  json j{{"run", r.run_id},
         {"job", r.job_id},
         {"ms", r.scheduled_at.unix_millis()},
         {"shard", r.shard},
         {"sc", r.shard_count},
         {"att", r.attempt},
         {"tok", r.fencing_token},
         {"node", r.node_id},
         {"start", r.started_at.unix_millis()},
         {"fin", r.finished_at.unix_millis()},
         {"outcome", std::string(ToString(r.outcome))},
         {"err", coord::Base64Encode(r.error)},
         {"output", coord::Base64Encode(r.output)},
         {"skip", r.skip_reason}};
  if (r.exit_code) j["exit"] = *r.exit_code;
  if (!r.params.empty()) j["params"] = r.params;
  if (!r.cause.empty()) j["cause"] = r.cause;
  return j.dump();
}

Result<RunRecord> DecodeRecord(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return InternalError("etcd: a history record is not JSON");
  RunRecord r;
  r.run_id = j.value("run", "");
  r.job_id = j.value("job", "");
  r.scheduled_at = Instant::FromUnixMillis(j.value("ms", int64_t{0}));
  r.shard = j.value("shard", 0);
  r.shard_count = j.value("sc", 1);
  r.attempt = j.value("att", 1);
  r.fencing_token = j.value("tok", int64_t{0});
  r.node_id = j.value("node", "");
  r.started_at = Instant::FromUnixMillis(j.value("start", int64_t{0}));
  r.finished_at = Instant::FromUnixMillis(j.value("fin", int64_t{0}));
  Result<RunOutcome> outcome = ParseRunOutcome(j.value("outcome", ""));
  if (!outcome.ok()) return InternalError("etcd: a history record has a bad outcome");
  r.outcome = *outcome;
  Result<std::string> err = coord::Base64Decode(j.value("err", ""));
  Result<std::string> output = coord::Base64Decode(j.value("output", ""));
  if (!err.ok() || !output.ok()) return InternalError("etcd: a history record is corrupt");
  r.error = std::move(*err);
  r.output = std::move(*output);
  r.skip_reason = j.value("skip", "");
  r.params = j.value("params", "");
  r.cause = j.value("cause", "");
  if (j.contains("exit")) r.exit_code = j["exit"].get<int>();
  return r;
}

Result<RunRecord> DecodeRecord(const Kv& kv) {
  Result<RunRecord> r = DecodeRecord(kv.value);
  if (r.ok() && r->fencing_token == 0 && r->outcome != RunOutcome::kSkipped) {
    r->fencing_token = kv.create_revision;
  }
  return r;
}

bool ParseIndexTail(std::string_view tail, KeyPos& pos) {
  if (tail.size() != 17 + 1 + 10 + 1 + 10) return false;
  int64_t inv_ms = 0, shard = 0, inv_att = 0;
  if (!ParseI64(tail.substr(0, 17), inv_ms) || !ParseI64(tail.substr(18, 10), shard) ||
      !ParseI64(tail.substr(29, 10), inv_att)) {
    return false;
  }
  pos.ms = kBias - inv_ms;
  pos.shard = static_cast<int>(shard);
  pos.attempt = static_cast<int>(INT32_MAX - inv_att);
  return true;
}

bool ParseRunTail(std::string_view tail, KeyPos& pos) {
  if (tail.size() < 17 + 1 + 1 + 1 + 10 + 1 + 10) return false;
  const size_t job_end = tail.size() - 22;
  if (tail[17] != ' ' || tail[job_end] != ' ') return false;
  pos.job = std::string(tail.substr(18, job_end - 18));
  std::string index(tail.substr(0, 17));
  index += std::string(tail.substr(job_end));
  return ParseIndexTail(index, pos);
}

bool ParseFireTail(std::string_view tail, KeyPos& pos) {
  const size_t slash = tail.find('/');
  if (slash == std::string_view::npos || tail.size() != slash + 1 + 17 + 1 + 10) return false;
  pos.job = std::string(tail.substr(0, slash));
  int64_t ms = 0, shard = 0;
  if (!ParseI64(tail.substr(slash + 1, 17), ms) || !ParseI64(tail.substr(slash + 19, 10), shard)) {
    return false;
  }
  pos.ms = ms - kBias;
  pos.shard = static_cast<int>(shard);
  return true;
}

}  // namespace gnomon::coord::etcd
