#include "src/coord/redis/redis_run_history.h"

#include <algorithm>
#include <cstdio>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

}  // namespace

Result<RunPage> RedisRunHistory::ListRuns(const RunQuery& query) {
  Result<int> limit = coord::PageLimit(query.limit);
  if (!limit.ok()) return limit.status();
  Result<std::optional<coord::RunPosition>> page_start = coord::PageStart(query.cursor);
  if (!page_start.ok()) return page_start.status();
  const std::optional<coord::RunPosition> after = *page_start;
  RunPage page;
  if (!query.job_id.empty() && !IsValidJobId(query.job_id)) return page;
  // Start after the cursor, or at the first instant before scheduled_until, whichever is later
  // in listing order (members sort in listing order).
  std::string start = "-";
  if (after) start = "(" + Member(*after);
  if (query.scheduled_until) {
    const int64_t last_ms = query.scheduled_until->unix_millis() - 1;
    if (last_ms < -kMaxAbsMillis) return page;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%016lld",
                  static_cast<long long>(kInvertBase - std::min(last_ms, kMaxAbsMillis)));
    if (start == "-" || std::string_view(start).substr(1) < std::string_view(buf)) {
      start = std::string("[") + buf;
    }
  }
  std::string from;
  if (query.scheduled_from) {
    from = std::to_string(
        std::clamp(query.scheduled_from->unix_millis(), -kMaxAbsMillis - 1, kMaxAbsMillis + 1));
  }
  const std::string outcome = query.outcome ? std::string(ToString(*query.outcome)) : "";
  Result<RedisReply> r = Result<RedisReply>(RedisReply{});
  if (query.job_id.empty() && store_.cluster()) {
    r = ListAllRuns(start, outcome, from, *limit + 1);
  } else {
    const std::string index =
        query.job_id.empty() ? store_.shared() + ":runs" : store_.JobBase(query.job_id) + ":runs";
    std::vector<std::string> args =
        scripts::ArgList(scripts::ArgNames(scripts::kListRuns), store_.CommonArgs())
            .Add("start", start)
            .Add("outcome", outcome)
            .Add("from_ms", from)
            .Add("count", std::to_string(*limit + 1))
            .Take();
    r = store_.Eval(
        scripts::kListRuns,
        {index, query.job_id.empty() ? store_.shared() : store_.IndexBase(query.job_id)}, args);
  }
  if (!r.ok()) return r.status();
  Result<std::vector<RunRecord>> runs = DecodeRecords(*r, "list runs");
  if (!runs.ok()) return runs.status();
  page.runs = std::move(*runs);
  if (page.runs.size() > static_cast<size_t>(*limit)) {
    page.runs.resize(*limit);
    page.next_cursor = coord::EncodeCursor(coord::PositionOf(page.runs.back()));
  }
  return page;
}

// What kListRuns does on one primary, where a record's keys and the listing share a server: the
// listing (shared slot) is read 256 members at a time, and each member's record from its job's
// key group. Members whose record is gone (trimmed under its job) are passed over.
Result<RedisReply> RedisRunHistory::ListAllRuns(std::string start, const std::string& outcome,
                                                const std::string& from_ms, int want) {
  int64_t from = 0;
  const bool has_from = !from_ms.empty() && ParseInt(from_ms, from);
  RedisReply out;
  out.type = RedisReply::Type::kArray;
  out.elements.push_back(RedisReply{RedisReply::Type::kString, "OK"});
  const std::string listing = store_.shared() + ":runs";
  int n = 0;
  while (n < want) {
    Result<RedisReply> batch =
        store_.Command(store_.shared(), {"ZRANGEBYLEX", listing, start, "+", "LIMIT", "0", "256"});
    if (!batch.ok()) return batch.status();
    if (batch->type != RedisReply::Type::kArray) return Malformed("list runs");
    if (batch->elements.empty()) break;
    for (const RedisReply& m : batch->elements) {
      const std::optional<MemberParts> parts = ParseMember(m.str);
      if (!parts) return Malformed("history listing");
      if (has_from && parts->scheduled_ms < from) return out;
      Result<std::optional<std::string>> rec = RecordAt(m.str, *parts);
      if (!rec.ok()) return rec.status();
      bool match = rec->has_value();
      if (match && !outcome.empty()) match = (*rec)->starts_with(outcome + "\n");
      if (!match) continue;
      out.elements.push_back(m);
      out.elements.push_back(RedisReply{RedisReply::Type::kString, std::move(**rec)});
      if (++n >= want) return out;
    }
    start = "(" + batch->elements.back().str;
  }
  return out;
}

