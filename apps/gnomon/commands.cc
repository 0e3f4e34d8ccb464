// The gnomon command line: one CLI11 app with a subcommand per area.
#include "apps/gnomon/commands.h"

namespace gnomon::app {

int RunMain(int argc, char** argv) {
  CLI::App app(
      "gnomon: a distributed cron. Every node computes the schedule; a backend decides "
      "which node runs each fire.",
      "gnomon");
  app.require_subcommand(1);
  app.set_version_flag("--version", "gnomon 0.1.0");
  int exit_code = kExitOk;
  AddCronCommand(app, &exit_code);
  AddServeCommand(app, &exit_code);
  AddWorkerCommand(app, &exit_code);
  AddJobCommand(app, &exit_code);
  AddCheckpointCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

}  // namespace gnomon::app
