#include "src/coord/redis/redis_definitions.h"

#include <algorithm>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

// A definition as stored in B:jobs: "<version>\n<definition>". Malformed("job") otherwise.
Result<StoredJob> StoredJobOf(const std::string& job_id, std::string_view stored) {
  const size_t nl = stored.find('\n');
  int64_t version = 0;
  if (nl == std::string_view::npos || !ParseInt(stored.substr(0, nl), version)) {
    return Malformed("job");
  }
  return StoredJob{job_id, std::string(stored.substr(nl + 1)), version};
}

}  // namespace

Result<int64_t> RedisDefinitions::PutJob(const std::string& job_id, const std::string& definition,
                                         int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::vector<std::string> args = store_.CommonArgs();
  args.insert(args.end(), {job_id, definition, std::to_string(expected_version)});
  Result<RedisReply> r = store_.Eval(scripts::kPutJob, {store_.shared(), store_.shared()}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("put job");
  if (Word(*r) == "EXISTS") return AlreadyExistsError("job " + job_id + " already exists");
  if (Word(*r) == "PRECOND") {
    const std::string current = r->elements.size() > 1 ? r->elements[1].str : "";
    if (current.empty()) {
      return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                     std::to_string(expected_version) + ")");
    }
    return FailedPreconditionError("job " + job_id + " is at version " + current + ", not " +
                                   std::to_string(expected_version));
  }
  int64_t version = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, version)) return Malformed("put job");
  return version;
}

Status RedisDefinitions::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  if (!IsValidJobId(job_id))
    return NotFoundError("job " + job_id.substr(0, 128) + " does not exist");
  std::vector<std::string> args = store_.CommonArgs();
  args.insert(args.end(), {job_id, std::to_string(expected_version)});
  Result<RedisReply> r = store_.Eval(scripts::kDeleteJob, {store_.shared(), store_.shared()}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("delete job");
  if (Word(*r) == "NOTFOUND") return NotFoundError("job " + job_id + " does not exist");
  if (Word(*r) == "PRECOND") {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   (r->elements.size() > 1 ? r->elements[1].str : "?") + ", not " +
                                   std::to_string(expected_version));
  }
  if (Word(*r) != "OK") return Malformed("delete job");
  return Status::Ok();
}

Result<StoredJob> RedisDefinitions::GetJob(const std::string& job_id) {
  if (!IsValidJobId(job_id)) return coord::JobNotFound(job_id);
  Result<RedisReply> r =
      store_.Command(store_.shared(), {"HGET", store_.shared() + ":jobs", job_id});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return coord::JobNotFound(job_id);
  if (r->type != RedisReply::Type::kString) return Malformed("get job");
  Result<StoredJob> job = StoredJobOf(job_id, r->str);
  if (!job.ok()) return Malformed("get job");
  return *job;
}

Result<std::vector<StoredJob>> RedisDefinitions::ListJobs() {
  Result<RedisReply> r = store_.Command(store_.shared(), {"HGETALL", store_.shared() + ":jobs"});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kArray || r->elements.size() % 2 != 0) {
    return Malformed("list jobs");
  }
  std::vector<StoredJob> out;
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    Result<StoredJob> job = StoredJobOf(r->elements[i].str, r->elements[i + 1].str);
    if (!job.ok()) return Malformed("list jobs");
    out.push_back(std::move(*job));
  }
  std::sort(out.begin(), out.end(),
            [](const StoredJob& a, const StoredJob& b) { return a.job_id < b.job_id; });
  return out;
}

Result<int64_t> RedisDefinitions::JobsVersion() {
  Result<RedisReply> r =
      store_.Command(store_.shared(), {"HGET", store_.shared() + ":meta", "jobs_version"});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kNil) return int64_t{0};
  int64_t v = 0;
  if (r->type != RedisReply::Type::kString || !ParseInt(r->str, v))
    return Malformed("jobs version");
  return v;
}

// The subscriber connection is made on first use and kept; while it cannot be had (server down,
// backoff), this falls back to polling, so a waiter never misses a change for long. Under a
// Cluster the events go on a sharded channel (SPUBLISH), which only the primary of its slot (the
// shared slot's) delivers: the subscriber connects there (SSUBSCRIBE), and is made anew, at the
// slot's owner then, after any failure (a failover, or the slot moved: SUNSUBSCRIBE).
Result<int64_t> RedisDefinitions::WaitJobsChange(int64_t since, Duration timeout,
                                                 const PollFn& poll) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  const std::string channel = store_.shared() + ":events";
  const bool sharded = store_.cluster();
  if (subscriber_ == nullptr) {
    const std::optional<RedisConnectionConfig> config = store_.ConfigFor(store_.shared());
    if (!config) return poll(since, timeout);
    Result<std::unique_ptr<RedisConnection>> sub = RedisConnection::Connect(*config);
    if (!sub.ok()) return poll(since, timeout);
    subscriber_ = std::move(*sub);
  }
  auto wait = [&](Duration d) {
    const bool ok = subscriber_->WaitMessage(channel, d, sharded).ok();
    if (!ok && sharded) subscriber_.reset();
    return ok;
  };
  // Subscribed (and pending messages consumed) before the version is read: a change after the
  // read is then a message the wait below receives.
  if (!wait(Duration(0))) return poll(since, timeout);
  Result<int64_t> v = JobsVersion();
  if (!v.ok() || *v != since) return v;
  if (!wait(timeout)) return poll(since, timeout);
  return JobsVersion();
}

}  // namespace gnomon::coord
