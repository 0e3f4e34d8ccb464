// ValidateTlsOptions (gnomon/net.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gnomon/net.h"

namespace gnomon::net {
namespace {

// OK when `path` can be opened for reading and is not a directory.
Status Readable(std::string_view field, const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return InvalidArgumentError(std::string(field) + ": \"" + path + "\": " + std::strerror(errno));
  }
  char byte;
  const ssize_t n = read(fd, &byte, 1);
  const int err = errno;
  close(fd);
  if (n < 0) {
    return InvalidArgumentError(std::string(field) + ": \"" + path + "\": " + std::strerror(err));
  }
  if (n == 0) return InvalidArgumentError(std::string(field) + ": \"" + path + "\" is empty");
  return Status::Ok();
}

}  // namespace

Status ValidateTlsOptions(const TlsOptions& tls) {
  if (!tls.server_name.empty()) {
    return InvalidArgumentError(
        "tls.server_name: not supported for HTTP peers (the certificate must name the URL's host)");
  }
  if (!tls.ca_file.empty()) GNOMON_RETURN_IF_ERROR(Readable("tls.ca_file", tls.ca_file));
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgumentError("tls: cert_file and key_file must be set together (or neither)");
  }
  if (!tls.cert_file.empty()) {
    GNOMON_RETURN_IF_ERROR(Readable("tls.cert_file", tls.cert_file));
    GNOMON_RETURN_IF_ERROR(Readable("tls.key_file", tls.key_file));
  }
  return Status::Ok();
}

}  // namespace gnomon::net
