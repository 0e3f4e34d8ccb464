// Jobs files (every key in docs/configuration.md "Jobs files"): `[[job]]` tables of
// the job keys and an optional `[defaults]` table, read into compiled jobs. Every load is
// all-or-nothing, and every error says where and what:
// `jobs.toml:12: job "report": unknown key "schedulle" (did you mean "schedule"?)`.
// Functions here are pure and thread-safe.
#ifndef GNOMON_SRC_SERVER_JOBS_FILE_H_
#define GNOMON_SRC_SERVER_JOBS_FILE_H_

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon::server {

// Reads a jobs file: `[[job]]` tables and an optional `[defaults]` table that applies to this
// file's jobs (layered over `defaults`). Every job is checked and compiled (CompileJob); ids must
// be unique within the file. Each job gets source = "<path>:<line of its table>", read_only = true.
// `calendars`: the daemon's named calendars, which jobs' `calendars` keys reference (null: none).
Result<std::vector<CompiledJob>> LoadJobsFile(const std::string& path, const JobSpec& defaults,
                                              const Calendars* calendars = nullptr);
// As LoadJobsFile, from `text`; `name` is used in messages and sources.
Result<std::vector<CompiledJob>> ParseJobsFile(std::string_view text, const std::string& name,
                                               const JobSpec& defaults,
                                               const Calendars* calendars = nullptr);

// The jobs of a `job` key of `file` (an array of tables), each over `defaults`, appended to *jobs.
Status ParseJobArray(const std::string& file, const toml::node& n, const JobSpec& defaults,
                     std::vector<CompiledJob>* jobs, const Calendars* calendars = nullptr);
// Applies a `[defaults]` table of `file` over *defaults and checks the result (a default `id` is
// an error).
Status ParseDefaults(const std::string& file, const toml::node& n, JobSpec* defaults,
                     const Calendars* calendars = nullptr);

// The definitions of a load's compiled jobs (or its error), for callers that only read them.
Result<std::vector<JobSpec>> SpecsOf(Result<std::vector<CompiledJob>> jobs);

// Fails when two jobs share an id, naming both sources:
// `b.toml:3: job "x": duplicate id, first defined at a.toml:7`.
Status CheckUniqueJobIds(const std::vector<CompiledJob>& jobs);
// CheckUniqueJobIds, then the jobs' children (CheckJobGraph): the jobs of a daemon's files name
// jobs of those files, never of the API.
Status CheckJobSet(const std::vector<CompiledJob>& jobs);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_JOBS_FILE_H_
