// Import of a standard user crontab (crontab(5), Vixie/cronie dialect) as gnomon jobs.
//
// Supported, line by line:
//   - blank lines and lines whose first non-blank character is '#': ignored;
//   - `NAME=value` (spaces around '=' allowed, value optionally in matching '' or ""): sets an
//     environment variable for the jobs on the following lines. `CRON_TZ=Zone` instead sets the
//     time zone of the following jobs (empty = back to the default). `SHELL`, `MAILTO` and
//     `MAILFROM` are accepted and ignored: gnomon always runs `/bin/sh -c` and keeps the output
//     in the run history instead of mailing it;
//   - `m h dom mon dow command`: five fields separated by spaces and/or tabs, then the command;
//   - `@macro command` (@yearly @annually @monthly @weekly @daily @midnight @hourly) and the
//     gnomon extension `@every <duration> command`. `@reboot` is rejected.
// The command runs with /bin/sh -c. crontab's `%` feature (the text after an unescaped `%` is the
// command's stdin, further `%`s become newlines) is NOT supported: an unescaped `%` is an error;
// `\%` is a literal `%`. System crontabs (/etc/crontab, with a user field) are not supported.
//
// Each job's id is derived from the file, so every node that imports the same file derives the
// same ids: "<basename of the file>-<line number>", with characters outside [A-Za-z0-9_.-]
// replaced by '_' (the basename is cut so that the id stays within 128 characters).
#ifndef GNOMON_SRC_SERVER_CRONTAB_H_
#define GNOMON_SRC_SERVER_CRONTAB_H_

#include <string>
#include <string_view>
#include <vector>

#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon::server {

// Reads the crontab at `path`. Each job starts from `defaults` (its executor replaced by the
// command, its env extended by the file's variables), gets source = "<path>:<line>" and
// read_only = true, and is checked and compiled (CompileJob). Errors: NotFound when the file cannot
// be read; InvalidArgument "<path>:<line>: ..." for the first wrong line. All-or-nothing.
Result<std::vector<CompiledJob>> LoadCrontab(const std::string& path, const JobSpec& defaults);
// As LoadCrontab, from `text`; `name` is the file name used for ids, messages and sources.
Result<std::vector<CompiledJob>> ParseCrontab(std::string_view text, const std::string& name,
                                              const JobSpec& defaults);

// The id of the job on line `line` of the crontab `path`: "<sanitised basename>-<line>".
std::string CrontabJobId(std::string_view path, int line);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_CRONTAB_H_
