// `gnomon checkpoint set VALUE`: saves a checkpoint of the run it is called from. It writes the
// line `::gnomon-checkpoint VALUE` to its standard output, which is the run's: the executor that
// started the run reads the line and saves the value fenced on the run's claim (a stale holder's
// save is refused). So it needs no backend address or credentials, only to run inside a run.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "apps/gnomon/commands.h"

namespace gnomon::app {
namespace {

int RunCheckpointSet(const std::string& value) {
  const char* run = std::getenv("GNOMON_RUN_ID");
  if (run == nullptr || *run == '\0') {
    std::cerr << "gnomon checkpoint set: not inside a gnomon run (GNOMON_RUN_ID is not set); "
                 "a run's process jobs save checkpoints with this command or by printing "
                 "'::gnomon-checkpoint VALUE'\n";
    return kExitUsage;
  }
  if (value.find('\n') != std::string::npos || value.find('\r') != std::string::npos ||
      value.find('\0') != std::string::npos) {
    std::cerr << "gnomon checkpoint set: the value must be one line (no newline, CR or NUL)\n";
    return kExitUsage;
  }
  if (value.size() > 64 * 1024) {
    std::cerr << "gnomon checkpoint set: the value is longer than 64 KiB\n";
    return kExitUsage;
  }
  std::cout << "::gnomon-checkpoint " << value << std::endl;  // flushed: saved at once
  return std::cout ? kExitOk : kExitFailure;
}

}  // namespace

void AddCheckpointCommand(CLI::App& app, int* exit_code) {
  CLI::App* checkpoint =
      app.add_subcommand("checkpoint", "Checkpoints of the current run (inside a process job)");
  checkpoint->require_subcommand(1);
  auto value = std::make_shared<std::string>();
  CLI::App* set = checkpoint->add_subcommand(
      "set", "Save VALUE as the run's checkpoint; a retry or re-run gets it in GNOMON_CHECKPOINT");
  set->add_option("value", *value, "The checkpoint value (one line)")->required();
  set->callback([value, exit_code] { *exit_code = RunCheckpointSet(*value); });
}

}  // namespace gnomon::app
