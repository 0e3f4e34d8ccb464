#include "src/job/key_hint.h"

#include <algorithm>

namespace gnomon {
namespace {

// Levenshtein distance (both strings are short).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string UnknownKeyMessage(std::string_view key, const std::vector<std::string_view>& known,
                              std::string_view table) {
  std::string what =
      std::string(table) + (table.empty() ? "" : ": ") + "unknown key \"" + Shown(key) + "\"";
  if (key.size() <= 64) {
    const size_t max_distance = key.size() <= 4 ? 1 : 2;
    for (std::string_view k : known) {
      if (EditDistance(key, k) <= max_distance) {
        what += " (did you mean \"" + std::string(k) + "\"?)";
        break;
      }
    }
  }
  return what;
}

std::string Shown(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace gnomon
