// The job schema: every key of a job definition, written once. Whatever reads or writes a
// definition goes through this table: the JSON reader and writer (src/server/job_json.cc), the
// jobs-file reader (src/server/jobs_file.cc turns each TOML value into JSON and reads it here),
// the OpenAPI document's JobSpec (src/server/openapi_document.cc), ValidateJobSpec's ranges, and
// the test that holds docs/configuration.md's key table and src/server/openapi.json to it
// (job_schema_test). A new key is one entry here plus its JobSpec member and a line of docs.
#ifndef GNOMON_SRC_JOB_JOB_SCHEMA_H_
#define GNOMON_SRC_JOB_JOB_SCHEMA_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon {

// A value of a definition being read, in the format it was written in (a JSON body, a TOML
// file): what the schema's readers need to check its type and read it, and to fail with a
// message in that format's words, placed where the value is.
class KeyValue {
 public:
  enum class Kind { kString, kInteger, kFloat, kBool, kArray, kMap, kOther };
  virtual ~KeyValue() = default;
  virtual Kind kind() const = 0;
  // The value's type in its format's words (JSON: "number", "object"; TOML: "float", "table").
  virtual std::string type_name() const = 0;
  // A map in its format's words, with an article: "an object" (JSON), "a table" (TOML).
  virtual std::string_view map_word() const = 0;
  virtual std::string text() const = 0;                // REQUIRES: kString
  virtual std::optional<int64_t> integer() const = 0;  // REQUIRES: kInteger; nullopt: too large
  virtual bool boolean() const = 0;                    // REQUIRES: kBool
  // The elements of an array, the entries of a map (in the order written).
  virtual std::vector<std::unique_ptr<KeyValue>> items() const = 0;
  virtual std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> entries() const = 0;
  // The value as JSON (`params`); InvalidArgument (placed) for what JSON cannot hold.
  virtual Result<nlohmann::json> ToJson(std::string_view field) const = 0;
  // InvalidArgument "<field>: <what>", placed where the value is written (TOML: file and line).
  virtual Status Fail(std::string_view field, std::string_view what) const = 0;
};

// A KeyValue over a JSON value (which must outlive it).
class JsonKeyValue final : public KeyValue {
 public:
  explicit JsonKeyValue(const nlohmann::json& v) : v_(v) {}
  Kind kind() const override;
  std::string type_name() const override { return v_.type_name(); }
  std::string_view map_word() const override { return "an object"; }
  std::string text() const override { return v_.get<std::string>(); }
  std::optional<int64_t> integer() const override;
  bool boolean() const override { return v_.get<bool>(); }
  std::vector<std::unique_ptr<KeyValue>> items() const override;
  std::vector<std::pair<std::string, std::unique_ptr<KeyValue>>> entries() const override;
  Result<nlohmann::json> ToJson(std::string_view) const override { return v_; }
  Status Fail(std::string_view field, std::string_view what) const override;

 private:
  const nlohmann::json& v_;
};

struct JobKey {
  std::string_view name;
  // The value's type as docs/configuration.md names it ("string", "integer", "duration", ...).
  std::string_view type;
  // The inclusive range of an integer key, or of a duration key in milliseconds, that
  // ValidateJobSpec checks; min > max: none checked from here.
  int64_t min = 1;
  int64_t max = 0;
  // Reads the key's value into `job`. InvalidArgument naming the key (KeyValue::Fail).
  Status (*read)(const KeyValue& value, JobSpec& job) = nullptr;
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
