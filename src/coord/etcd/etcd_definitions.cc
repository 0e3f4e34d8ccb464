#include "src/coord/etcd/etcd_definitions.h"

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

Result<JobState> EtcdDefinitions::GetJobState(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return JobState{};
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {keys_.StateKey(job_id)}));
  return coord::etcd::ToJobState(DecodeState(s.Value(keys_.StateKey(job_id))));
}

Status EtcdDefinitions::SetPaused(const std::string& job_id, bool paused,
                                  const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  const std::string sk = keys_.StateKey(job_id);
  for (int round = 0; round < kMaxRounds; ++round) {
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(kv_.Read(s, {sk}));
    StateRec st = DecodeState(s.Value(sk));
    st.paused = paused;
    st.reason = paused ? reason : "";
    Writes w;
    w.Put(sk, Encode(st));
    w.Put(keys_.JobsVersionKey(), job_id);
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
    if (c->succeeded) return Status::Ok();
  }
  return kv_.Contention("set paused " + job_id);
}
Result<int64_t> EtcdDefinitions::PutJob(const std::string& job_id, const std::string& definition,
                                        int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  const std::string key = keys_.JobKey(job_id);
  json compares = json::array({json{{"key", coord::Base64Encode(key)},
                                    {"target", "MOD"},
                                    {"result", "EQUAL"},
                                    {"mod_revision", std::to_string(expected_version)}}});
  Writes w;
  w.Put(key, definition);
  w.Put(keys_.JobsVersionKey(), job_id);
  Result<json> r = kv_.Txn(compares, w.Ops(), json::array({RangeOp(key)}));
  if (!r.ok()) return r.status();
  if (r->value("succeeded", false)) return I64((*r)["header"], "revision");
  const json& rr = (*r)["responses"].at(0).at("response_range");
  const int64_t current =
      rr.contains("kvs") && !rr["kvs"].empty() ? I64(rr["kvs"][0], "mod_revision") : 0;
  if (current == 0) {
    return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                   std::to_string(expected_version) + ")");
  }
  if (expected_version == 0) return AlreadyExistsError("job " + job_id + " already exists");
  return FailedPreconditionError("job " + job_id + " is at version " + std::to_string(current) +
                                 ", not " + std::to_string(expected_version));
}

Status EtcdDefinitions::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  if (!IsValidJobId(job_id)) return NotFoundError("job " + job_id + " does not exist");
  const std::string key = keys_.JobKey(job_id);
  json cmp{{"key", coord::Base64Encode(key)}, {"target", "MOD"}};
  if (expected_version == -1) {
    cmp["result"] = "GREATER";
    cmp["mod_revision"] = "0";
  } else {
    cmp["result"] = "EQUAL";
    cmp["mod_revision"] = std::to_string(expected_version);
  }
  Writes w;
  w.Delete(key);
  w.Put(keys_.JobsVersionKey(), job_id);
  Result<json> r = kv_.Txn(json::array({cmp}), w.Ops(), json::array({RangeOp(key)}));
  if (!r.ok()) return r.status();
  if (r->value("succeeded", false)) return Status::Ok();
  const json& rr = (*r)["responses"].at(0).at("response_range");
  if (!rr.contains("kvs") || rr["kvs"].empty()) {
    return NotFoundError("job " + job_id + " does not exist");
  }
  return FailedPreconditionError("job " + job_id + " is at version " +
                                 std::to_string(I64(rr["kvs"][0], "mod_revision")) + ", not " +
                                 std::to_string(expected_version));
}

Result<StoredJob> EtcdDefinitions::GetJob(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return coord::JobNotFound(job_id);
  const std::string key = keys_.JobKey(job_id);
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {key}));
  if (!s.Has(key)) return coord::JobNotFound(job_id);
  return StoredJob{job_id, s.Value(key), s.kvs[key].mod_revision};
}

Result<std::vector<StoredJob>> EtcdDefinitions::ListJobs() {
  Snapshot s;
  const std::string prefix = keys_.prefix() + "jobs/";
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {}, {prefix}));
  std::vector<StoredJob> out;
  for (const Kv& kv : s.prefixes[prefix]) {
    out.push_back(StoredJob{kv.key.substr(prefix.size()), kv.value, kv.mod_revision});
  }
  return out;
}

Result<std::pair<int64_t, int64_t>> EtcdDefinitions::VersionAt() {
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {keys_.JobsVersionKey()}));
  return std::pair<int64_t, int64_t>(s.kvs[keys_.JobsVersionKey()].mod_revision, s.revision);
}

Result<int64_t> EtcdDefinitions::WaitJobsChange(int64_t since, Duration timeout,
                                                DefinitionStore& self) {
  Result<std::pair<int64_t, int64_t>> v = VersionAt();
  if (!v.ok()) return v.status();
  if (v->first != since) return v->first;
  if (timeout <= Duration(0)) return v->first;
  json create{{"key", coord::Base64Encode(keys_.JobsVersionKey())},
              {"start_revision", std::to_string(v->second + 1)}};
  Status watched = kv_.client().Watch(create, timeout, [](const json& result) {
    if (result.value("canceled", false)) return false;  // compacted or refused: re-read
    return !(result.contains("events") && !result["events"].empty());
  });
  if (!watched.ok()) return self.DefinitionStore::WaitJobsChange(since, timeout);
  Result<std::pair<int64_t, int64_t>> now = VersionAt();
  if (!now.ok()) return now.status();
  return now->first;
}
}  // namespace gnomon::coord::etcd
