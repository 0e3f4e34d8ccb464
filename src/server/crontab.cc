#include "src/server/crontab.h"

#include <cctype>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gnomon/time.h"
#include "src/server/toml_reader.h"

namespace gnomon::server {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `NAME = value` lines: the name of a variable and its value (quotes stripped), or nothing.
// A schedule line cannot match: its first field never is a name followed by '='.
std::optional<std::pair<std::string, std::string>> ParseEnvLine(std::string_view line) {
  size_t i = 0;
  auto name_char = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  while (i < line.size() && name_char(line[i], i == 0)) ++i;
  if (i == 0) return std::nullopt;
  std::string name(line.substr(0, i));
  while (i < line.size() && IsBlank(line[i])) ++i;
  if (i == line.size() || line[i] != '=') return std::nullopt;
  std::string_view value = TrimBlanks(line.substr(i + 1));
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  return std::pair(std::move(name), std::string(value));
}

// Takes the next blank-separated token from *rest (which must not start with a blank).
std::string_view NextToken(std::string_view* rest) {
  size_t end = 0;
  while (end < rest->size() && !IsBlank((*rest)[end])) ++end;
  std::string_view token = rest->substr(0, end);
  rest->remove_prefix(end);
  while (!rest->empty() && IsBlank(rest->front())) rest->remove_prefix(1);
  return token;
}

// The cron parser counts columns in the normalised schedule ("(column 3)"); a reader of the
// crontab wants the column in the line, where fields may be separated by several blanks.
std::string ToLineColumns(const std::string& message, const std::vector<size_t>& raw_column) {
  static constexpr std::string_view kColumn = "(column ";
  const size_t at = message.rfind(kColumn);
  if (at == std::string::npos) return message;
  size_t end = at + kColumn.size();
  size_t column = 0;
  while (end < message.size() && message[end] >= '0' && message[end] <= '9' && column < 1'000'000) {
    column = column * 10 + static_cast<size_t>(message[end] - '0');
    ++end;
  }
  if (end >= message.size() || message[end] != ')' || column == 0 || column > raw_column.size()) {
    return message;
  }
  return message.substr(0, at + kColumn.size()) + std::to_string(raw_column[column - 1]) +
         message.substr(end);
}

}  // namespace

std::string CrontabJobId(std::string_view path, int line) {
  const size_t slash = path.find_last_of('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (base.empty()) base = "crontab";
  const std::string suffix = "-" + std::to_string(line);
  std::string id;
  for (char c : base.substr(0, 128 - suffix.size())) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    id += ok ? c : '_';
  }
  return id + suffix;
}

Result<std::vector<CompiledJob>> ParseCrontab(std::string_view text, const std::string& name,
                                              const JobSpec& defaults) {
  std::vector<CompiledJob> jobs;
  std::map<std::string, std::string> env = defaults.env;
  std::string timezone = defaults.timezone;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const std::string where = name + ":" + std::to_string(line_no);
    auto fail = [&](const std::string& what) { return InvalidArgumentError(where + ": " + what); };

    std::string_view line = raw;
    while (!line.empty() && IsBlank(line.front())) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;

    if (auto var = ParseEnvLine(line)) {
      auto& [var_name, value] = *var;
      if (var_name == "CRON_TZ") {
        if (value.empty()) {
          timezone = defaults.timezone;
          continue;
        }
        Result<TimeZone> zone = TimeZone::Load(value);
        if (!zone.ok()) return fail("CRON_TZ: " + zone.status().message());
        timezone = value;
      } else if (var_name != "SHELL" && var_name != "MAILTO" && var_name != "MAILFROM") {
        // SHELL, MAILTO and MAILFROM are ignored: gnomon runs /bin/sh -c and keeps the output
        // in the run history.
        env[var_name] = value;
      }
      continue;
    }

    // The schedule: "@every <dur>", "@macro", or five fields; blanks become single spaces.
    std::string_view rest = line;
    std::string schedule;
    size_t fields = 5;
    if (line.front() == '@') {
      const std::string macro = Lower(line.substr(0, line.find_first_of(" \t")));
      if (macro == "@reboot") {
        return fail("@reboot is not supported: gnomon fires on a schedule, not at boot");
      }
      fields = macro == "@every" ? 2 : 1;
    }
    std::vector<size_t> raw_column;  // raw_column[i]: column in the line of schedule[i]
    for (size_t i = 0; i < fields; ++i) {
      const std::string_view token = NextToken(&rest);
      if (token.empty()) {
        return fail(fields == 5 ? "expected five time fields and a command"
                                : "expected a command after the schedule");
      }
      const size_t token_column = static_cast<size_t>(token.data() - raw.data()) + 1;
      if (!schedule.empty()) {
        schedule += ' ';
        raw_column.push_back(token_column - 1);
      }
      schedule += token;
      for (size_t k = 0; k < token.size(); ++k) raw_column.push_back(token_column + k);
    }

    // The command. crontab(5) turns an unescaped '%' into a newline and feeds what follows to
    // stdin; gnomon does not, and a silently different command would be worse than an error.
    std::string command;
    const size_t command_column = static_cast<size_t>(rest.data() - raw.data()) + 1;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '\\' && i + 1 < rest.size() && rest[i + 1] == '%') {
        command += '%';
        ++i;
      } else if (rest[i] == '%') {
        return fail("unescaped % (column " + std::to_string(command_column + i) +
                    "): gnomon does not support crontab's % (stdin) feature; write \\% for a "
                    "literal %");
      } else {
        command += rest[i];
      }
    }
    if (TrimBlanks(command).empty()) return fail("expected a command after the schedule");

    JobSpec job = defaults;
    job.id = CrontabJobId(name, line_no);
    job.schedule = std::move(schedule);
    job.timezone = timezone;
    job.command = std::move(command);
    job.argv.clear();
    job.http.reset();
    job.in_process = false;
    job.env = env;
    job.source = where;
    job.read_only = true;
    Result<CompiledJob> compiled = CompileJob(std::move(job));
    if (!compiled.ok()) {
      return InvalidArgumentError(where + ": " +
                                  ToLineColumns(compiled.status().message(), raw_column));
    }
    jobs.push_back(std::move(compiled).value());
  }
  return jobs;
}

Result<std::vector<CompiledJob>> LoadCrontab(const std::string& path, const JobSpec& defaults) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseCrontab(*text, path, defaults);
}

}  // namespace gnomon::server
