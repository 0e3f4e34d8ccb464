// JSON rendering of the run history without building a json tree (lists of runs are the API's
// hottest path). Each appends to `out` exactly what nlohmann::json's dump() (no indent, no
// ensure_ascii, invalid UTF-8 replaced by U+FFFD) writes for the same value. Thread-safe.
#ifndef GNOMON_SRC_SERVER_RUN_JSON_H_
#define GNOMON_SRC_SERVER_RUN_JSON_H_

#include <string>
#include <string_view>

#include "gnomon/job.h"
#include "gnomon/time.h"

namespace gnomon::server {

// `t` as Instant::ToRfc3339 formats it ("2026-11-29T21:30:00.000Z"), in quotes: a JSON string.
void AppendRfc3339Json(std::string& out, Instant t);
// `s` as a JSON string, in quotes.
void AppendJsonString(std::string& out, std::string_view s);
// One run record: {"attempt", "error", "exit_code", "fencing_token", "finished_at", "job_id",
// "node_id", "outcome", ["output",] "run_id", "scheduled_at", "shard", "shard_count",
// "skip_reason", "started_at"} (keys sorted, as json objects are). finished_at is null while
// running; exit_code null when absent; output only `with_output`.
void AppendRunJson(std::string& out, const RunRecord& r, bool with_output);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_RUN_JSON_H_
