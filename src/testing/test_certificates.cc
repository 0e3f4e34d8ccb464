#include "src/testing/test_certificates.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "gnomon/status.h"

extern char** environ;

namespace gnomon::testing {
namespace {

constexpr const char* kOpenssl = "/usr/bin/openssl";

// Runs `argv` with stdout and stderr appended to `log`; true when it exits 0.
bool Run(std::vector<std::string> argv, const std::string& log) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

bool HaveOpenssl() { return access(kOpenssl, X_OK) == 0; }

TestCertificates::TestCertificates() {
  std::string pattern = std::filesystem::temp_directory_path() / "gnomon-tls-XXXXXX";
  GNOMON_CHECK(mkdtemp(pattern.data()) != nullptr);
  dir_ = pattern;
  if (!HaveOpenssl()) return;
  const std::string log = File("openssl.log");
  auto key = [&](const std::string& name) {
    return Run({kOpenssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-out", File(name)},
               log);
  };
  auto make_ca = [&](const std::string& name, const std::string& cn) {
    return key(name + ".key") &&
           Run({kOpenssl, "req", "-x509", "-new", "-key", File(name + ".key"), "-subj", "/CN=" + cn,
                "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                "keyUsage=critical,keyCertSign,cRLSign", "-out", File(name + ".crt")},
               log);
  };
  // A certificate for `key_name`'s key, signed by the CA, valid for `days` (-1: expired).
  auto signed_cert = [&](const std::string& key_name, const std::string& cn, const std::string& ext,
                         const std::string& out, const std::string& days) {
    std::ofstream(File(out + ".ext")) << ext;
    return Run({kOpenssl, "req", "-new", "-key", File(key_name), "-subj", "/CN=" + cn, "-out",
                File(out + ".csr")},
               log) &&
           Run({kOpenssl, "x509", "-req", "-in", File(out + ".csr"), "-CA", ca(), "-CAkey",
                File("ca.key"), "-CAcreateserial", "-days", days, "-extfile", File(out + ".ext"),
                "-out", File(out)},
               log);
  };
  const std::string server_ext =
      "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n";
  ok_ = make_ca("ca", "gnomon test CA") && make_ca("other-ca", "gnomon other CA") &&
        key("server.key") &&
        signed_cert("server.key", "localhost", server_ext, "server.crt", "2") &&
        signed_cert("server.key", "localhost", server_ext, "expired.crt", "-1") &&
        key("client.key") &&
        signed_cert("client.key", "gnomon-client", "extendedKeyUsage=clientAuth\n", "client.crt",
                    "2") &&
        key("self.key") &&
        Run({kOpenssl, "req", "-x509", "-new", "-key", File("self.key"), "-subj", "/CN=localhost",
             "-days", "2", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-out",
             File("self.crt")},
            log);
}

TestCertificates::~TestCertificates() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TestCertificates::Log() const {
  std::ifstream in(File("openssl.log"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gnomon::testing
