#include "src/coord/etcd/etcd_history.h"

#include <algorithm>
#include <map>
#include <set>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::etcd {

json EtcdHistory::CountOps(const std::string& job) const {
  json ops = json::array();
  ops.push_back(
      RangeOp(keys_.IndexPrefix(job), PrefixEnd(keys_.IndexPrefix(job)), {{"count_only", true}}));
  ops.push_back(RangeOp(keys_.RunsPrefix(), PrefixEnd(keys_.RunsPrefix()), {{"count_only", true}}));
  return ops;
}
void EtcdHistory::TrimAfter(const std::string& job, const EtcdKv::Committed& c) {
  if (c.responses.size() < 2) return;
  const int64_t job_count = I64(c.responses[0].value("response_range", json::object()), "count");
  const int64_t total = I64(c.responses[1].value("response_range", json::object()), "count");
  // Best effort: a failure leaves a few records too many until the next write.
  if (job_count > max_records_per_job_) {
    (void)TrimJob(job, job_count - max_records_per_job_);
  }
  if (total > max_records_total_) (void)TrimTotal(total - max_records_total_);
}

Result<RunPage> EtcdHistory::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> after = coord::PageStart(query.cursor);
  if (!after.ok()) return after.status();
  const bool by_job = !query.job_id.empty();
  if (by_job && !IsValidJobId(query.job_id)) return RunPage{};
  const std::string base = by_job ? keys_.IndexPrefix(query.job_id) : keys_.RunsPrefix();
  std::string from = base;
  std::string to = PrefixEnd(base);
  if (query.scheduled_until) {
    from = std::max(from, base + Desc(query.scheduled_until->unix_millis() - 1));
  }
  if (query.scheduled_from) {
    to = std::min(to, base + Desc(query.scheduled_from->unix_millis() - 1));
  }
  if (*after) {
    // Strictly after the cursor's position (a cursor from an all-jobs listing also works
    // for one job: positions compare by instant, then job id).
    const coord::RunPosition& a = **after;
    std::string key;
    if (!by_job) {
      key = keys_.RunKey(a.job_id, a.scheduled_ms, a.shard, a.attempt) + std::string(1, '\0');
    } else if (a.job_id == query.job_id) {
      key = keys_.IndexKey(query.job_id, a.scheduled_ms, a.shard, a.attempt) + std::string(1, '\0');
    } else if (a.job_id < query.job_id) {
      key = base + Desc(a.scheduled_ms);  // this job's records at that instant come after
    } else {
      key = base + Desc(a.scheduled_ms) + "!";  // they came before: skip the instant
    }
    from = std::max(from, key);
  }
  RunPage page;
  if (from >= to) return page;
  const size_t want = static_cast<size_t>(*limit);
  std::vector<RunRecord> found;
  bool more = false;
  if (!by_job) {
    Status scan = kv_.Scan(from, to, std::min<int64_t>(want + 1, 256), false, [&](const Kv& kv) {
      Result<RunRecord> r = DecodeRecord(kv);
      if (!r.ok()) return true;
      if (query.outcome && r->outcome != *query.outcome) return true;
      if (found.size() == want) {
        more = true;
        return false;
      }
      found.push_back(std::move(*r));
      return true;
    });
    GNOMON_RETURN_IF_ERROR(scan);
  } else {
    std::vector<std::string> keys;
    const std::string outcome = query.outcome ? std::string(ToString(*query.outcome)) : "";
    Status scan = kv_.Scan(from, to, std::min<int64_t>(want + 1, 1000), false, [&](const Kv& kv) {
      if (!outcome.empty() && kv.value != outcome) return true;
      KeyPos pos;
      if (!ParseIndexTail(std::string_view(kv.key).substr(base.size()), pos)) return true;
      if (keys.size() == want) {
        more = true;
        return false;
      }
      keys.push_back(keys_.RunKey(query.job_id, pos.ms, pos.shard, pos.attempt));
      return true;
    });
    GNOMON_RETURN_IF_ERROR(scan);
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(kv_.Read(s, keys));
    for (const std::string& key : keys) {
      if (!s.Has(key)) continue;  // pruned meanwhile
      Result<RunRecord> r = DecodeRecord(s.kvs.at(key));
      if (r.ok()) found.push_back(std::move(*r));
    }
  }
  page.runs = std::move(found);
  if (more && !page.runs.empty()) {
    page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
  }
  return page;
}

