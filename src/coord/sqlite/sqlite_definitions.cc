#include "src/coord/sqlite/sqlite_definitions.h"

#include <mutex>

#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_db.h"

namespace gnomon::coord {

using sqlite::Statement;

namespace {

// The version of `job_id`'s stored definition; nullopt when there is none.
Result<std::optional<int64_t>> StoredVersion(sqlite::Connection& conn, const std::string& job_id) {
  Result<Statement> s = conn.Prepare("SELECT version FROM jobs WHERE job_id = ?1");
  if (!s.ok()) return s.status();
  s->BindText(1, job_id);
  Result<bool> row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<int64_t>();
  return std::optional<int64_t>(s->Int(0));
}

}  // namespace

Result<int64_t> SqliteDefinitions::PutJob(const std::string& job_id, const std::string& definition,
                                          int64_t expected_version) {
  if (!IsValidJobId(job_id)) return InvalidArgumentError("put job: invalid job id");
  if (expected_version < 0) return InvalidArgumentError("put job: expected_version is negative");
  std::lock_guard<std::mutex> lock(store_.write_mu());
  int64_t version = 0;
  GNOMON_RETURN_IF_ERROR(store_.writer().conn().Transaction([&]() -> Status {
    Result<std::optional<int64_t>> stored = StoredVersion(store_.writer().conn(), job_id);
    if (!stored.ok()) return stored.status();
    const std::optional<int64_t> current = *stored;
    if (!current && expected_version != 0) {
      return FailedPreconditionError("job " + job_id + " does not exist (expected version " +
                                     std::to_string(expected_version) + ")");
    }
    if (current && expected_version == 0) {
      return AlreadyExistsError("job " + job_id + " already exists");
    }
    if (current && *current != expected_version) {
      return FailedPreconditionError("job " + job_id + " is at version " +
                                     std::to_string(*current) + ", not " +
                                     std::to_string(expected_version));
    }
    // Versions come from the global jobs counter, so a re-created job never reuses one.
    Result<int64_t> next = store_.writer().BumpJobsVersion();
    if (!next.ok()) return next.status();
    version = *next;
    Result<Statement> s = store_.writer().conn().Prepare(
        "INSERT OR REPLACE INTO jobs (job_id, definition, version) VALUES (?1, ?2, ?3)");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id).BindBlob(2, definition).Bind(3, version);
    return s->Run();
  }));
  return version;
}

Status SqliteDefinitions::DeleteJob(const std::string& job_id, int64_t expected_version) {
  if (expected_version < -1) return InvalidArgumentError("delete job: expected_version < -1");
  std::lock_guard<std::mutex> lock(store_.write_mu());
  return store_.writer().conn().Transaction([&]() -> Status {
    Result<std::optional<int64_t>> stored = StoredVersion(store_.writer().conn(), job_id);
    if (!stored.ok()) return stored.status();
    const std::optional<int64_t> current = *stored;
    if (!current) return NotFoundError("job " + job_id + " does not exist");
    if (expected_version != -1 && *current != expected_version) {
      return FailedPreconditionError("job " + job_id + " is at version " +
                                     std::to_string(*current) + ", not " +
                                     std::to_string(expected_version));
    }
    {
      Result<Statement> s = store_.writer().conn().Prepare("DELETE FROM jobs WHERE job_id = ?1");
      if (!s.ok()) return s.status();
      s->BindText(1, job_id);
      GNOMON_RETURN_IF_ERROR(s->Run());
    }
    return store_.writer().BumpJobsVersion().status();
  });
}

Result<StoredJob> SqliteDefinitions::GetJob(const std::string& job_id) {
  std::optional<StoredJob> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT job_id, definition, version FROM jobs WHERE job_id = ?1");
    if (!s.ok()) return s.status();
    s->BindText(1, job_id);
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (*row) out = StoredJob{s->Bytes(0), s->Bytes(1), s->Int(2)};
    return Status::Ok();
  }));
  if (!out) return coord::JobNotFound(job_id);
  return *out;
}

Result<std::vector<StoredJob>> SqliteDefinitions::ListJobs() {
  std::vector<StoredJob> out;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT job_id, definition, version FROM jobs ORDER BY job_id");
    if (!s.ok()) return s.status();
    for (;;) {
      Result<bool> row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return Status::Ok();
      out.push_back(StoredJob{s->Bytes(0), s->Bytes(1), s->Int(2)});
    }
  }));
  return out;
}

Result<int64_t> SqliteDefinitions::JobsVersion() {
  int64_t version = 0;
  GNOMON_RETURN_IF_ERROR(store_.Read([&](SqliteDb& db) -> Status {
    Result<Statement> s =
        db.conn().Prepare("SELECT value FROM counters WHERE name = 'jobs_version'");
    if (!s.ok()) return s.status();
    Result<bool> row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) return InternalError("sqlite " + db.conn().path() + ": jobs_version row missing");
    version = s->Int(0);
    return Status::Ok();
  }));
  return version;
}

}  // namespace gnomon::coord