// What record_at does in the scripts: the member's record field of its job's hash, else, while
// its attempt runs, the running record its fire's marker makes (markers: redis_script_helpers.cc
// marker_of).
Result<std::optional<std::string>> RedisRunHistory::RecordAt(const std::string& member,
                                                             const MemberParts& parts) {
  const std::string jb = store_.JobBase(parts.job);
  Result<RedisReply> rec = store_.Command(jb, {"HGET", jb, "r:" + member});
  if (!rec.ok()) return rec.status();
  if (rec->type == RedisReply::Type::kString) return std::optional<std::string>(rec->str);
  if (rec->type != RedisReply::Type::kNil) return Malformed("history record");
  Result<RedisReply> marker =
      store_.Command(jb, {"HGET", jb, "m:" + FireId(parts.scheduled_ms, parts.shard)});
  if (!marker.ok()) return marker.status();
  if (marker->type == RedisReply::Type::kNil) return std::optional<std::string>();
  if (marker->type != RedisReply::Type::kString) return Malformed("fire marker");
  std::optional<FireMarker> mk = ParseMarker(marker->str);
  if (!mk) return Malformed("fire marker");
  if (!mk->open || mk->attempt != parts.attempt) return std::optional<std::string>();
  return std::optional<std::string>(RunningRecord(*mk));
}

Result<std::vector<RunRecord>> RedisRunHistory::GetRun(const std::string& run_id) {
  auto not_found = [&] { return NotFoundError("run " + run_id.substr(0, 200) + " has no record"); };
  // "<job>@<ms>[#<shard>]"
  size_t at = run_id.rfind('@');
  if (at == std::string::npos) return not_found();
  const std::string job = run_id.substr(0, at);
  std::string_view rest = std::string_view(run_id).substr(at + 1);
  int64_t ms = 0, shard = 0;
  size_t hash = rest.find('#');
  if (!IsValidJobId(job) || !ParseInt(rest.substr(0, hash), ms) || ms > kMaxAbsMillis ||
      ms < -kMaxAbsMillis ||
      (hash != std::string_view::npos &&
       (!ParseInt(rest.substr(hash + 1), shard) || shard < 0 || shard > INT32_MAX))) {
    return not_found();
  }
  std::vector<std::string> args =
      scripts::ArgList(scripts::ArgNames(scripts::kGetRun), store_.CommonArgs())
          .Add("member_prefix", MemberPrefix(ms, job, static_cast<int>(shard)))
          .Take();
  Result<RedisReply> r =
      store_.Eval(scripts::kGetRun, {store_.JobBase(job), store_.IndexBase(job)}, args);
  if (!r.ok()) return r.status();
  Result<std::vector<RunRecord>> runs = DecodeRecords(*r, "get run");
  if (!runs.ok()) return runs.status();
  std::vector<RunRecord> out;
  for (RunRecord& rec : *runs) {
    if (rec.run_id == run_id) out.push_back(std::move(rec));
  }
  if (out.empty()) return not_found();
  std::reverse(out.begin(), out.end());
  return out;
}

Status RedisRunHistory::PruneHistory(const std::string& job_id, int keep_last, Duration max_age) {
  return PruneHistoryMany({PruneRequest{job_id, keep_last, max_age}})[0];
}

std::vector<Status> RedisRunHistory::PruneHistoryMany(const std::vector<PruneRequest>& reqs) {
  std::vector<Status> out(reqs.size(), InternalError("redis: not pruned"));
  auto args = [&](size_t i) -> Result<std::vector<std::string>> {
    const PruneRequest& r = reqs[i];
    if (r.keep_last < 1) return InvalidArgumentError("prune: keep_last must be at least 1");
    if (r.max_age <= Duration(0)) return InvalidArgumentError("prune: max_age must be positive");
    if (!IsValidJobId(r.job_id)) return InvalidArgumentError("prune: invalid job id");
    return scripts::ArgList(scripts::kPruneItem)
        .Add("job", r.job_id)
        .Add("group", std::to_string(redis::KeyGroup(r.job_id)))
        .Add("keep_last", std::to_string(r.keep_last))
        .Add("max_age_ms", Ms(std::min(r.max_age, kMaxConfigDuration)))
        .Take();
  };
  auto send = [&](const RedisStore::BatchItems& items) {
    return store_.EvalBatch(items, [&](const RedisStore::BatchItems& part, const std::string& ib) {
      return store_.Eval(scripts::kPruneMany, {ib, ib},
                         store_.BatchArgs(scripts::kPruneMany, part));
    });
  };
  auto parse = [](size_t, const RedisReply& e) -> Status {
    if (e.str != "OK") return Malformed("prune");
    return Status::Ok();
  };
  SendInChunks(out, kPruneChunk, "prune batch", args, send, parse);
  return out;
}

}  // namespace gnomon::coord
