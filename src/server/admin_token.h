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

// The token a command-line client (`gnomon job`) sends to `server_url`: `token` when set, else
// the contents of `token_file` (without its trailing newline), else, for a server on this host
// only, the admin token a local `gnomon serve` generated in `data_dir`. Never the local token to
// another host, and never when the client presents a certificate (`has_client_cert`: that says
// who is calling). "" when there is none.
Result<std::string> ClientToken(const std::string& token, const std::string& token_file,
                                const std::string& data_dir, const std::string& server_url,
                                bool has_client_cert);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_ADMIN_TOKEN_H_
