#include "src/coord/redis/redis_fires.h"

#include <algorithm>
#include <map>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

// An HMGET of a job's state fields: paused reason fails last.
JobState JobStateOf(const RedisReply& r) {
  JobState state;
  state.paused = r.elements[0].str == "1";
  state.pause_reason = r.elements[1].str;
  int64_t fails = 0, last = 0;
  if (IntAt(r, 2, fails)) state.consecutive_failures = static_cast<int>(fails);
  if (IntAt(r, 3, last)) state.last_scheduled = Instant::FromUnixMillis(last);
  return state;
}

}  // namespace

Result<JobState> RedisFires::GetJobState(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return JobState{};
  Result<RedisReply> r =
      store_.Command(store_.JobBase(job_id),
                     {"HMGET", store_.JobBase(job_id), "paused", "reason", "fails", "last"});
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 4)) return Malformed("job state");
  return JobStateOf(*r);
}

Result<std::vector<JobState>> RedisFires::GetJobStates(const std::vector<std::string>& job_ids) {
  constexpr size_t kChunk = 512;
  std::vector<JobState> out;
  out.reserve(job_ids.size());
  for (size_t from = 0; from < job_ids.size(); from += kChunk) {
    const size_t to = std::min(job_ids.size(), from + kChunk);
    std::vector<std::vector<std::string>> items;
    for (size_t i = from; i < to; ++i) {
      if (IsValidJobId(job_ids[i])) items.push_back({job_ids[i]});
    }
    RedisStore::BatchItems ptrs;
    for (const std::vector<std::string>& item : items) ptrs.push_back(&item);
    Result<RedisReply> r =
        items.empty() ? Result<RedisReply>(RedisReply{RedisReply::Type::kArray})
                      : store_.EvalBatch(
                            ptrs, [&](const RedisStore::BatchItems& part, const std::string& ib) {
                              scripts::ArgList args(scripts::ArgNames(scripts::kGetJobStates),
                                                    store_.CommonArgs());
                              for (const auto* item : part) args.Add("jobs...", item->front());
                              return store_.Eval(scripts::kGetJobStates, {ib, ib}, args.Take());
                            });
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray) return Malformed("job states");
    size_t k = 0;
    for (size_t i = from; i < to; ++i) {
      if (!IsValidJobId(job_ids[i])) {
        out.emplace_back();  // an invalid id has no state, as in GetJobState
        continue;
      }
      if (k >= r->elements.size()) return Malformed("job states");
      const RedisReply& e = r->elements[k++];
      if (e.is_error()) return ErrorOf(e);
      if (!IsArray(e, 4)) return Malformed("job states");
      out.push_back(JobStateOf(e));
    }
  }
  return out;
}

Status RedisFires::SetPaused(const std::string& job_id, bool paused, const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kSetPaused), store_.CommonArgs())
          .Add("paused", paused ? "1" : "0")
          .Add("reason", reason)
          .Take();
  Result<RedisReply> r =
      store_.Eval(scripts::kSetPaused, {store_.JobBase(job_id), store_.IndexBase(job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK") return Malformed("set paused");
  return BumpJobsVersion();
}

Status RedisFires::BumpJobsVersion() {
  if (!store_.cluster()) return Status::Ok();  // the script did
  Result<RedisReply> r = store_.Eval(scripts::kBumpJobsVersion, {store_.shared(), store_.shared()},
                                     store_.CommonArgs());
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 2) || Word(*r) != "OK") return Malformed("jobs version");
  return Status::Ok();
}

Result<std::vector<ExpiredFire>> RedisFires::ListExpired(int limit) {
  Result<int> page = coord::PageLimit(limit);
  if (!page.ok()) return page.status();
  std::vector<ExpiredFire> out;
  if (!store_.cluster()) {
    GNOMON_RETURN_IF_ERROR(ListExpiredIn(store_.shared(), *page, out));
    return out;
  }
  // Under a Cluster each key group has its own lease index: the scan takes the oldest `page`
  // of each and keeps the oldest `page` of them all, in the order one index would list them
  // (lease end, then member "<job> <ms>:<shard>"), with one call per primary over its groups.
  // It also sweeps each group's runs_new of members a failed copy left
  // (RedisStore::SweepNewRuns, one more call per primary). A primary that does not answer is
  // passed over (the next pass scans it again), so that one unreachable primary does not hold
  // back the recovery of the others' fires; only a pass that reaches no primary fails.
  Result<Instant> now = store_.Now();  // the shared slot's primary: without it, no sweep
  Status failed;
  size_t failures = 0;
  const std::vector<std::vector<int>> parts = store_.GroupsByPrimary();
  const std::string base = store_.options().prefix + ":" + store_.options().ns;
  for (const std::vector<int>& groups : parts) {
    const Status listed = ListExpiredIn(redis::GroupBase(base, groups.front()), *page, out, groups);
    if (!listed.ok()) {
      if (failures++ == 0) failed = listed;
      continue;
    }
    if (now.ok()) (void)store_.SweepNewRuns(groups, *now - kSweepAge + Duration(1));
  }
  if (failures == parts.size()) return failed;
  auto member = [](const ExpiredFire& e) {
    return e.fire.job_id + " " + FireId(e.fire.scheduled_at.unix_millis(), e.fire.shard);
  };
  std::sort(out.begin(), out.end(), [&](const ExpiredFire& a, const ExpiredFire& b) {
    if (a.lease_expired_at != b.lease_expired_at) return a.lease_expired_at < b.lease_expired_at;
    return member(a) < member(b);
  });
  if (out.size() > static_cast<size_t>(*page)) out.resize(*page);
  return out;
}

