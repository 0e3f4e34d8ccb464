#include "src/server/executor_policy.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "src/server/api_util.h"
#include "src/server/auth.h"

namespace gnomon::server {

namespace {

std::string Name(const ExecutorPolicy& p) { return p.ns.empty() ? "default" : p.ns; }

Status Refused(const ExecutorPolicy& p, const std::string& what) {
  return FailedPreconditionError("policy \"" + Name(p) + "\": " + what);
}

// The host of an http(s) URL (checked by ValidateJobSpec already).
std::string_view UrlHost(std::string_view url) {
  std::string_view rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (!rest.empty() && rest.front() == '[') return rest.substr(0, rest.find(']') + 1);
  return rest.substr(0, rest.rfind(':'));
}

bool IsRootSpec(std::string_view run_as) {
  const std::string_view user = run_as.substr(0, run_as.find(':'));
  return user == "root" || user == "0";
}

}  // namespace

Policies::Policies() : entries_(1) { entries_[0].egress = net::EgressRule::Default(); }

Result<Policies> Policies::Make(std::vector<ExecutorPolicy> policies) {
  Policies out;
  std::set<std::string> namespaces;
  bool has_default = false;
  for (ExecutorPolicy& p : policies) {
    const std::string where = "policy \"" + Name(p) + "\"";
    if (p.ns.empty()) {
      if (has_default) return InvalidArgumentError(where + ": there is one default policy only");
      has_default = true;
    } else {
      if (!IsValidJobId(p.ns))
        return InvalidArgumentError(where + ": namespace: not a job-id prefix");
      if (!namespaces.insert(p.ns).second) return InvalidArgumentError(where + ": defined twice");
    }
    for (const std::string& e : p.executors) {
      if (e != "command" && e != "argv" && e != "http") {
        return InvalidArgumentError(where + ": executors: \"" + Shown(e) +
                                    "\" is not one of command, argv, http");
      }
    }
    for (const std::string& c : p.commands) {
      if (c.empty() || c.front() != '/') {
        return InvalidArgumentError(where + ": commands: \"" + Shown(c) +
                                    "\" is not an absolute path");
      }
    }
    if (!p.run_as.empty()) {
      JobSpec probe;
      probe.id = "probe";
      probe.schedule = "@daily";
      probe.command = "true";
      probe.run_as = p.run_as;
      if (Status s = ValidateJobSpec(probe); !s.ok()) {
        return InvalidArgumentError(where + ": run_as: \"" + Shown(p.run_as) +
                                    "\" is not user[:group]");
      }
    }
    Entry e;
    Result<net::EgressRule> egress = net::EgressRule::Parse(p.egress_allow, p.egress_deny);
    if (!egress.ok()) return egress.status().WithPrefix(where);
    e.egress = std::move(*egress);
    e.policy = std::move(p);
    if (e.policy.ns.empty()) {
      out.entries_[0] = std::move(e);
    } else {
      out.entries_.push_back(std::move(e));
    }
  }
  return out;
}

const Policies::Entry& Policies::EntryFor(std::string_view job_id) const {
  const Entry* best = &entries_[0];
  for (size_t i = 1; i < entries_.size(); ++i) {
    const std::string& ns = entries_[i].policy.ns;
    if (job_id.starts_with(ns) && ns.size() > (best == &entries_[0] ? 0 : best->policy.ns.size())) {
      best = &entries_[i];
    }
  }
  return *best;
}

const ExecutorPolicy& Policies::For(std::string_view job_id) const {
  return EntryFor(job_id).policy;
}
const net::EgressRule& Policies::Egress(std::string_view job_id) const {
  return EntryFor(job_id).egress;
}

JobSpec Policies::WithDefaults(JobSpec job) const {
  const ExecutorPolicy& p = For(job.id);
  if (job.run_as.empty() && !job.http && !job.in_process && !p.run_as.empty()) {
    job.run_as = p.run_as;
  }
  return job;
}

Status Policies::Check(const JobSpec& job, bool daemon_is_root) const {
  const Entry& e = EntryFor(job.id);
  const ExecutorPolicy& p = e.policy;
  const std::string executor = job.http ? "http" : !job.argv.empty() ? "argv" : "command";
  if (job.in_process) return Status::Ok();  // registered by the embedder: not a definition
  if (std::find(p.executors.begin(), p.executors.end(), executor) == p.executors.end()) {
    return Refused(
        p, "the " + executor + " executor is not allowed (executors = [" + [&] {
          std::string list;
          for (const std::string& x : p.executors) list += (list.empty() ? "" : ", ") + x;
          return list;
        }() + "])");
  }
  if (executor != "http" && !p.commands.empty()) {
    bool allowed = false;
    for (const std::string& c : p.commands) {
      if (executor == "command") {
        allowed = allowed || job.command == c;
      } else if (c.back() == '/') {
        const std::string& program = job.argv[0];
        allowed = allowed ||
                  (program.starts_with(c) && program.find('/', c.size()) == std::string::npos &&
                   program.find("..") == std::string::npos);
      } else {
        allowed = allowed || job.argv[0] == c;
      }
    }
    if (!allowed) {
      return Refused(p, executor == "command"
                            ? "command \"" + Shown(job.command) + "\" is not in commands"
                            : "argv[0] \"" + Shown(job.argv[0]) + "\" is not in commands");
    }
  }
  if (executor == "http") {
    // An address in the URL is judged now; a host name when connecting (HttpExecutor's
    // egress_for), where the same rule refuses every address it resolves to.
    const std::string_view host = UrlHost(job.http->url);
    if (net::IpAddress::Parse(host)) {
      if (Status s = net::CheckEgress(e.egress, host); !s.ok()) {
        return Refused(p, "http.url: " + s.message());
      }
    }
  } else {
    const std::string& run_as = job.run_as.empty() ? p.run_as : job.run_as;
    const bool as_root = run_as.empty() ? daemon_is_root : IsRootSpec(run_as);
    if (as_root && !p.allow_root) {
      return Refused(p,
                     "process jobs defined through the API may not run as root: set run_as "
                     "(or the policy's run_as), or allow_root = true");
    }
  }
  return Status::Ok();
}

HttpExecutorOptions PolicyHttpOptions(const Reloadable<Policies>& policies, const TlsOptions& tls) {
  HttpExecutorOptions h;
  h.tls = tls;
  h.egress_for = [&policies](const JobSpec& job) {
    return job.source == "api" ? policies.Get()->Egress(job.id) : net::EgressRule{};
  };
  return h;
}

bool DaemonRunsAsRoot() { return ::geteuid() == 0; }

bool RunsAsRoot(const JobSpec& job) {
  if (job.run_as.empty()) return DaemonRunsAsRoot();
  const std::string user = job.run_as.substr(0, job.run_as.find(':'));
  if (IsRootSpec(user)) return true;
  if (std::all_of(user.begin(), user.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;  // a number other than 0
  }
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  return found != nullptr && found->pw_uid == 0;
}

ExecResult PolicyGuard::Execute(const JobSpec& job, const RunContext& ctx) {
  if (job.source != "api") return next_.Execute(job, ctx);
  const std::shared_ptr<const Policies> policies = policies_.Get();
  Status s = policies->Check(job, DaemonRunsAsRoot());
  if (s.ok() && !job.http && !job.in_process && RunsAsRoot(job) &&
      !policies->For(job.id).allow_root) {
    s = FailedPreconditionError("policy \"" + Name(policies->For(job.id)) + "\": run_as \"" +
                                job.run_as + "\" is uid 0, and allow_root is false");
  }
  if (s.ok()) return next_.Execute(job, ctx);
  ExecResult refused;
  refused.outcome = RunOutcome::kFailed;
  refused.error = s.message();
  return refused;
}

}  // namespace gnomon::server
