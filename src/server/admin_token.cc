#include "src/server/admin_token.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/net/http_url.h"
#include "src/server/auth.h"
#include "src/server/toml_reader.h"

namespace gnomon::server {
namespace {

constexpr size_t kSecretBytes = 32;
constexpr size_t kMaxFileBytes = 4096;

std::string Base64Url(const unsigned char* data, size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t bits = 0;
  int have = 0;
  for (size_t i = 0; i < n; ++i) {
    bits = (bits << 8) | data[i];
    have += 8;
    while (have >= 6) {
      have -= 6;
      out += kAlphabet[(bits >> have) & 63];
    }
  }
  if (have > 0) out += kAlphabet[(bits << (6 - have)) & 63];
  return out;
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

Result<AdminToken> ReadFrom(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    if (errno == ELOOP) return FailedPreconditionError(path + ": is a symbolic link; refusing it");
    return UnavailableError(Errno("cannot open", path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return UnavailableError(Errno("cannot stat", path));
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    return FailedPreconditionError(
        path + ": must be a regular file owned by this user with mode 0600 (chmod 600 " + path +
        ", or delete it to make a new token)");
  }
  std::string text(kMaxFileBytes, '\0');
  const ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (n < 0) return UnavailableError(Errno("cannot read", path));
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.size() < 16 || text.find_first_of(" \t\r\n") != std::string::npos) {
    return FailedPreconditionError(path + ": is not a token (16 or more characters on one line)");
  }
  return AdminToken{path, std::move(text), false};
}

}  // namespace

Result<AdminToken> ReadAdminToken(const std::string& data_dir) {
  return ReadFrom((std::filesystem::path(data_dir) / kAdminTokenFile).string());
}

Result<AdminToken> LoadOrCreateAdminToken(const std::string& data_dir) {
  const std::string path = (std::filesystem::path(data_dir) / kAdminTokenFile).string();
  Result<AdminToken> existing = ReadFrom(path);
  if (existing.ok() || existing.status().code() != StatusCode::kNotFound) return existing;
  std::error_code ec;
  if (!std::filesystem::exists(data_dir, ec)) {
    std::filesystem::create_directories(data_dir, ec);
    if (ec) return UnavailableError("cannot create " + data_dir + ": " + ec.message());
    ::chmod(data_dir.c_str(), 0700);
  }
  unsigned char random[kSecretBytes];
  if (RAND_bytes(random, sizeof random) != 1) {
    return UnavailableError("cannot draw random bytes for the admin token");
  }
  AdminToken token{path, Base64Url(random, sizeof random), true};
  // Written whole to a private temporary file, then linked into place: a node starting at the
  // same moment on this host reads either no file or the whole token, and the first link wins.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError(Errno("cannot create", tmp));
  const std::string line = token.secret + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return UnavailableError(Errno("cannot write", tmp));
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (link_errno == EEXIST) return ReadFrom(path);
    errno = link_errno;
    return UnavailableError(Errno("cannot create", path));
  }
  return token;
}

Result<std::string> ClientToken(const std::string& token, const std::string& token_file,
                                const std::string& data_dir, const std::string& server_url,
                                bool has_client_cert) {
  if (!token.empty()) return token;
  if (!token_file.empty()) {
    Result<std::string> text = ReadConfigFile(token_file);
    if (!text.ok()) return text.status();
    std::string t = *text;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    return t;
  }
  Result<net::HttpUrl> url = net::ParseHttpUrl(server_url);
  if (has_client_cert || !url.ok() || !IsLoopbackHost(url->host)) return std::string();
  Result<AdminToken> admin = ReadAdminToken(data_dir);
  if (admin.ok()) return admin->secret;
  if (admin.status().code() == StatusCode::kNotFound) return std::string();
  return admin.status();
}

}  // namespace gnomon::server
