// A free TCP port on 127.0.0.1 for tests that start servers (header-only, tests only).
#ifndef GNOMON_SRC_TESTING_FREE_PORT_H_
#define GNOMON_SRC_TESTING_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gnomon/status.h"

namespace gnomon::testing {

// A port that was free a moment ago (bound to 127.0.0.1, then released).
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  GNOMON_CHECK(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  GNOMON_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  GNOMON_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_TESTING_FREE_PORT_H_
