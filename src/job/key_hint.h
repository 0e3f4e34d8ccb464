// Text for messages about what was read from files and requests: "unknown key" with a "did you
// mean" hint (the readers of the jobs file, job definitions and the config file), and untrusted
// text shown bounded and printable. Pure functions, thread-safe.
#ifndef GNOMON_SRC_JOB_KEY_HINT_H_
#define GNOMON_SRC_JOB_KEY_HINT_H_

#include <string>
#include <string_view>
#include <vector>

namespace gnomon {

// `[<table>: ]unknown key "<key>"`, followed by ` (did you mean "<k>"?)` when one of `known` is
// within a small edit distance of `key` (1 for keys of up to 4 characters, else 2).
std::string UnknownKeyMessage(std::string_view key, const std::vector<std::string_view>& known,
                              std::string_view table = "");

// `s` for a message: its first `max` bytes, other than printable ASCII shown as '?', and "..."
// when cut.
std::string Shown(std::string_view s, size_t max = 64);

}  // namespace gnomon

#endif  // GNOMON_SRC_JOB_KEY_HINT_H_
