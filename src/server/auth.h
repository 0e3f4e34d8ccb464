// Who may call the API (docs/http-api.md "Security model"): bearer tokens from `[[token]]` tables
// (or the generated admin token, src/server/admin_token.h), each with a role and the namespaces
// (job-id prefixes) it may see and act on. Plain values and pure functions; TokenSet is
// immutable after construction and safe to share between threads.
#ifndef GNOMON_SRC_SERVER_AUTH_H_
#define GNOMON_SRC_SERVER_AUTH_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/status.h"

namespace gnomon::server {

// What a token may do. Each role includes the ones before it.
enum class TokenRole {
  kRead,     // GETs (jobs, runs, nodes, cron preview, metrics)
  kOperate,  // + pause, resume, trigger
  kAdmin,    // + create, replace, delete job definitions; the audit log; secret values
};
std::string_view ToString(TokenRole role);
// "read" | "operate" | "admin".
Result<TokenRole> ParseTokenRole(std::string_view s);

// One `[[token]]` table of the config file (docs/configuration.md "[[token]]"):
//   [[token]]
//   name = "ci"                  # who, in the audit log and the logs (never the secret)
//   token = "…"                  # the bearer secret, at least 16 characters, or:
//   subject = "CN=ops,O=Example" # a client certificate's subject (mutual TLS, [api] client_ca)
//   role = "operate"             # read | operate | admin
//   namespaces = ["billing."]    # job id prefixes this token may see and act on; empty = all
//   mutations_per_minute = 60    # this token's rate of mutating calls; 0 = the [api] default
struct ApiToken {
  std::string name;
  std::string token;  // secret: never logged, compared in constant time; empty with subject
  TokenRole role = TokenRole::kRead;
  std::vector<std::string> namespaces;  // job id prefixes; empty = every job
  int mutations_per_minute = 0;         // 0 = HttpApiOptions::mutations_per_minute
  std::string subject;  // RFC 2253 subject of a client certificate (mutual TLS); empty with token
};

// Shortest accepted token secret.
inline constexpr size_t kMinTokenLength = 16;

// Checks names (1-128 characters, unique), exactly one of a secret (16-4096 printable ASCII,
// unique) and a subject (1-1024 bytes without control characters, unique), namespaces (non-empty
// prefixes of valid job ids) and rates (>= 0). Messages name the token by name, never by secret.
Status ValidateTokens(const std::vector<ApiToken>& tokens);

// Who is calling: a token's name, role and namespaces; "anonymous" admin of everything only when
// the API runs with auth = "none".
struct Principal {
  std::string name = "anonymous";
  TokenRole role = TokenRole::kAdmin;
  std::vector<std::string> namespaces;  // empty = all jobs
  int mutations_per_minute = 0;

  // Whether `job_id` lies in one of the namespaces.
  bool Allows(std::string_view job_id) const;
  // Whether this principal sees every job (no namespaces).
  bool Global() const { return namespaces.empty(); }
  // Whether secret values (env, HTTP headers) of `job_id` may be shown: admin of its namespace.
  bool SeesSecretsOf(std::string_view job_id) const {
    return role == TokenRole::kAdmin && Allows(job_id);
  }
};

// A validated set of tokens. Find compares the presented secret with every token in time that
// depends only on the presented secret's length, so timing does not reveal which (or whether a
// prefix) matched.
class TokenSet {
 public:
  TokenSet() = default;
  // REQUIRES: ValidateTokens(tokens).ok().
  explicit TokenSet(std::vector<ApiToken> tokens) : tokens_(std::move(tokens)) {}
  const ApiToken* Find(std::string_view presented) const;
  // The token standing for a client certificate of this subject (exact match); null if none.
  const ApiToken* FindSubject(std::string_view subject) const;
  const std::vector<ApiToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<ApiToken> tokens_;
};

// Whether `host` is a loopback address: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(std::string_view host);
// Whether `host` is an IPv4 or IPv6 literal (without brackets).
bool IsIpLiteral(std::string_view host);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_AUTH_H_