Result<std::vector<RunRecord>> EtcdHistory::GetRun(const std::string& run_id) {
  auto not_found = [&] { return NotFoundError("run " + run_id.substr(0, 200) + " has no record"); };
  const size_t at = run_id.rfind('@');
  if (at == std::string::npos) return not_found();
  const std::string job = run_id.substr(0, at);
  std::string_view rest = std::string_view(run_id).substr(at + 1);
  int64_t shard = 0;
  const size_t hash = rest.find('#');
  if (hash != std::string_view::npos) {
    if (!ParseI64(rest.substr(hash + 1), shard) || shard < 0 || shard > INT32_MAX) {
      return not_found();
    }
    rest = rest.substr(0, hash);
  }
  int64_t ms = 0;
  if (!IsValidJobId(job) || !ParseI64(rest, ms)) return not_found();
  const std::string prefix = keys_.RunsPrefix() + Desc(ms) + " " + job + " " + Pad(shard, 10) + " ";
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, {}, {prefix}));
  std::vector<RunRecord> out;
  for (const Kv& kv : s.prefixes[prefix]) {
    Result<RunRecord> r = DecodeRecord(kv);
    if (r.ok() && r->run_id == run_id) out.push_back(std::move(*r));
  }
  if (out.empty()) return not_found();
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.attempt < b.attempt; });
  return out;
}

Status EtcdHistory::DeleteRecords(const std::string& job,
                                  const std::vector<std::pair<std::string, int64_t>>& index) {
  const std::string base = keys_.IndexPrefix(job);
  for (size_t start = 0; start < index.size(); start += kDeleteBatch) {
    Snapshot s;
    Writes w;
    for (size_t i = start; i < std::min(index.size(), start + kDeleteBatch); ++i) {
      const auto& [key, rev] = index[i];
      KeyPos pos;
      if (!ParseIndexTail(std::string_view(key).substr(base.size()), pos)) continue;
      s.kvs[key] = Kv{key, "", rev};
      w.Delete(key);
      w.Delete(keys_.RunKey(job, pos.ms, pos.shard, pos.attempt));
    }
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
  }
  return Status::Ok();
}

Status EtcdHistory::TrimJob(const std::string& job, int64_t excess) {
  std::vector<std::pair<std::string, int64_t>> victims;
  json body = RangeOp(keys_.IndexPrefix(job), PrefixEnd(keys_.IndexPrefix(job)),
                      {{"sort_order", "DESCEND"},
                       {"sort_target", "KEY"},
                       {"limit", std::to_string(excess + 100)}})["request_range"];
  Result<json> r = kv_.client().Call("/v3/kv/range", body);
  if (!r.ok()) return r.status();
  if (!r->contains("kvs")) return Status::Ok();
  for (const json& item : (*r)["kvs"]) {
    Result<Kv> kv = ParseKv(item);
    if (!kv.ok()) return kv.status();
    if (kv->value == ToString(RunOutcome::kRunning)) continue;
    victims.emplace_back(kv->key, kv->mod_revision);
    if (static_cast<int64_t>(victims.size()) >= excess) break;
  }
  return DeleteRecords(job, victims);
}

Status EtcdHistory::TrimTotal(int64_t excess) {
  json body = RangeOp(keys_.RunsPrefix(), PrefixEnd(keys_.RunsPrefix()),
                      {{"sort_order", "DESCEND"},
                       {"sort_target", "KEY"},
                       {"keys_only", true},
                       {"limit", std::to_string(excess + 100)}})["request_range"];
  Result<json> r = kv_.client().Call("/v3/kv/range", body);
  if (!r.ok()) return r.status();
  if (!r->contains("kvs")) return Status::Ok();
  std::map<std::string, std::vector<std::string>> index_by_job;
  std::vector<std::string> index_keys;
  for (const json& item : (*r)["kvs"]) {
    Result<Kv> kv = ParseKv(item);
    if (!kv.ok()) return kv.status();
    KeyPos pos;
    if (!ParseRunTail(std::string_view(kv->key).substr(keys_.RunsPrefix().size()), pos)) continue;
    index_keys.push_back(keys_.IndexKey(pos.job, pos.ms, pos.shard, pos.attempt));
    index_by_job[pos.job].push_back(index_keys.back());
  }
  Snapshot s;
  GNOMON_RETURN_IF_ERROR(kv_.Read(s, index_keys));
  int64_t chosen = 0;
  std::set<std::string> victims;
  for (const std::string& key : index_keys) {
    if (chosen >= excess) break;
    if (!s.Has(key) || s.Value(key) == ToString(RunOutcome::kRunning)) continue;
    victims.insert(key);
    ++chosen;
  }
  for (const auto& [job, keys] : index_by_job) {
    std::vector<std::pair<std::string, int64_t>> list;
    for (const std::string& key : keys) {
      if (victims.contains(key)) list.emplace_back(key, s.kvs[key].mod_revision);
    }
    GNOMON_RETURN_IF_ERROR(DeleteRecords(job, list));
  }
  return Status::Ok();
}

