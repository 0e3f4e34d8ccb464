// "Unknown key" messages with a "did you mean" hint, shared by the readers of the jobs file (TOML)
// and of job definitions (JSON). Pure functions, thread-safe.
#ifndef GNOMON_SRC_SERVER_KEY_HINT_H_
#define GNOMON_SRC_SERVER_KEY_HINT_H_

#include <string>
#include <string_view>
#include <vector>

namespace gnomon::server {

// `[<table>: ]unknown key "<key>"`, followed by ` (did you mean "<k>"?)` when one of `known` is
// within a small edit distance of `key` (1 for keys of up to 4 characters, else 2).
std::string UnknownKeyMessage(std::string_view key, const std::vector<std::string_view>& known,
                              std::string_view table = "");

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_KEY_HINT_H_