Status RedisFires::ListExpiredIn(const std::string& index_base, int limit,
                                 std::vector<ExpiredFire>& out, const std::vector<int>& groups) {
  scripts::ArgList args(scripts::ArgNames(scripts::kListExpired), store_.CommonArgs());
  args.Add("limit", std::to_string(limit));
  for (int group : groups) args.Add("groups...", std::to_string(group));
  Result<RedisReply> r = store_.Eval(scripts::kListExpired, {index_base, index_base}, args.Take());
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1) || Word(*r) != "OK" || (r->elements.size() - 1) % 8 != 0) {
    return Malformed("list expired");
  }
  for (size_t i = 1; i + 7 < r->elements.size(); i += 8) {
    int64_t ms = 0, shard = 0, count = 0, attempt = 0, token = 0, lease = 0;
    if (!IntAt(*r, i + 1, ms) || !IntAt(*r, i + 2, shard) || !IntAt(*r, i + 3, count) ||
        !IntAt(*r, i + 4, attempt) || !IntAt(*r, i + 5, token) || !IntAt(*r, i + 7, lease)) {
      return Malformed("list expired");
    }
    ExpiredFire e;
    e.fire.job_id = r->elements[i].str;
    e.fire.scheduled_at = Instant::FromUnixMillis(ms);
    e.fire.shard = static_cast<int>(shard);
    e.fire.shard_count = static_cast<int>(count);
    e.attempt = static_cast<int>(attempt);
    e.fencing_token = token;
    e.node_id = r->elements[i + 6].str;
    e.lease_expired_at = Instant::FromUnixMillis(lease);
    out.push_back(std::move(e));
  }
  return Status::Ok();
}

