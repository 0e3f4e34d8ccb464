// The job schema: every key of a job definition, written once. Whatever reads or writes a
// definition goes through this table: the JSON reader and writer (src/server/job_json.cc), the
// jobs-file reader (src/server/jobs_file.cc turns each TOML value into JSON and reads it here),
// the OpenAPI document's JobSpec (src/server/openapi_document.cc), ValidateJobSpec's ranges, and
// the test that holds docs/configuration.md's key table and src/server/openapi.json to it
// (job_schema_test). A new key is one entry here plus its JobSpec member and a line of docs.
#ifndef GNOMON_SRC_JOB_JOB_SCHEMA_H_
#define GNOMON_SRC_JOB_JOB_SCHEMA_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon {

struct JobKey {
  std::string_view name;
  // The value's type as docs/configuration.md names it ("string", "integer", "duration", ...).
  std::string_view type;
  // The inclusive range of an integer key, or of a duration key in milliseconds, that
  // ValidateJobSpec checks; min > max: none checked from here.
  int64_t min = 1;
  int64_t max = 0;
  // Reads the key's JSON value into `job`. InvalidArgument naming the key.
  Status (*read)(const nlohmann::json& value, JobSpec& job) = nullptr;
  // The key's value in `job`; null when it is not written (an executor the job does not use).
  nlohmann::json (*write)(const JobSpec& job) = nullptr;
  // The value's OpenAPI 3.0 schema.
  nlohmann::json (*schema)() = nullptr;
  // For a key with a range: the value it applies to (the integer, or the duration in ms).
  int64_t (*number)(const JobSpec& job) = nullptr;
};

// Every key, in the order of docs/configuration.md's table.
std::span<const JobKey> JobKeys();
// The key named `name`, or nullptr.
const JobKey* FindJobKey(std::string_view name);
// The names of JobKeys(), for "did you mean" hints.
std::vector<std::string_view> JobKeyNames();

// Every key of `job` (executors it does not use left out).
nlohmann::json WriteJobKeys(const JobSpec& job);
// The OpenAPI schema of a definition (components.schemas.JobSpec): every key, no others but
// `version` (PUT only).
nlohmann::json JobSpecSchema();
// The ranges of the integer and duration keys, for ValidateJobSpec: InvalidArgument naming the
// job and the key.
Status CheckJobKeyRanges(const JobSpec& job);

}  // namespace gnomon

#endif  // GNOMON_SRC_JOB_JOB_SCHEMA_H_
