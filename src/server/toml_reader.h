// Reading TOML files (the config file, jobs files) with errors that say where and what:
// `jobs.toml:12: job "report": retries: expected an integer, got string`. Every error is an
// InvalidArgument Status (toml++'s exceptions stop in ParseToml); unknown keys get a "did you mean"
// hint. Functions here are pure and thread-safe.
#ifndef GNOMON_SRC_SERVER_TOML_READER_H_
#define GNOMON_SRC_SERVER_TOML_READER_H_

#include <toml++/toml.h>

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon::server {

// Largest config, jobs or crontab file read (bytes); larger files are rejected.
inline constexpr size_t kMaxConfigFileBytes = 16 * 1024 * 1024;

// Reads a whole file of at most kMaxConfigFileBytes. NotFound when it cannot be opened
// ("<path>: cannot read: <reason>"), InvalidArgument when it is too large.
Result<std::string> ReadConfigFile(const std::string& path);
// Parses TOML text; a syntax error is "<name>:<line>: <description>".
Result<toml::table> ParseToml(std::string_view text, const std::string& name);
// "<file>:<line>", a definition's source.
std::string Source(const std::string& file, int line);
// `p` relative to `base_dir` ("" = the working directory) unless it is absolute.
std::string Resolve(const std::string& base_dir, const std::string& p);

int LineOf(const toml::node& n);
int LineOf(const toml::key& k);
// "string", "integer", "float", "boolean", "array", "table", "date", "time", "date-time".
std::string_view TypeName(const toml::node& n);

// Builds errors located in one file, inside one scope ("job \"report\"", "defaults", "").
class Reporter {
 public:
  Reporter(const std::string& file, std::string scope) : file_(file), scope_(std::move(scope)) {}

  // "<file>:<line>: <scope>: <what>".
  Status Fail(int line, std::string_view what) const;
  Status Fail(const toml::node& at, std::string_view what) const;
  // "<field>: expected <expected>, got <the node's type>".
  Status WrongType(const toml::node& at, std::string_view field, std::string_view expected) const;

 private:
  const std::string& file_;
  std::string scope_;
};

// `<file>:<line of the key>: [<scope>: ][<table>: ]unknown key "<key>"` with a hint from `known`.
Status UnknownKey(const Reporter& r, const toml::key& key,
                  const std::vector<std::string_view>& known, std::string_view table = "");
// The entries of `t` in document order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> Ordered(const toml::table& t);

// Typed values; a wrong type is "<field>: expected ..., got <type>" at the value's line.
Status GetString(const Reporter& r, const toml::node& n, std::string_view field, std::string* out);
Status GetBool(const Reporter& r, const toml::node& n, std::string_view field, bool* out);
// An integer that fits an int; finer ranges are checked by the owner of the field.
Status GetInt(const Reporter& r, const toml::node& n, std::string_view field, int* out);
// Durations are strings in the ParseDuration grammar ("500ms", "1h30m").
Status GetDuration(const Reporter& r, const toml::node& n, std::string_view field, Duration* out);
// A size in bytes: an integer, or a string in the ParseByteSize grammar ("512M", "2G").
Status GetByteSize(const Reporter& r, const toml::node& n, std::string_view field, int64_t* out);
Status GetStringList(const Reporter& r, const toml::node& n, std::string_view field,
                     std::vector<std::string>* out);
// Overlays the string entries of table `n` onto *out.
Status MergeStringMap(const Reporter& r, const toml::node& n, std::string_view field,
                      std::map<std::string, std::string>* out);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_TOML_READER_H_
