#include "src/coord/memory/memory_definitions.h"

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::memory {

Result<JobState> MemoryDefinitions::GetJobState(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.jobs.find(job_id);
  if (it == s_.jobs.end()) return JobState{};
  return it->second.state;
}

Status MemoryDefinitions::SetPaused(const std::string& job_id, bool paused,
                                    const std::string& reason) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("set paused: invalid job id");
  std::lock_guard<std::mutex> lock(s_.mu);
  JobState& state = s_.jobs[job_id].state;
  state.paused = paused;
  state.pause_reason = paused ? reason : "";
  ++s_.jobs_version;
  s_.jobs_changed.notify_all();
  return Status::Ok();
}

Result<int64_t> MemoryDefinitions::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.definitions.find(job_id);
  if (it == s_.definitions.end() && expected_version != 0) {
    return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                   std::to_string(expected_version) + ")");
  }
  if (it != s_.definitions.end() && expected_version == 0) {
    return AlreadyExistsError("job " + job_id + " already exists");
  }
  if (it != s_.definitions.end() && it->second.version != expected_version) {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   std::to_string(it->second.version) + ", not " +
                                   std::to_string(expected_version));
  }
  const int64_t version = ++s_.jobs_version;
  s_.jobs_changed.notify_all();
  s_.definitions[job_id] = StoredJob{job_id, definition, version};
  return version;
}

Status MemoryDefinitions::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.definitions.find(job_id);
  if (it == s_.definitions.end()) return NotFoundError("job " + job_id + " does not exist");
  if (expected_version != -1 && it->second.version != expected_version) {
    return FailedPreconditionError("job " + job_id + " is at version " +
                                   std::to_string(it->second.version) + ", not " +
                                   std::to_string(expected_version));
  }
  s_.definitions.erase(it);
  ++s_.jobs_version;
  s_.jobs_changed.notify_all();
  return Status::Ok();
}

Result<StoredJob> MemoryDefinitions::GetJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(s_.mu);
  auto it = s_.definitions.find(job_id);
  if (it == s_.definitions.end()) return coord::JobNotFound(job_id);
  return it->second;
}

Result<std::vector<StoredJob>> MemoryDefinitions::ListJobs() {
  std::lock_guard<std::mutex> lock(s_.mu);
  std::vector<StoredJob> out;
  for (const auto& [id, job] : s_.definitions) out.push_back(job);
  return out;
}

Result<int64_t> MemoryDefinitions::JobsVersion() {
  std::lock_guard<std::mutex> lock(s_.mu);
  return s_.jobs_version;
}

// The timeout is real time (SystemClock), not the backend clock: see the header.
Result<int64_t> MemoryDefinitions::WaitJobsChange(int64_t since, Duration timeout) {
  std::unique_lock<std::mutex> lock(s_.mu);
  SystemClock::Get().WaitFor(lock, s_.jobs_changed, timeout,
                             [&] { return s_.jobs_version != since; });
  return s_.jobs_version;
}

}  // namespace gnomon::coord::memory
