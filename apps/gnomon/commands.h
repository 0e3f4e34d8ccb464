// The gnomon binary's subcommands. Each Add*Command registers a CLI11 subcommand whose callback
// sets the process exit code in `*exit_code`. Only apps/ knows about command lines.
#ifndef GNOMON_APPS_GNOMON_COMMANDS_H_
#define GNOMON_APPS_GNOMON_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace gnomon::app {

// Exit codes: 0 success, 1 runtime failure, 2 invalid input (usage, expression, zone).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `gnomon cron next|explain`.
void AddCronCommand(CLI::App& app, int* exit_code);
// `gnomon job ls|show|add|...|runs|output` (an HTTP API client, src/server/api_client.h).
void AddJobCommand(CLI::App& app, int* exit_code);
// `gnomon serve`.
void AddServeCommand(CLI::App& app, int* exit_code);
// `gnomon checkpoint set VALUE` (inside a run).
void AddCheckpointCommand(CLI::App& app, int* exit_code);
// `gnomon migrate redis-groups` (a Redis keyspace of an earlier release to key groups).
void AddMigrateCommand(CLI::App& app, int* exit_code);
// `gnomon worker` (queue mode).
void AddWorkerCommand(CLI::App& app, int* exit_code);

// Runs the whole command line; returns the process exit code.
int RunMain(int argc, char** argv);

}  // namespace gnomon::app

#endif  // GNOMON_APPS_GNOMON_COMMANDS_H_
