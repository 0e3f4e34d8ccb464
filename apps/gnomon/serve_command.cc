// `gnomon serve` and `gnomon worker`: the command lines of the daemon (src/server/node.h) and of a
// queue worker (src/server/queue_worker.h). Signals are taken synchronously by the main thread:
// SIGHUP reloads the config (jobs, tokens, quotas, alerts: all or nothing), SIGTERM/SIGINT stop
// gracefully.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "apps/gnomon/commands.h"
#include "apps/gnomon/config.h"
#include "apps/gnomon/node_options.h"

namespace gnomon::app {
namespace {

struct ServeArgs {
  std::string config;
  std::string backend;
  std::string node_id;
  std::string listen;
  std::vector<std::string> jobs;
  std::vector<std::string> crontabs;
  std::string mode = "all";  // all | schedule (queue mode: workers run the fires)
};

struct WorkerArgs {
  ServeArgs serve;
  int concurrency = 4;
  std::vector<std::string> tags = {"default"};
};

std::string DefaultNodeId() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string id;
  for (char c : std::string(host)) id += IsValidJobId(std::string(1, c)) ? c : '-';
  if (id.empty()) id = "node";
  return id.substr(0, 100) + "-" + std::to_string(getpid());
}

// The config from files and flags; all-or-nothing.
Result<ServeConfig> Load(const ServeArgs& args) {
  ServeConfig config;
  if (!args.config.empty()) {
    Result<ServeConfig> loaded = LoadServeConfig(args.config);
    if (!loaded.ok()) return loaded.status();
    config = std::move(*loaded);
  }
  if (!args.backend.empty()) config.backend = args.backend;
  if (!args.node_id.empty()) config.node_id = args.node_id;
  if (!args.listen.empty()) config.listen = args.listen;
  if (config.node_id.empty()) config.node_id = DefaultNodeId();
  GNOMON_RETURN_IF_ERROR(AddJobFiles(&config, args.jobs, args.crontabs));
  GNOMON_RETURN_IF_ERROR(ValidateServeConfig(config));
  return config;
}

// Blocks the signals the main thread waits for; threads started afterwards inherit the mask
// (child processes get theirs reset by the process executor).
sigset_t BlockSignals(bool hup) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (hup) sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A peer that closed its connection is an error on that connection, never the daemon's end
  // (jobs get every disposition back: the process executor resets them before exec).
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

int Fail(std::string_view command, const Status& s) {
  std::cerr << "gnomon " << command << ": " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int RunServe(const ServeArgs& args) {
  sigset_t signals = BlockSignals(true);
  Result<ServeConfig> config = Load(args);
  if (!config.ok()) return Fail("serve", InvalidArgumentError(config.status().message()));
  Result<server::NodeOptions> options = NodeOptionsFor(*config);
  if (!options.ok()) return Fail("serve", options.status());
  options->mode = args.mode;
  if (Result<BackendUrl> url = ParseBackendUrl(args.backend); url.ok() && !url->password.empty()) {
    options->warnings.push_back(
        "--backend carries a password: local users can read command lines (it was hidden from "
        "/proc/<pid>/cmdline once read, but not before); use backend_password_file or "
        "GNOMON_BACKEND_PASSWORD");
  }
  Result<std::unique_ptr<server::Node>> node = server::Node::Start(std::move(*options));
  if (!node.ok()) return Fail("serve", node.status());
  server::Logger& log = (*node)->logger();
  while (true) {
    const int sig = sigwaitinfo(&signals, nullptr);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGHUP) {
      log.Info("stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      break;
    }
    // Reload: all or nothing; on error everything stays as it was.
    Result<ServeConfig> fresh = Load(args);
    Result<server::NodeReload> reload =
        fresh.ok() ? NodeReloadFor(*fresh) : Result<server::NodeReload>(fresh.status());
    Status s = reload.ok() ? (*node)->Reload(std::move(*reload)) : reload.status();
    if (s.ok()) {
      log.Info("reloaded", {{"jobs", std::to_string(fresh->jobs.size())},
                            {"tokens", std::to_string(fresh->tokens.size())},
                            {"quotas", std::to_string(fresh->quotas.size())},
                            {"alerts", std::to_string(fresh->alerts.size())}});
    } else {
      log.Error("reload_failed", {{"error", s.message()}});
    }
  }
  (*node)->Stop();
  return kExitOk;
}

int RunWorker(const WorkerArgs& args) {
  sigset_t signals = BlockSignals(false);
  Result<ServeConfig> config = Load(args.serve);
  if (!config.ok()) return Fail("worker", InvalidArgumentError(config.status().message()));
  Result<server::QueueWorkerOptions> options = QueueWorkerOptionsFor(*config);
  if (!options.ok()) return Fail("worker", options.status());
  options->concurrency = args.concurrency;
  options->tags = args.tags;
  Result<std::unique_ptr<server::QueueWorker>> worker =
      server::QueueWorker::Start(std::move(*options));
  if (!worker.ok()) return Fail("worker", worker.status());
  int sig = -1;
  while (sig < 0) sig = sigwaitinfo(&signals, nullptr);
  (*worker)->Stop();
  return kExitOk;
}

}  // namespace

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<WorkerArgs>();
  CLI::App* worker =
      app.add_subcommand("worker", "Run queued fires (queue mode: gnomon serve --mode schedule)");
  worker->add_option("--config", args->serve.config,
                     "Config file (TOML): backend, [scheduler], logs");
  worker->add_option("--backend", args->serve.backend,
                     "Redis backend URL (redis:// or redis+sentinel://)");
  worker->add_option("--node-id", args->serve.node_id,
                     "This worker's id (default <hostname>-<pid>)");
  worker->add_option("--concurrency", args->concurrency, "Runs at once (default 4)");
  worker->add_option("--tags", args->tags, "Queue tags to take (default: default)")->delimiter(',');
  worker->callback([args, exit_code] { *exit_code = RunWorker(*args); });
}

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand("serve", "Run the gnomon daemon (scheduler node)");
  serve->add_option("--config", args->config, "Config file (TOML); see docs/configuration.md");
  serve->add_option("--backend", args->backend,
                    "Coordination backend URL (default sqlite://./gnomon-data/gnomon.db)");
  serve->add_option("--node-id", args->node_id, "This node's id (default <hostname>-<pid>)");
  serve->add_option("--listen", args->listen, "HTTP listen address (default 127.0.0.1:8080)");
  serve->add_option("--jobs", args->jobs, "Jobs file (TOML); may be repeated");
  serve->add_option("--crontab", args->crontabs, "Import a standard crontab file; may be repeated");
  serve->add_option("--mode", args->mode,
                    "all (default: claim and run) or schedule (queue mode: claim and publish to "
                    "Redis streams for `gnomon worker`)");
  serve->callback([args, exit_code] { *exit_code = RunServe(*args); });
}

}  // namespace gnomon::app