Status EtcdHistory::RaisePrunedBefore(const std::string& job_id, int64_t cutoff_ms) {
  const std::string key = keys_.StateKey(job_id);
  for (int round = 0; round < kMaxRounds; ++round) {
    Snapshot s;
    GNOMON_RETURN_IF_ERROR(kv_.Read(s, {key}));
    StateRec state = DecodeState(s.Value(key));
    if (state.pruned && *state.pruned >= cutoff_ms) return Status::Ok();
    state.pruned = cutoff_ms;
    Writes w;
    w.Put(key, Encode(state));
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
    if (c->succeeded) return Status::Ok();
  }
  return kv_.Contention("prune " + job_id);
}

Status EtcdHistory::PruneHistory(const std::string& job_id, int keep_last, Duration max_age,
                                 Instant now) {
  if (keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
  if (max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
  if (!IsValidJobId(job_id)) return InvalidArgumentError("prune: invalid job id");
  const int64_t cutoff = (now - max_age).unix_millis();
  const std::string base = keys_.IndexPrefix(job_id);
  std::vector<std::pair<std::string, int64_t>> victims;
  int fires_seen = 0;
  std::optional<std::pair<int64_t, int>> current;
  Status scan = kv_.Scan(base, PrefixEnd(base), 1000, false, [&](const Kv& kv) {
    KeyPos pos;
    if (!ParseIndexTail(std::string_view(kv.key).substr(base.size()), pos)) return true;
    const std::pair<int64_t, int> fire{pos.ms, pos.shard};
    if (current != fire) {
      current = fire;
      ++fires_seen;
    }
    const bool prune = fires_seen > keep_last || pos.ms < cutoff;
    if (prune && kv.value != ToString(RunOutcome::kRunning)) {
      victims.emplace_back(kv.key, kv.mod_revision);
    }
    return true;
  });
  GNOMON_RETURN_IF_ERROR(scan);
  GNOMON_RETURN_IF_ERROR(DeleteRecords(job_id, victims));
  // Fire markers are the claim keys that stop a second claim; they go only with max_age, and
  // never while an attempt holds the fire (its open key exists).
  const std::string fires = keys_.prefix() + "fire/" + job_id + "/";
  const std::string open = keys_.OpenPrefix(job_id);
  Snapshot open_now;
  GNOMON_RETURN_IF_ERROR(kv_.Read(open_now, {}, {open}));
  std::vector<Kv> old;
  scan = kv_.Scan(fires, fires + Asc(cutoff), 1000, false, [&](const Kv& kv) {
    if (!open_now.Has(open + kv.key.substr(fires.size()))) old.push_back(kv);
    return true;
  });
  GNOMON_RETURN_IF_ERROR(scan);
  // The cutoff is stored before any marker goes: from then on a claim by schedule before it is
  // refused (FireLedger::Claim), so no claim finds a marker gone and runs its fire again.
  if (!old.empty()) GNOMON_RETURN_IF_ERROR(RaisePrunedBefore(job_id, cutoff));
  for (size_t start = 0; start < old.size(); start += kDeleteBatch) {
    Snapshot s;
    Writes w;
    for (size_t i = start; i < std::min(old.size(), start + kDeleteBatch); ++i) {
      s.kvs[old[i].key] = old[i];
      w.Delete(old[i].key);
      w.Delete(keys_.prefix() + "cp/" + old[i].key.substr(keys_.prefix().size() + 5));
    }
    Result<EtcdKv::Committed> c = kv_.Commit(s, w);
    if (!c.ok()) return c.status();
  }
  return Status::Ok();
}

}  // namespace gnomon::coord::etcd
