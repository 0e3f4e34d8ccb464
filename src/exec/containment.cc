#include "src/exec/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include "src/exec/posix_util.h"

namespace gnomon::exec_internal {
namespace {

// The whole (small) file, or nullopt.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  return ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

// The mount point of the cgroup v2 hierarchy, from /proc/self/mountinfo ("" when none).
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "<id> <parent> <major:minor> <root> <mount point> <options> ... - <fstype> <source> ..."
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    head >> id >> parent >> dev >> root >> mount;
    return mount;
  }
  return "";
}

// This process's path in the cgroup v2 hierarchy (the "0::" line of /proc/self/cgroup).
std::string OwnCgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

// Whether `pid` has exited and waits to be reaped (state Z in /proc/<pid>/stat).
bool IsZombie(pid_t pid) {
  const std::optional<std::string> stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;  // gone
  const size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] == 'Z';
}

}  // namespace

std::optional<CgroupBase> DetectCgroupBase(std::string* why_not) {
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) {
    *why_not = "no cgroup v2 hierarchy is mounted";
    return std::nullopt;
  }
  std::string own = OwnCgroup();
  if (own.empty()) {
    *why_not = "this process has no cgroup v2 path (/proc/self/cgroup)";
    return std::nullopt;
  }
  if (own == "/") own.clear();
  CgroupBase base;
  // One base per executor (a process may have several): "gnomon-runs-<pid>-<n>".
  static std::atomic<int> instances{0};
  base.dir = mount + own + "/gnomon-runs-" + std::to_string(::getpid()) + "-" +
             std::to_string(instances++);
  if (::mkdir(base.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *why_not = "cannot create " + base.dir + ": " + ErrnoText(errno) +
               " (the cgroup hierarchy is not delegated to this user)";
    return std::nullopt;
  }
  if (::access((base.dir + "/cgroup.kill").c_str(), W_OK) != 0) {
    ::rmdir(base.dir.c_str());
    *why_not = "the kernel has no cgroup.kill (Linux 5.14 or later is needed)";
    return std::nullopt;
  }
  // Limits need the controllers enabled for the run cgroups; a hierarchy without them (or one
  // that refuses: this process's own cgroup has processes) still gives containment.
  const std::string controllers = ReadSmallFile(base.dir + "/cgroup.controllers").value_or("");
  for (const char* c : {"memory", "pids"}) {
    if (HasWord(controllers, c))
      WriteFile(base.dir + "/cgroup.subtree_control", std::string("+") + c);
  }
  const std::string enabled = ReadSmallFile(base.dir + "/cgroup.subtree_control").value_or("");
  base.memory = HasWord(enabled, "memory");
  base.pids = HasWord(enabled, "pids");
  return base;
}

std::optional<RunCgroup> RunCgroup::Create(const CgroupBase& base, const std::string& name,
                                           int64_t memory_max, int pids_max, std::string* error) {
  RunCgroup cgroup(base.dir + "/" + name);
  int made = ::mkdir(cgroup.dir_.c_str(), 0755);
  if (made != 0 && errno == EEXIST) {
    // Left by an earlier process with this pid (the base's name) that ended without removing it
    // (kill -9): what still runs in it are orphans of a daemon that is gone. End them and take
    // the name over.
    { RunCgroup stale(cgroup.dir_); }  // its destructor kills what is left and removes it
    made = ::mkdir(cgroup.dir_.c_str(), 0755);
  }
  if (made != 0) {
    *error = "cgroup " + cgroup.dir_ + ": " + ErrnoText(errno);
    cgroup.dir_.clear();  // nothing to remove
    return std::nullopt;
  }
  if (memory_max > 0 && base.memory) {
    if (!WriteFile(cgroup.dir_ + "/memory.max", std::to_string(memory_max))) {
      *error = "cgroup " + cgroup.dir_ + ": memory.max: " + ErrnoText(errno);
      return std::nullopt;
    }
    WriteFile(cgroup.dir_ + "/memory.swap.max", "0");  // best effort: no swapping past the limit
    cgroup.memory_limited_ = true;
  }
  if (pids_max > 0 && base.pids) {
    if (!WriteFile(cgroup.dir_ + "/pids.max", std::to_string(pids_max))) {
      *error = "cgroup " + cgroup.dir_ + ": pids.max: " + ErrnoText(errno);
      return std::nullopt;
    }
    cgroup.pids_limited_ = true;
  }
  return cgroup;
}

RunCgroup::RunCgroup(RunCgroup&& other) noexcept
    : dir_(std::move(other.dir_)),
      procs_path_(std::move(other.procs_path_)),
      memory_limited_(other.memory_limited_),
      pids_limited_(other.pids_limited_) {
  other.dir_.clear();
}

RunCgroup::~RunCgroup() {
  if (dir_.empty()) return;
  if (::rmdir(dir_.c_str()) != 0 && errno == EBUSY) {
    Kill();
    ::rmdir(dir_.c_str());
  }
}

void RunCgroup::Kill() {
  if (dir_.empty()) return;
  WriteFile(dir_ + "/cgroup.kill", "1");
  // cgroup.events changes ("populated 0") wake a poll for POLLPRI: wait for it, at most ~1 s.
  UniqueFd events(::open((dir_ + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC));
  for (int round = 0; round < 50 && events.valid(); ++round) {
    char buf[256];
    const ssize_t n = ::pread(events.get(), buf, sizeof buf - 1, 0);
    if (n <= 0) break;
    buf[n] = '\0';
    if (std::string(buf).find("populated 0") != std::string::npos) break;
    pollfd p{events.get(), POLLPRI, 0};
    ::poll(&p, 1, 20);
  }
}

bool RunCgroup::OomKilled() const {
  if (!memory_limited_) return false;
  const std::string events = ReadSmallFile(dir_ + "/memory.events").value_or("");
  std::istringstream in(events);
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill" && value > 0) return true;
  }
  return false;
}

std::vector<pid_t> Descendants(pid_t root) {
  std::vector<pid_t> out;
  std::set<pid_t> seen = {root};
  std::vector<pid_t> todo = {root};
  while (!todo.empty() && out.size() < 100000) {
    const pid_t pid = todo.back();
    todo.pop_back();
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* dir = ::opendir(tasks.c_str());
    if (dir == nullptr) continue;
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream children(tasks + "/" + e->d_name + "/children");
      pid_t child = 0;
      while (children >> child) {
        if (!seen.insert(child).second) continue;
        todo.push_back(child);
        if (!IsZombie(child)) out.push_back(child);  // a zombie is gone already
      }
    }
    ::closedir(dir);
  }
  return out;
}

void SignalDescendants(pid_t root, int sig) {
  for (int walk = 0; walk < 100; ++walk) {
    const std::vector<pid_t> pids = Descendants(root);
    if (pids.empty()) return;
    for (pid_t pid : pids) ::kill(pid, sig);
    if (sig != SIGKILL) return;
  }
}

}  // namespace gnomon::exec_internal