Result<std::optional<gnomon::Claim>> RedisFires::ResolveLost(const ExpiredFire& expired,
                                                             const std::string& node_id,
                                                             LostPolicy policy, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(expired.fire));
  GNOMON_RETURN_IF_ERROR(coord::ValidateResolveLost(expired, node_id, policy, ttl));
  const FireKey& fire = expired.fire;
  std::vector<std::string> args =
      FireArgs(scripts::kResolveLost, fire, store_.CommonArgs())
          .Add("token", std::to_string(expired.fencing_token))
          .Add("policy", policy == LostPolicy::kFail ? "fail" : "rerun")
          .Add("node", node_id)
          .Add("ttl_ms", Ms(policy == LostPolicy::kRerun ? ttl : Duration(0)))
          .Take();
  Result<RedisReply> r = store_.Eval(
      scripts::kResolveLost, {store_.JobBase(fire.job_id), store_.IndexBase(fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("resolve lost");
  if (Word(*r) == "NOTFOUND") return NotFoundError("fire " + fire.RunId() + " has no record");
  if (Word(*r) == "PRECOND") {
    return FailedPreconditionError("fire " + fire.RunId() + " (token " +
                                   std::to_string(expired.fencing_token) +
                                   ") was resolved, renewed or taken over meanwhile");
  }
  if (Word(*r) != "OK") return Malformed("resolve lost");
  if (policy == LostPolicy::kFail) return std::optional<gnomon::Claim>();
  int64_t attempt = 0, token = 0, lease = 0;
  if (!IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("resolve lost");
  }
  return std::optional<gnomon::Claim>(gnomon::Claim{fire, static_cast<int>(attempt), token, node_id,
                                                    Instant::FromUnixMillis(lease)});
}

Status RedisFires::RecordSkipped(const FireKey& fire, const std::string& node_id,
                                 const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(fire));
  std::vector<std::string> args = FireArgs(scripts::kRecordSkipped, fire, store_.CommonArgs())
                                      .Add("shard_count", std::to_string(fire.shard_count))
                                      .Add("node", node_id)
                                      .Add("reason", reason)
                                      .Take();
  Result<RedisReply> r = store_.Eval(
      scripts::kRecordSkipped, {store_.JobBase(fire.job_id), store_.IndexBase(fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("record skipped");
  if (Word(*r) == "EXISTS")
    return AlreadyExistsError("fire " + fire.RunId() + " already has a record");
  if (Word(*r) != "OK") return Malformed("record skipped");
  return Status::Ok();
}

Status RedisFires::SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) {
  return SaveFenced(scripts::kSaveCheckpoint, claim, value, "save checkpoint");
}

Status RedisFires::SaveFenced(int script, const gnomon::Claim& claim, const std::string& value,
                              const char* what) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  const std::span<const std::string_view> names =
      scripts::ArgNames(static_cast<scripts::Id>(script));
  scripts::ArgList list(names, store_.CommonArgs());
  if (names.front() == "job") list.Add("job", claim.fire.job_id);  // live output names its record
  std::vector<std::string> args = list.Add("ms", Ms(claim.fire.scheduled_at))
                                      .Add("shard", std::to_string(claim.fire.shard))
                                      .Add("token", std::to_string(claim.fencing_token))
                                      .Add("value", value)
                                      .Take();
  Result<RedisReply> r =
      store_.Eval(static_cast<scripts::Id>(script),
                  {store_.JobBase(claim.fire.job_id), store_.IndexBase(claim.fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed(what);
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  if (Word(*r) != "OK") return Malformed(what);
  return Status::Ok();
}

Status RedisFires::SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) {
  return SaveFenced(scripts::kSaveLiveOutput, claim, coord::TruncateOutput(output),
                    "save live output");
}

Result<std::optional<std::string>> RedisFires::LoadCheckpoint(const FireKey& fire) {
  GNOMON_RETURN_IF_ERROR(ValidateFire(fire));
  Result<RedisReply> r = store_.Command(
      store_.JobBase(fire.job_id), {"HGET", store_.JobBase(fire.job_id),
                                    "cp:" + FireId(fire.scheduled_at.unix_millis(), fire.shard)});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return std::optional<std::string>();
  if (r->type != RedisReply::Type::kString) return Malformed("load checkpoint");
  return std::optional<std::string>(std::move(r->str));
}

Status RedisFires::CancelFire(const FireKey& fire, const std::string& reason) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::vector<std::string> args =
      FireArgs(scripts::kCancelFire, fire, store_.CommonArgs()).Add("reason", reason).Take();
  Result<RedisReply> r = store_.Eval(
      scripts::kCancelFire, {store_.JobBase(fire.job_id), store_.IndexBase(fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("cancel");
  if (Word(*r) == "NOTFOUND") return coord::NoSuchFire(fire);
  if (Word(*r) == "PRECOND") return coord::FireEnded(fire);
  if (Word(*r) != "OK") return Malformed("cancel");
  return BumpJobsVersion();
}

Result<gnomon::Claim> RedisFires::RerunFire(const FireKey& fire, const std::string& node_id,
                                            Duration ttl, const std::string& cause) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateRerun(fire, node_id, ttl, cause));
  std::vector<std::string> args = FireArgs(scripts::kRerunFire, fire, store_.CommonArgs())
                                      .Add("ttl_ms", Ms(ttl))
                                      .Add("node", node_id)
                                      .Add("cause", cause)
                                      .Take();
  Result<RedisReply> r = store_.Eval(
      scripts::kRerunFire, {store_.JobBase(fire.job_id), store_.IndexBase(fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("rerun");
  if (Word(*r) == "NOTFOUND") return coord::NoSuchFire(fire);
  if (Word(*r) == "PRECOND") return coord::FireNotEnded(fire);
  int64_t attempt = 0, token = 0, lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("rerun");
  }
  return gnomon::Claim{fire,    static_cast<int>(attempt),      token,
                       node_id, Instant::FromUnixMillis(lease), cause};
}

Result<std::vector<bool>> RedisFires::FiresRecorded(const std::vector<FireKey>& fires) {
  for (const FireKey& fire : fires) GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  std::vector<bool> out;
  out.reserve(fires.size());
  // Bounded script calls: a takeover batch may be large. Under a Cluster, one call per primary
  // (RedisStore::EvalBatch).
  constexpr size_t kBatch = 512;
  for (size_t from = 0; from < fires.size(); from += kBatch) {
    const size_t to = std::min(fires.size(), from + kBatch);
    std::vector<std::vector<std::string>> items;
    for (size_t i = from; i < to; ++i) {
      items.push_back({fires[i].job_id, Ms(fires[i].scheduled_at), std::to_string(fires[i].shard)});
    }
    RedisStore::BatchItems ptrs;
    for (const std::vector<std::string>& item : items) ptrs.push_back(&item);
    Result<RedisReply> r = store_.EvalBatch(
        ptrs, [&](const RedisStore::BatchItems& part, const std::string& ib) -> Result<RedisReply> {
          scripts::ArgList args(scripts::ArgNames(scripts::kFiresRecorded), store_.CommonArgs());
          for (const auto* item : part) {
            for (const std::string& arg : *item) args.Add("fires...", arg);
          }
          Result<RedisReply> answer = store_.Eval(scripts::kFiresRecorded, {ib, ib}, args.Take());
          if (!answer.ok() || answer->is_error()) return answer;
          // "OK" first, then one element per fire: the batch's reply is the elements.
          if (!IsArray(*answer, 1) || Word(*answer) != "OK") return Malformed("fires recorded");
          answer->elements.erase(answer->elements.begin());
          return answer;
        });
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray || r->elements.size() != to - from) {
      return Malformed("fires recorded");
    }
    for (const RedisReply& e : r->elements) {
      if (e.is_error()) return ErrorOf(e);
      out.push_back(e.integer != 0);
    }
  }
  return out;
}

}  // namespace gnomon::coord
