// `gnomon migrate redis-groups`: moves a Redis keyspace written by an earlier release (before key
// groups, or key groups with a key per fire) to the layout this release opens
// (RedisCoordinator::MigrateKeyGroups; docs/operations.md "Upgrading"). `gnomon serve` refuses
// such a keyspace and names this command.
#include <iostream>

#include "apps/gnomon/commands.h"
#include "apps/gnomon/config.h"
#include "gnomon/redis_coordinator.h"

namespace gnomon::app {
namespace {

struct MigrateArgs {
  std::string config;
  std::string backend;
};

int Fail(const Status& s) {
  std::cerr << "gnomon migrate redis-groups: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int RunMigrateGroups(const MigrateArgs& args) {
  ServeConfig config;
  if (!args.config.empty()) {
    Result<ServeConfig> loaded = LoadServeConfig(args.config);
    if (!loaded.ok()) return Fail(InvalidArgumentError(loaded.status().message()));
    config = std::move(*loaded);
  }
  if (!args.backend.empty()) config.backend = args.backend;
  std::vector<std::string> warnings;
  Result<std::string> password = BackendPassword(config, &warnings);
  if (!password.ok()) return Fail(InvalidArgumentError(password.status().message()));
  for (const std::string& w : warnings) std::cerr << "gnomon migrate redis-groups: " << w << "\n";
  Result<std::string> url = password->empty() ? Result<std::string>(config.backend)
                                              : server::WithPassword(config.backend, *password);
  if (!url.ok()) return Fail(url.status());
  Result<RedisOptions> options = server::RedisOptionsFor(*url, config.allow_unsafe_backend);
  if (!options.ok()) return Fail(options.status());
  Result<KeyGroupMigration> done = RedisCoordinator::MigrateKeyGroups(*options);
  if (!done.ok()) return Fail(done.status());
  const std::string keyspace = options->prefix + ":" + options->ns;
  if (done->already_done) {
    std::cout << keyspace << ": already on this release's layout, nothing to move\n";
  } else {
    std::cout << keyspace << ": moved to this release's layout: " << done->job_keys
              << " job keys into key groups, " << done->shared_keys << " shared keys, "
              << done->ledger_keys << " keys into their job's hash\n";
  }
  return kExitOk;
}

}  // namespace

void AddMigrateCommand(CLI::App& app, int* exit_code) {
  CLI::App* migrate =
      app.add_subcommand("migrate", "Move a backend's data to this release's layout");
  migrate->require_subcommand(1);
  auto args = std::make_shared<MigrateArgs>();
  CLI::App* groups = migrate->add_subcommand(
      "redis-groups",
      "Move a Redis keyspace of an earlier release to this release's layout (stop every node "
      "first)");
  groups->add_option("--config", args->config,
                     "Config file (TOML): backend, backend_password_file");
  groups->add_option("--backend", args->backend,
                     "Redis backend URL (redis://, rediss://, redis+sentinel://...)");
  groups->callback([args, exit_code] { *exit_code = RunMigrateGroups(*args); });
}

}  // namespace gnomon::app
