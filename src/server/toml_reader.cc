#include "src/server/toml_reader.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "gnomon/job.h"
#include "src/job/key_hint.h"
#include "src/server/api_util.h"

namespace gnomon::server {

int LineOf(const toml::node& n) { return static_cast<int>(n.source().begin.line); }
int LineOf(const toml::key& k) { return static_cast<int>(k.source().begin.line); }

Status Reporter::Fail(int line, std::string_view what) const {
  std::string m = file_ + ":" + std::to_string(line) + ": ";
  if (!scope_.empty()) m += scope_ + ": ";
  m += what;
  return InvalidArgumentError(std::move(m));
}

Status Reporter::Fail(const toml::node& at, std::string_view what) const {
  return Fail(LineOf(at), what);
}

Status Reporter::WrongType(const toml::node& at, std::string_view field,
                           std::string_view expected) const {
  return Fail(at, std::string(field) + ": expected " + std::string(expected) + ", got " +
                      std::string(TypeName(at)));
}

std::string_view TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::array:
      return "array";
    case toml::node_type::table:
      return "table";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

// `table` names a nested table ("http: unknown key ...") or is empty.
Status UnknownKey(const Reporter& r, const toml::key& key,
                  const std::vector<std::string_view>& known, std::string_view table) {
  return r.Fail(LineOf(key), UnknownKeyMessage(key.str(), known, table));
}

// The entries of `t` in document order (toml::table iterates in key order).
std::vector<std::pair<const toml::key*, const toml::node*>> Ordered(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  for (const auto& [k, v] : t) out.emplace_back(&k, &v);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto& sa = a.first->source().begin;
    const auto& sb = b.first->source().begin;
    return std::pair(sa.line, sa.column) < std::pair(sb.line, sb.column);
  });
  return out;
}

Status GetString(const Reporter& r, const toml::node& n, std::string_view field, std::string* out) {
  const auto* v = n.as_string();
  if (v == nullptr) return r.WrongType(n, field, "a string");
  *out = v->get();
  return Status::Ok();
}

Status GetBool(const Reporter& r, const toml::node& n, std::string_view field, bool* out) {
  const auto* v = n.as_boolean();
  if (v == nullptr) return r.WrongType(n, field, "true or false");
  *out = v->get();
  return Status::Ok();
}

// An integer that fits an int; finer ranges are checked by the owner of the field.
Status GetInt(const Reporter& r, const toml::node& n, std::string_view field, int* out) {
  const auto* v = n.as_integer();
  if (v == nullptr) return r.WrongType(n, field, "an integer");
  const int64_t x = v->get();
  if (x < INT_MIN || x > INT_MAX) {
    return r.Fail(n, std::string(field) + ": " + std::to_string(x) + " is out of range");
  }
  *out = static_cast<int>(x);
  return Status::Ok();
}

// Durations are strings in the ParseDuration grammar ("500ms", "1h30m").
Status GetDuration(const Reporter& r, const toml::node& n, std::string_view field, Duration* out) {
  const auto* v = n.as_string();
  if (v == nullptr) return r.WrongType(n, field, "a duration string such as \"30s\"");
  Result<Duration> d = ParseDuration(v->get());
  if (!d.ok()) return r.Fail(n, std::string(field) + ": " + d.status().message());
  *out = *d;
  return Status::Ok();
}

Status GetByteSize(const Reporter& r, const toml::node& n, std::string_view field, int64_t* out) {
  if (const auto* i = n.as_integer()) {
    if (i->get() < 0) return r.Fail(n, std::string(field) + ": must be >= 0");
    *out = i->get();
    return Status::Ok();
  }
  const auto* v = n.as_string();
  if (v == nullptr) return r.WrongType(n, field, "a size such as \"512M\" or an integer");
  Result<int64_t> bytes = ParseByteSize(v->get());
  if (!bytes.ok()) return r.Fail(n, std::string(field) + ": " + bytes.status().message());
  *out = *bytes;
  return Status::Ok();
}

Status GetStringList(const Reporter& r, const toml::node& n, std::string_view field,
                     std::vector<std::string>* out) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return r.WrongType(n, field, "an array of strings");
  std::vector<std::string> list;
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    const auto* s = e.as_string();
    if (s == nullptr) {
      return r.WrongType(e, std::string(field) + "[" + std::to_string(i) + "]", "a string");
    }
    list.push_back(s->get());
  }
  *out = std::move(list);
  return Status::Ok();
}

// Overlays the string entries of table `n` onto *out.
Status MergeStringMap(const Reporter& r, const toml::node& n, std::string_view field,
                      std::map<std::string, std::string>* out) {
  const auto* t = n.as_table();
  if (t == nullptr) return r.WrongType(n, field, "a table of strings");
  std::map<std::string, std::string> merged = *out;
  for (const auto& [k, v] : Ordered(*t)) {
    const auto* s = v->as_string();
    if (s == nullptr) {
      return r.WrongType(*v, std::string(field) + "." + Shown(k->str()), "a string");
    }
    merged[std::string(k->str())] = s->get();
  }
  *out = std::move(merged);
  return Status::Ok();
}

// toml++ reports syntax errors by exception; they stop here.
Result<toml::table> ParseToml(std::string_view text, const std::string& name) {
  try {
    return toml::parse(text, std::string_view(name));
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(name + ":" + std::to_string(e.source().begin.line) + ": " +
                                std::string(e.description()));
  } catch (const std::exception& e) {
    return InvalidArgumentError(name + ": cannot parse: " + e.what());
  }
}

Result<std::string> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return NotFoundError(path + ": cannot read: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot read: " + std::strerror(errno));
  std::string text;
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigFileBytes) {
      return InvalidArgumentError(path + ": larger than " +
                                  std::to_string(kMaxConfigFileBytes / (1024 * 1024)) + " MiB");
    }
  }
  if (in.bad()) return NotFoundError(path + ": cannot read: I/O error");
  return text;
}

std::string Source(const std::string& file, int line) { return file + ":" + std::to_string(line); }

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (base_dir.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(base_dir) / p).string();
}

}  // namespace gnomon::server
