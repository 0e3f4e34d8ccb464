// JobSpec <-> JSON for the HTTP API, with the SAME keys and value grammar as the jobs file
// (docs/configuration.md "Jobs files", apps/gnomon/config.cc): durations are strings ("90s"),
// policies are lower-case names, `env` and `http.headers` are objects of strings.
//
// Hostile input (docs/reliability.md): ParseJsonBody rejects, before nlohmann's recursive
// parser runs, any document nested deeper than `max_depth`; it rejects duplicate object keys and
// invalid UTF-8; unknown keys and wrong types are errors that name the field ("retries: expected
// an integer, got string"). Every error is an InvalidArgument Status, never an exception.
// Functions here are pure and thread-safe.
#ifndef GNOMON_SRC_SERVER_JOB_JSON_H_
#define GNOMON_SRC_SERVER_JOB_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon::server {

// Deepest nesting of arrays/objects accepted in a request body. Default for ParseJsonBody.
inline constexpr int kMaxJsonDepth = 64;

// Scans `text` (without recursion, skipping string contents) and fails when arrays/objects nest
// deeper than `max_depth`. Does not otherwise validate the JSON.
Status CheckJsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses a request body: depth check, then nlohmann's parser without exceptions; duplicate keys
// in any object are rejected naming the key ("duplicate key \"retries\"").
Result<nlohmann::json> ParseJsonBody(std::string_view text, int max_depth = kMaxJsonDepth);

// Applies the job keys of `object` over `base` (usually the defaults) and returns the result.
// Not validated with ValidateJobSpec (the caller does that, after setting source etc.). An object
// that names an executor (command, argv or http) replaces the inherited one; `env` is replaced
// whole (unlike the jobs file's merge, a JSON definition is complete).
Result<JobSpec> JobSpecFromJson(const nlohmann::json& object, const JobSpec& base = JobSpec{});

// The definition as a JSON object with every job key (durations formatted by FormatDuration),
// so it reads back identically with JobSpecFromJson on any node whatever its defaults.
// `source`, `read_only` and `in_process` are not job keys and are not included.
nlohmann::json JobSpecToJson(const JobSpec& job);

// What stands for a secret value (an env value or an HTTP header value of a job) where it is not
// shown: in the API below admin of the job's namespace, and always in the audit log.
inline constexpr std::string_view kSecretPlaceholder = "(secret)";

// `definition` (a JobSpecToJson object) with every env value and HTTP header value replaced by
// kSecretPlaceholder. Other keys are unchanged.
nlohmann::json RedactSecrets(nlohmann::json definition);
// The env and HTTP header values of `*spec` that are kSecretPlaceholder take the value of the same
// key in `stored` (write-only secrets: a client that was shown placeholders sends them back).
// InvalidArgument naming the key ("env.DB_PASSWORD: ...") when `stored` has no such value.
Status RestoreSecrets(JobSpec* spec, const JobSpec& stored);

// Parameters given on a command line (`gnomon job trigger ID --param k=v`): each argument is
// `key=text` (a string value) or `key:=json` (any JSON value: `n:=3`, `dry:=true`). The result is
// a compact JSON object ("" for none). InvalidArgument naming the argument that is wrong.
Result<std::string> ParamsFromArgs(const std::vector<std::string>& args);

// Serialises `j` compactly; invalid UTF-8 in strings (e.g. run output) is replaced with U+FFFD
// instead of throwing.
std::string DumpJson(const nlohmann::json& j);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_JOB_JSON_H_
