// The generated admin token (docs/http-api.md "Security model"): when no [[token]] is configured,
// `gnomon serve` does not serve anonymously; it uses one random admin token kept in a file of the
// data directory, which `gnomon job` on the same host reads.
//
// The file is created with O_EXCL and mode 0600 in a directory made with mode 0700; an existing
// file is used only if it is a regular file (not a symlink) owned by this user and not readable by
// group or others. Deleting the file and sending SIGHUP rotates the token.
#ifndef GNOMON_SRC_SERVER_ADMIN_TOKEN_H_
#define GNOMON_SRC_SERVER_ADMIN_TOKEN_H_

#include <string>

#include "gnomon/status.h"

namespace gnomon::server {

// The file's name inside the data directory.
inline constexpr char kAdminTokenFile[] = "admin.token";
// The generated token's name (in the audit log and the logs).
inline constexpr char kAdminTokenName[] = "local-admin";

struct AdminToken {
  std::string path;    // <data_dir>/admin.token
  std::string secret;  // 43 characters of base64url (256 random bits)
  bool created = false;
};

// Reads the token of `data_dir`, or creates it (and the directory) when absent.
// FailedPrecondition naming the file when it is unsafe (symlink, other owner, readable by group or
// others) or malformed; Unavailable when it cannot be read or written.
Result<AdminToken> LoadOrCreateAdminToken(const std::string& data_dir);
// Reads the token of `data_dir` without creating it (for `gnomon job`). NotFound when absent.
Result<AdminToken> ReadAdminToken(const std::string& data_dir);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_ADMIN_TOKEN_H_
