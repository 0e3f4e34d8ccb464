// Executor policy (docs/operations.md "Running safely"): what a job defined through the API may
// run, and as whom. One policy per namespace (a job-id prefix, `[[policy]] namespace = ...`), and
// a global default (`[[policy]]` without a namespace); a job follows the policy of its longest
// matching namespace, else the default. Jobs from files on disk are not bound by it: the file's
// owner is trusted.
//
// Enforced twice: when a definition is made through the API (a refused one gets 403 naming the
// rule) and again before each run of a job defined through the API (a definition stored by a node
// with another policy, or one that a reload made illegal, fails its run with the rule's name).
//
// Thread safety: immutable after Make; share it freely.
#ifndef GNOMON_SRC_SERVER_EXECUTOR_POLICY_H_
#define GNOMON_SRC_SERVER_EXECUTOR_POLICY_H_

#include <string>
#include <string_view>
#include <vector>

#include "gnomon/executor.h"
#include "gnomon/http_executor.h"
#include "gnomon/job.h"
#include "gnomon/net.h"
#include "gnomon/status.h"
#include "src/server/reloadable.h"

namespace gnomon::server {

// One `[[policy]]` table.
struct ExecutorPolicy {
  std::string ns;  // job-id prefix; empty = the global default
  // Executors definitions may use: "command", "argv", "http". Default all three.
  std::vector<std::string> executors = {"command", "argv", "http"};
  // When not empty, the only programs process jobs may run: an entry is a path that argv[0] must
  // equal, or a path ending in '/' that argv[0] must lie directly in; a `command` (a shell
  // string, which can run anything) must equal an entry exactly. Default empty (any).
  std::vector<std::string> commands;
  // Where HTTP jobs may connect, by the address connected to: CIDRs. deny wins over allow; an
  // empty allow list allows every address not denied. Default: allow any, deny link-local
  // (169.254.0.0/16, fe80::/10: cloud metadata services live there).
  std::vector<std::string> egress_allow;
  std::vector<std::string> egress_deny = {"169.254.0.0/16", "fe80::/10"};
  // run_as of process jobs that set none. Default empty (the daemon's user).
  std::string run_as;
  // Whether process jobs may run as root (uid 0), also by default when gnomon runs as root and
  // neither the job nor the policy sets run_as. Default false.
  bool allow_root = false;
};

class Policies {
 public:
  // Checks each policy (executor names, CIDRs, run_as syntax, unique namespaces, at most one
  // default). InvalidArgument naming the policy and the field.
  static Result<Policies> Make(std::vector<ExecutorPolicy> policies);
  Policies();  // the built-in default only

  // The policy `job_id` follows.
  const ExecutorPolicy& For(std::string_view job_id) const;
  // `job` with its policy's defaults applied (run_as of a process job that sets none).
  JobSpec WithDefaults(JobSpec job) const;
  // OK, or FailedPrecondition "policy \"<namespace or default>\": ..." naming the rule `job`
  // breaks: an executor not allowed, a program outside `commands`, an HTTP URL whose host is an
  // address the egress rule denies (host names are checked when connecting), or running as root.
  // `daemon_is_root`: whether a job without run_as would run as root.
  Status Check(const JobSpec& job, bool daemon_is_root) const;
  // The egress rule of `job_id`'s policy (the default policy's for ""), parsed.
  const net::EgressRule& Egress(std::string_view job_id) const;

 private:
  struct Entry {
    ExecutorPolicy policy;
    net::EgressRule egress;
  };
  const Entry& EntryFor(std::string_view job_id) const;
  std::vector<Entry> entries_;  // [0] is the default
};

// The run-time check: an Executor that refuses (fails with the rule's name) a run of a job defined
// through the API (source "api") that its policy does not allow, also when the job would run as
// a user whose uid is 0 under another name; other runs go to `next` unchanged. Thread-safe.
class PolicyGuard final : public Executor {
 public:
  // Not owned; must outlive this object.
  PolicyGuard(Executor& next, const Reloadable<Policies>& policies)
      : next_(next), policies_(policies) {}
  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

 private:
  Executor& next_;
  const Reloadable<Policies>& policies_;
};

// Options of the HTTP executor of a node or worker: `tls`, and per job the egress rule of its
// namespace's policy (as `policies` holds it at each request) when the job was defined through
// the API, none for other jobs (files on disk: their owner is trusted). `policies` is not owned
// and must outlive the executor.
HttpExecutorOptions PolicyHttpOptions(const Reloadable<Policies>& policies, const TlsOptions& tls);

// Whether this process runs as root (a job without run_as would too).
bool DaemonRunsAsRoot();
// Whether a process job would run as uid 0: run_as naming root (by name or number, any name
// whose uid is 0), or, without run_as, a daemon running as root.
bool RunsAsRoot(const JobSpec& job);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_EXECUTOR_POLICY_H_
