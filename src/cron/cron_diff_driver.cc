// A test-only driver for the differential test (tests/cron_diff/run.sh): answers many Next/Prev
// queries in one process. Each stdin line is
//   expr <TAB> zone <TAB> from (RFC 3339) <TAB> next|prev <TAB> n
// and gets one stdout line: the n fires after (next) or before (prev) `from`, each found from the
// previous one, as UTC RFC 3339 seconds separated by spaces, then "none" if the search ran out
// first; or "error <message>" when the zone, the expression or the line is invalid.
#include <charconv>
#include <iostream>
#include <string>
#include <vector>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> out(1);
  for (char ch : line) {
    if (ch == '\t') {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

std::string Answer(const std::string& line) {
  const std::vector<std::string> f = SplitTabs(line);
  if (f.size() != 5 || (f[3] != "next" && f[3] != "prev")) return "error bad query line";
  Result<TimeZone> zone = TimeZone::Load(f[1]);
  if (!zone.ok()) return "error " + zone.status().message();
  Result<CronExpr> expr = CronExpr::Parse(f[0], CronOptions{*zone, ""});
  if (!expr.ok()) return "error " + expr.status().message();
  Result<Instant> from = Instant::ParseRfc3339(f[2]);
  if (!from.ok()) return "error " + from.status().message();
  int n = 0;
  const auto [end, ec] = std::from_chars(f[4].data(), f[4].data() + f[4].size(), n);
  if (ec != std::errc() || end != f[4].data() + f[4].size() || n < 1) return "error bad count";
  const bool next = f[3] == "next";
  std::string out;
  Instant t = *from;
  for (int i = 0; i < n; ++i) {
    const std::optional<Instant> fire = next ? expr->Next(t) : expr->Prev(t);
    if (!out.empty()) out += ' ';
    if (!fire) {
      out += "none";
      break;
    }
    out += fire->ToRfc3339Seconds();
    t = *fire;
  }
  return out;
}

}  // namespace
}  // namespace gnomon

int main() {
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    std::cout << gnomon::Answer(line) << '\n';
  }
  return 0;
}
