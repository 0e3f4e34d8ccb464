// `gnomon job ls|show|add|rm|pause|resume|trigger|cancel|rerun|backfill|runs|output`: a client of a
// daemon's HTTP API (docs/http-api.md). Exit codes: 0 done; 1 the server could not be reached or
// failed (5xx); 2 the request was refused as invalid (4xx) or the command line is wrong.
#include <httplib.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/gnomon/commands.h"
#include "apps/gnomon/config.h"
#include "src/server/api_client.h"
#include "src/server/auth.h"
#include "src/server/job_json.h"

namespace gnomon::app {
namespace {

struct JobArgs {
  server::ApiClientOptions api{.data_dir = std::string(kDefaultDataDir)};
  std::string id;
  std::string file;
  std::string outcome;
  std::vector<std::string> params;  // trigger: key=value / key:=json
  std::string from, to;             // backfill: the window (RFC 3339)
  int max_concurrent = 1;
  int limit = 20;
  bool json = false;
  bool replace = false;  // add: replace jobs that exist
  bool follow = false;   // output: until the run ends
};

// One request; prints the error on failure. `exit_code`: 0, 1 (unreachable, 5xx), 2 (4xx, usage).
struct Reply {
  int exit_code = kExitOk;
  nlohmann::json body;
  std::string etag;
};

Reply Exit(const server::ApiReply& r) {
  if (r.ok()) return Reply{kExitOk, r.body, r.etag};
  std::cerr << "gnomon job: " << r.error << "\n";
  return Reply{r.usage_error ? kExitUsage : kExitFailure, r.body, r.etag};
}

Reply Call(const JobArgs& a, const std::string& method, const std::string& path,
           const std::string& body = "", const std::string& if_match = "") {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!if_match.empty()) headers.emplace_back("If-Match", if_match);
  return Exit(server::ApiClient(a.api).Call(method, path, body, headers));
}

std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

int Ls(const JobArgs& a) {
  Reply r = Call(a, "GET", "/api/v1/jobs");
  if (r.exit_code != kExitOk) return r.exit_code;
  if (a.json) {
    std::cout << r.body.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%-32s %-22s %-26s %s\n", "ID", "SCHEDULE", "NEXT FIRE", "STATE");
  for (const auto& j : r.body.value("jobs", nlohmann::json::array())) {
    const nlohmann::json& spec = j.contains("spec") ? j["spec"] : j;
    std::printf("%-32s %-22s %-26s %s\n", Str(spec, "id").c_str(), Str(spec, "schedule").c_str(),
                Str(j, "next_fire").c_str(), j.value("paused", false) ? "paused" : "active");
  }
  return kExitOk;
}

int Runs(const JobArgs& a) {
  std::string path = "/api/v1/runs?limit=" + std::to_string(a.limit);
  if (!a.id.empty()) path += "&job=" + a.id;
  if (!a.outcome.empty()) path += "&outcome=" + a.outcome;
  Reply r = Call(a, "GET", path);
  if (r.exit_code != kExitOk) return r.exit_code;
  if (a.json) {
    std::cout << r.body.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%-40s %-3s %-10s %-16s %-8s %s\n", "RUN", "TRY", "OUTCOME", "NODE", "TOKEN",
              "SCHEDULED");
  for (const auto& run : r.body.value("runs", nlohmann::json::array())) {
    std::printf("%-40s %-3s %-10s %-16s %-8s %s\n", Str(run, "run_id").c_str(),
                Str(run, "attempt").c_str(), Str(run, "outcome").c_str(),
                Str(run, "node_id").c_str(), Str(run, "fencing_token").c_str(),
                Str(run, "scheduled_at").c_str());
  }
  return kExitOk;
}

// Every [[job]] of a TOML jobs file, created through the API (all must be valid first); with
// --replace, a job that exists is replaced (PUT with the version read as If-Match).
int Add(const JobArgs& a) {
  Result<std::vector<CompiledJob>> jobs = LoadJobsFile(a.file, JobSpec{});
  if (!jobs.ok()) {
    std::cerr << "gnomon job add: " << jobs.status().message() << "\n";
    return kExitUsage;
  }
  for (const CompiledJob& compiled : *jobs) {
    JobSpec job = compiled.spec;
    job.read_only = false;
    job.source.clear();
    const std::string body = server::DumpJson(server::JobSpecToJson(job));
    const server::ApiReply now = server::ApiClient(a.api).Call("GET", "/api/v1/jobs/" + job.id);
    if (a.replace && now.ok()) {
      Reply r = Call(a, "PUT", "/api/v1/jobs/" + job.id, body, now.etag);
      if (r.exit_code != kExitOk) return r.exit_code;
      std::cout << "replaced " << job.id << "\n";
      continue;
    }
    Reply r = Call(a, "POST", "/api/v1/jobs", body);
    if (r.exit_code != kExitOk) return r.exit_code;
    std::cout << "created " << job.id << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddJobCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<JobArgs>();
  CLI::App* job = app.add_subcommand("job", "Manage jobs of a running daemon through its HTTP API");
  job->require_subcommand(1);
  job->add_option("--server", a->api.server, "Daemon URL")->capture_default_str();
  job->add_option("--token", a->api.token, "Bearer token (or GNOMON_TOKEN)")
      ->envname("GNOMON_TOKEN");
  job->add_option("--token-file", a->api.token_file,
                  "File holding the bearer token (or GNOMON_TOKEN_FILE)")
      ->envname("GNOMON_TOKEN_FILE");
  job->add_option("--data-dir", a->api.data_dir,
                  "For a server on this host without --token: its data directory, whose generated "
                  "admin token is used (or GNOMON_DATA_DIR)")
      ->envname("GNOMON_DATA_DIR")
      ->capture_default_str();
  job->add_option("--ca-file", a->api.ca_file,
                  "https: PEM file of the CAs to trust instead of the system's (or GNOMON_CA_FILE)")
      ->envname("GNOMON_CA_FILE");
  job->add_option("--cert", a->api.client_cert,
                  "https with mutual TLS: this client's PEM certificate (or GNOMON_CLIENT_CERT)")
      ->envname("GNOMON_CLIENT_CERT");
  job->add_option("--key", a->api.client_key,
                  "https with mutual TLS: the certificate's PEM key (or GNOMON_CLIENT_KEY)")
      ->envname("GNOMON_CLIENT_KEY");
  CLI::App* ls = job->add_subcommand("ls", "List jobs");
  ls->add_flag("--json", a->json, "Print the API's JSON");
  ls->callback([a, exit_code] { *exit_code = Ls(*a); });
  CLI::App* show = job->add_subcommand("show", "Show one job (JSON)");
  show->add_option("ID", a->id, "Job id")->required();
  show->callback([a, exit_code] {
    Reply r = Call(*a, "GET", "/api/v1/jobs/" + a->id);
    if (r.exit_code == kExitOk) std::cout << r.body.dump(2) << "\n";
    *exit_code = r.exit_code;
  });
  CLI::App* add = job->add_subcommand("add", "Create the jobs of a TOML jobs file");
  add->add_option("FILE", a->file, "Jobs file ([[job]] tables, the keys of docs/configuration.md)")
      ->required();
  add->add_flag("--replace", a->replace, "Replace jobs that exist (If-Match their version)");
  add->callback([a, exit_code] { *exit_code = Add(*a); });
  CLI::App* output = job->add_subcommand("output", "A run's output (its newest attempt)");
  output->add_option("RUN_ID", a->id, "Run id")->required();
  output->add_flag("-f,--follow", a->follow, "Print what it prints next, until it ends");
  output->callback([a, exit_code] {
    *exit_code = Exit(server::ApiClient(a->api).PrintOutput(a->id, a->follow, std::cout)).exit_code;
  });
  CLI::App* rm = job->add_subcommand("rm", "Delete a job created through the API");
  rm->add_option("ID", a->id, "Job id")->required();
  rm->callback(
      [a, exit_code] { *exit_code = Call(*a, "DELETE", "/api/v1/jobs/" + a->id).exit_code; });
  // POST verbs: on a job (pause, resume, trigger) or on a run (cancel, rerun).
  using Verb = std::pair<std::string, const char*>;
  for (const auto& [verb, help] :
       {Verb{"pause", "Pause the job cluster-wide"}, Verb{"resume", "Resume the job"},
        Verb{"trigger", "Fire it now"}, Verb{"cancel", "Cancel a running run (revoke its lease)"},
        Verb{"rerun", "Run a run that ended again (next attempt)"},
        Verb{"backfill", "Run the fires of a past window that have no record"}}) {
    const bool on_run = verb == "cancel" || verb == "rerun";
    CLI::App* c = job->add_subcommand(verb, help);
    c->add_option(on_run ? "RUN_ID" : "ID", a->id, on_run ? "Run id" : "Job id")->required();
    if (verb == "trigger" || verb == "rerun") c->add_option("--param", a->params, "k=v, k:=json");
    if (verb == "backfill") {
      c->add_option("--from", a->from, "Start of the window, RFC 3339")->required();
      c->add_option("--to", a->to, "End of the window (excluded), RFC 3339")->required();
      c->add_option("--max-concurrent", a->max_concurrent, "Fires run at once")
          ->capture_default_str();
    }
    c->callback([a, exit_code, verb = verb, on_run] {  // (clang 14: a binding is not captured)
      Result<std::string> params = server::ParamsFromArgs(a->params);
      if (!params.ok()) {
        std::cerr << "gnomon job " << verb << ": " << params.status().message() << "\n";
        return void(*exit_code = kExitUsage);
      }
      // A run id's '#' (shards) must be escaped in the path.
      const std::string target =
          on_run ? "runs/" + httplib::detail::encode_query_param(a->id) : "jobs/" + a->id;
      const nlohmann::json window = {
          {"from", a->from}, {"to", a->to}, {"max_concurrent", a->max_concurrent}};
      Reply r = Call(*a, "POST", "/api/v1/" + target + "/" + verb,
                     verb == "backfill" ? window.dump()
                     : params->empty()  ? "{}"
                                        : "{\"params\":" + *params + "}");
      for (const auto& id : r.body.value("run_ids", nlohmann::json::array()))
        std::cout << id.get<std::string>() << "\n";
      if (r.exit_code == kExitOk && verb != "cancel" && r.body.contains("run_id")) {
        std::cout << r.body["run_id"].get<std::string>() << "\n";
      }
      *exit_code = r.exit_code;
    });
  }
  CLI::App* runs = job->add_subcommand("runs", "Recent runs, newest first");
  runs->add_option("ID", a->id, "Only this job");
  runs->add_option("--outcome", a->outcome,
                   "succeeded, failed, timed_out, cancelled, skipped, lost");
  runs->add_option("-n,--limit", a->limit, "How many")->check(CLI::Range(1, 1000));
  runs->add_flag("--json", a->json, "Print the API's JSON");
  runs->callback([a, exit_code] { *exit_code = Runs(*a); });
}

}  // namespace gnomon::app
