#include "src/exec/posix_util.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace gnomon::exec_internal {
namespace {

// strerror_r comes in two shapes (GNU returns char*, XSI returns int); accept either.
[[maybe_unused]] std::string FromStrerror(const char* text, const char*) { return text; }
[[maybe_unused]] std::string FromStrerror(int rc, const char* buf) {
  return rc == 0 ? std::string(buf) : std::string("unknown error");
}

}  // namespace

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string ErrnoText(int err) {
  char buf[256] = {};
  return FromStrerror(strerror_r(err, buf, sizeof(buf)), buf) + " (errno " + std::to_string(err) +
         ")";
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGCHLD:
      return "SIGCHLD";
    case SIGCONT:
      return "SIGCONT";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGTTIN:
      return "SIGTTIN";
    case SIGTTOU:
      return "SIGTTOU";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace gnomon::exec_internal
