// The gnomon command line: one CLI11 app with a subcommand per area.
#include "apps/gnomon/commands.h"

#include <string>
#include <string_view>
#include <vector>

namespace gnomon::app {

namespace {

// Overwrites, in this process's own argument memory (what /proc/<pid>/cmdline shows every local
// user), the password of any URL argument ("redis://user:secret@host" ->
// "redis://user:******@host"). The parsed copies keep it.
void HidePasswords(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    const size_t sep = arg.find("://");
    if (sep == std::string_view::npos) continue;
    const size_t at = arg.rfind('@');
    if (at == std::string_view::npos || at < sep) continue;
    const size_t colon = arg.find(':', sep + 3);
    if (colon == std::string_view::npos || colon > at) continue;
    for (size_t c = colon + 1; c < at; ++c) argv[i][c] = '*';
  }
}

}  // namespace

int RunMain(int argc, char** argv) {
  std::vector<std::string> copies(argv, argv + argc);
  std::vector<char*> args;
  for (std::string& a : copies) args.push_back(a.data());
  args.push_back(nullptr);
  HidePasswords(argc, argv);
  argv = args.data();
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
  AddMigrateCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return exit_code;
}

}  // namespace gnomon::app
