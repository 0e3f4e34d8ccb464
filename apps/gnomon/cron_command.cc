// `gnomon cron next` and `gnomon cron explain`: the schedule dialect from the command line.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/gnomon/commands.h"
#include "gnomon/cron.h"

namespace gnomon::app {
namespace {

struct CronArgs {
  std::string expr;
  std::string tz = "UTC";
  std::string from;
  int count = 5;
  bool json = false;
};

// Parses zone, expression and start instant; prints the error and returns nullopt on bad input.
std::optional<std::pair<CronExpr, Instant>> Prepare(const CronArgs& args) {
  Result<TimeZone> zone = TimeZone::Load(args.tz);
  if (!zone.ok()) {
    std::cerr << "gnomon: --tz: " << zone.status().message() << "\n";
    return std::nullopt;
  }
  Result<CronExpr> expr = CronExpr::Parse(args.expr, CronOptions{*zone, ""});
  if (!expr.ok()) {
    std::cerr << "gnomon: invalid expression \"" << args.expr.substr(0, 80)
              << "\": " << expr.status().message() << "\n";
    return std::nullopt;
  }
  Instant from = SystemClock::Get().Now();
  if (!args.from.empty()) {
    Result<Instant> parsed = Instant::ParseRfc3339(args.from);
    if (!parsed.ok()) {
      std::cerr << "gnomon: --from: " << parsed.status().message() << "\n";
      return std::nullopt;
    }
    from = *parsed;
  }
  return std::make_pair(std::move(*expr), from);
}

std::vector<Instant> NextFires(const CronExpr& expr, Instant from, int count) {
  std::vector<Instant> out;
  for (Instant t = from; static_cast<int>(out.size()) < count;) {
    std::optional<Instant> next = expr.Next(t);
    if (!next) break;
    out.push_back(*next);
    t = *next;
  }
  return out;
}

int RunNext(const CronArgs& args) {
  auto prepared = Prepare(args);
  if (!prepared) return kExitUsage;
  const auto& [expr, from] = *prepared;
  const std::vector<Instant> fires = NextFires(expr, from, args.count);
  if (args.json) {
    nlohmann::json out = {{"expression", expr.text()},
                          {"timezone", expr.time_zone().name()},
                          {"from", from.ToRfc3339()},
                          {"description", expr.Describe()},
                          {"next", nlohmann::json::array()}};
    for (Instant t : fires) out["next"].push_back(t.ToRfc3339Seconds());
    std::cout << out.dump(2) << "\n";
  } else {
    for (Instant t : fires) std::cout << t.ToRfc3339Seconds() << "\n";
  }
  return kExitOk;
}

int RunExplain(const CronArgs& args) {
  auto prepared = Prepare(args);
  if (!prepared) return kExitUsage;
  const auto& [expr, from] = *prepared;
  std::cout << expr.Describe() << "\n";
  const std::vector<Instant> fires = NextFires(expr, from, args.count);
  if (fires.empty()) {
    std::cout << "It never fires (no fire within " << CronExpr::kSearchYears << " years).\n";
    return kExitOk;
  }
  std::cout << "Next fires:\n";
  for (Instant t : fires) {
    std::cout << "  " << t.ToRfc3339Seconds();
    if (expr.time_zone().name() != "UTC")
      std::cout << "  (" << expr.time_zone().FormatLocal(t) << ")";
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddCronCommand(CLI::App& app, int* exit_code) {
  CLI::App* cron = app.add_subcommand("cron", "Check and explain cron expressions");
  cron->require_subcommand(1);
  auto args = std::make_shared<CronArgs>();

  CLI::App* next =
      cron->add_subcommand("next", "Print the next fire instants, one UTC RFC 3339 instant a line");
  next->add_option("EXPR", args->expr, "The cron expression (quote it)")->required();
  next->add_option("--tz", args->tz, "IANA time zone the expression is read in")
      ->capture_default_str();
  next->add_option("--from", args->from, "Start after this RFC 3339 instant (default: now)");
  next->add_option("-n", args->count, "How many fires to print")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  next->add_flag("--json", args->json, "Print a JSON object instead");
  next->callback([args, exit_code] { *exit_code = RunNext(*args); });

  CLI::App* explain = cron->add_subcommand(
      "explain", "Describe an expression in plain language, with its next fires");
  explain->add_option("EXPR", args->expr, "The cron expression (quote it)")->required();
  explain->add_option("--tz", args->tz, "IANA time zone the expression is read in")
      ->capture_default_str();
  explain->add_option("--from", args->from, "Start after this RFC 3339 instant (default: now)");
  explain->add_option("-n", args->count, "How many fires to list")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  explain->callback([args, exit_code] { *exit_code = RunExplain(*args); });
}

}  // namespace gnomon::app
