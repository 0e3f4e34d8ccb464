#include "src/server/executor_policy.h"

#include <arpa/inet.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "src/server/api_util.h"
#include "src/server/auth.h"

namespace gnomon::server {

namespace {

// The address of an IP literal (IPv4 as ::ffff:a.b.c.d is not accepted: plain forms only).
bool ParseAddress(std::string_view text, unsigned char out[16], bool* v6) {
  std::string s(text);
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) == 1) {
    std::memcpy(out, &a, 4);
    *v6 = false;
    return true;
  }
  in6_addr a6{};
  if (::inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    std::memcpy(out, &a6, 16);
    *v6 = true;
    return true;
  }
  return false;
}

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

Result<Cidr> ParseCidr(std::string_view text) {
  Cidr c;
  c.text = std::string(text);
  const size_t slash = text.find('/');
  if (!ParseAddress(text.substr(0, slash), c.address, &c.v6)) {
    return InvalidArgumentError("\"" + Shown(text) + "\" is not an IP network (10.0.0.0/8)");
  }
  const int bits = c.v6 ? 128 : 32;
  c.prefix = bits;
  if (slash != std::string_view::npos) {
    std::optional<int64_t> n = ParsePositive(text.substr(slash + 1));
    if (!n || *n > bits) {
      return InvalidArgumentError("\"" + Shown(text) + "\": the prefix must be 0-" +
                                  std::to_string(bits));
    }
    c.prefix = static_cast<int>(*n);
  }
  return c;
}

bool CidrContains(const Cidr& cidr, std::string_view address) {
  unsigned char a[16] = {};
  bool v6 = false;
  if (!ParseAddress(address, a, &v6) || v6 != cidr.v6) return false;
  for (int bit = 0; bit < cidr.prefix; ++bit) {
    const int byte = bit / 8, mask = 0x80 >> (bit % 8);
    if ((a[byte] & mask) != (cidr.address[byte] & mask)) return false;
  }
  return true;
}

Policies::Policies() : entries_(1) {
  for (const std::string& d : entries_[0].policy.egress_deny) entries_[0].deny.push_back(*ParseCidr(d));
}

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
      if (!IsValidJobId(p.ns)) return InvalidArgumentError(where + ": namespace: not a job-id prefix");
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
    for (const std::string& c : p.egress_allow) {
      Result<Cidr> cidr = ParseCidr(c);
      if (!cidr.ok()) return cidr.status().WithPrefix(where + ": egress_allow");
      e.allow.push_back(std::move(*cidr));
    }
    for (const std::string& c : p.egress_deny) {
      Result<Cidr> cidr = ParseCidr(c);
      if (!cidr.ok()) return cidr.status().WithPrefix(where + ": egress_deny");
      e.deny.push_back(std::move(*cidr));
    }
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
const std::vector<Cidr>& Policies::EgressAllow(std::string_view job_id) const {
  return EntryFor(job_id).allow;
}
const std::vector<Cidr>& Policies::EgressDeny(std::string_view job_id) const {
  return EntryFor(job_id).deny;
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
    return Refused(p, "the " + executor + " executor is not allowed (executors = [" + [&] {
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
        allowed = allowed || (program.starts_with(c) &&
                              program.find('/', c.size()) == std::string::npos &&
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
    const std::string_view host = UrlHost(job.http->url);
    for (const Cidr& d : e.deny) {
      if (CidrContains(d, host)) {
        return Refused(p, "http.url: " + std::string(host) + " is denied by egress_deny " + d.text);
      }
    }
    if (!e.allow.empty() && IsIpLiteral(std::string(host[0] == '[' ? host.substr(1, host.size() - 2)
                                                                   : host))) {
      const bool allowed = std::any_of(e.allow.begin(), e.allow.end(),
                                       [&](const Cidr& a) { return CidrContains(a, host); });
      if (!allowed) {
        return Refused(p, "http.url: " + std::string(host) + " is not in egress_allow");
      }
    }
  } else {
    const std::string& run_as = job.run_as.empty() ? p.run_as : job.run_as;
    const bool as_root = run_as.empty() ? daemon_is_root : IsRootSpec(run_as);
    if (as_root && !p.allow_root) {
      return Refused(p, "process jobs defined through the API may not run as root: set run_as "
                        "(or the policy's run_as), or allow_root = true");
    }
  }
  return Status::Ok();
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
