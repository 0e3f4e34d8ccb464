// The plan of a process run (src/exec/exec_plan.h).
#include "src/exec/exec_plan.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string_view>

extern char** environ;  // NOLINT: POSIX

namespace gnomon::exec_internal {
namespace {

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

// The user a run runs as: resolved in the parent (getpwnam is not async-signal-safe).
struct RunUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string name;
  std::string home;
};

// "user[:group]" (names or numbers), or the daemon's own user when `spec` is empty.
std::optional<std::string> ResolveUser(const std::string& spec, RunUser* out) {
  std::vector<char> buf(64 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  const size_t colon = spec.find(':');
  const std::string user = spec.empty() ? "" : spec.substr(0, colon);
  auto numeric = [](const std::string& s) {
    return !s.empty() && s.size() < 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (user.empty()) {
    getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found);
    out->uid = geteuid();
    out->gid = getegid();
  } else if (numeric(user)) {
    out->uid = static_cast<uid_t>(std::stoul(user));
    getpwuid_r(out->uid, &pw, buf.data(), buf.size(), &found);
    out->gid = found != nullptr ? found->pw_gid : out->uid;
  } else {
    getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (found == nullptr) return "run_as: no user \"" + user + "\" on this host";
    out->uid = found->pw_uid;
    out->gid = found->pw_gid;
  }
  out->name = found != nullptr ? found->pw_name : std::to_string(out->uid);
  out->home = found != nullptr && found->pw_dir[0] != '\0' ? found->pw_dir : "/";
  if (colon != std::string::npos) {
    const std::string group = spec.substr(colon + 1);
    if (numeric(group)) {
      out->gid = static_cast<gid_t>(std::stoul(group));
    } else {
      ::group gr{};
      ::group* g = nullptr;
      getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &g);
      if (g == nullptr) return "run_as: no group \"" + group + "\" on this host";
      out->gid = g->gr_gid;
    }
  }
  if (found != nullptr && !user.empty()) {
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (getgrouplist(out->name.c_str(), out->gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<size_t>(n));
      getgrouplist(out->name.c_str(), out->gid, groups.data(), &n);
    }
    groups.resize(static_cast<size_t>(std::max(n, 0)));
    out->groups = std::move(groups);
  } else {
    out->groups = {out->gid};
  }
  return std::nullopt;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

}  // namespace

std::optional<std::string> BuildPlan(const JobSpec& job, const RunContext& ctx,
                                     const std::string& shell, bool inherit_all,
                                     bool cgroup_limits_memory, bool cgroup_limits_pids,
                                     ExecPlan& plan) {
  const bool has_command = !job.command.empty();
  const bool has_argv = !job.argv.empty();
  if (has_command == has_argv) {
    return has_command ? "job \"" + job.id + "\": both command and argv are set"
                       : "job \"" + job.id + "\": neither command nor argv is set";
  }
  if (has_command) {
    if (HasNul(job.command)) return "command contains a NUL byte";
    plan.args = {shell, "-c", job.command};
  } else {
    plan.args = job.argv;
    for (size_t i = 0; i < plan.args.size(); ++i) {
      if (HasNul(plan.args[i])) return "argv[" + std::to_string(i) + "] contains a NUL byte";
    }
    if (plan.args[0].empty()) return "argv[0] is empty";
  }

  // Environment (docs/guarantees.md "What a run sees"): PATH, LANG and TZ of the daemon, HOME, USER
  // and LOGNAME of the run's user, the variables named in inherit_env, then job.env, then the run's
  // variables. Nothing else of the daemon's: its secrets stay its own.
  RunUser user;
  if (auto error = ResolveUser(job.run_as, &user)) return error;
  std::map<std::string, std::string> daemon;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    daemon.insert_or_assign(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  std::map<std::string, std::string> env;
  if (inherit_all) {
    env = daemon;
  } else {
    for (const char* name : {"PATH", "LANG", "TZ"}) {
      if (auto it = daemon.find(name); it != daemon.end()) env.insert(*it);
    }
    for (const std::string& name : job.inherit_env) {
      if (auto it = daemon.find(name); it != daemon.end()) env.insert(*it);
    }
  }
  if (!env.count("PATH")) env["PATH"] = kDefaultPath;
  env["HOME"] = user.home;
  env["USER"] = user.name;
  env["LOGNAME"] = user.name;
  for (const auto& [key, value] : job.env) {
    if (key.empty() || key.find('=') != std::string::npos || HasNul(key)) {
      return "env: invalid variable name \"" + key + "\"";
    }
    if (HasNul(value)) return "env: " + key + " contains a NUL byte";
    env.insert_or_assign(key, value);
  }
  for (auto& [key, value] : RunEnvironment(ctx)) {
    // A NUL would silently cut the value short; cut it here, visibly the same way.
    env.insert_or_assign(std::move(key), value.substr(0, value.find('\0')));
  }
  // The user to switch to, and the limits.
  if (!job.run_as.empty() && (user.uid != geteuid() || user.gid != getegid())) {
    if (geteuid() != 0) {
      return "run_as \"" + job.run_as + "\": gnomon runs as uid " + std::to_string(geteuid()) +
             ", not root: it cannot switch users";
    }
    plan.switch_user = true;
    plan.uid = user.uid;
    plan.gid = user.gid;
    plan.groups = user.groups;
    plan.home = user.home;
  }
  if (job.memory_max > 0 && !cgroup_limits_memory) {
    const rlim_t bytes = static_cast<rlim_t>(job.memory_max);
    plan.limits.push_back({RLIMIT_AS, bytes, bytes});
  }
  if (job.cpu_max > Duration(0)) {
    const rlim_t seconds = static_cast<rlim_t>((job.cpu_max.count() + 999) / 1000);
    plan.limits.push_back({RLIMIT_CPU, seconds, seconds + 1});
  }
  if (job.pids_max > 0 && !cgroup_limits_pids) {
    if (!plan.switch_user || plan.uid == 0) {
      return "pids_max: without a delegated cgroup pids controller it is an RLIMIT_NPROC of the "
             "run's user, which needs a run_as user other than root and the daemon's";
    }
    const rlim_t n = static_cast<rlim_t>(job.pids_max);
    plan.limits.push_back({RLIMIT_NPROC, n, n});
  }
  if (job.open_files > 0) {
    const rlim_t n = static_cast<rlim_t>(job.open_files);
    plan.limits.push_back({RLIMIT_NOFILE, n, n});
  }
  plan.env.reserve(env.size());
  for (const auto& [key, value] : env) plan.env.push_back(key + "=" + value);

  // The program: a path as given, or a PATH search like execvp's (without its /bin/sh fallback).
  const std::string& program = plan.args[0];
  plan.display = program;
  if (program.find('/') != std::string::npos) {
    plan.paths = {program};
  } else {
    const auto it = env.find("PATH");
    const std::string_view path = it != env.end() ? std::string_view(it->second) : kDefaultPath;
    size_t start = 0;
    while (true) {
      const size_t colon = path.find(':', start);
      std::string dir(path.substr(start, colon == std::string_view::npos ? colon : colon - start));
      if (dir.empty()) dir = ".";
      plan.paths.push_back(dir + "/" + program);
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
  }

  for (std::string& a : plan.args) plan.argv_ptrs.push_back(a.data());
  plan.argv_ptrs.push_back(nullptr);
  for (std::string& e : plan.env) plan.envp_ptrs.push_back(e.data());
  plan.envp_ptrs.push_back(nullptr);
  const long open_max = sysconf(_SC_OPEN_MAX);
  plan.max_fd = open_max > 0 ? static_cast<int>(std::min<long>(open_max, 1 << 20)) : 1024;
  plan.parent_pid = getpid();
  return std::nullopt;
}

}  // namespace gnomon::exec_internal
