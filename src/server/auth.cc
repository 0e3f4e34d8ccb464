#include "src/server/auth.h"

#include <arpa/inet.h>

#include <set>

#include "gnomon/job.h"
#include "src/server/api_util.h"

namespace gnomon::server {

std::string_view ToString(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return "read";
    case TokenRole::kOperate:
      return "operate";
    case TokenRole::kAdmin:
      return "admin";
  }
  return "read";
}

Result<TokenRole> ParseTokenRole(std::string_view s) {
  if (s == "read") return TokenRole::kRead;
  if (s == "operate") return TokenRole::kOperate;
  if (s == "admin") return TokenRole::kAdmin;
  return InvalidArgumentError("role: \"" + Shown(s) + "\" is not one of read, operate, admin");
}

Status ValidateTokens(const std::vector<ApiToken>& tokens) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const ApiToken& t = tokens[i];
    const std::string where =
        "token " + std::to_string(i + 1) + (t.name.empty() ? "" : " \"" + Shown(t.name) + "\"");
    if (t.name.empty() || t.name.size() > 128) {
      return InvalidArgumentError(where + ": name: must be 1-128 characters");
    }
    if (!names.insert(t.name).second) return InvalidArgumentError(where + ": name: duplicate");
    if (t.token.empty() == t.subject.empty()) {
      return InvalidArgumentError(where + ": exactly one of token and subject is required");
    }
    if (!t.subject.empty()) {
      if (t.subject.size() > 1024) {
        return InvalidArgumentError(where + ": subject: longer than 1024 bytes");
      }
      for (char c : t.subject) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          return InvalidArgumentError(where + ": subject: has a control character");
        }
      }
      for (size_t j = 0; j < i; ++j) {
        if (tokens[j].subject == t.subject) {
          return InvalidArgumentError(where + ": subject: the same as token \"" +
                                      Shown(tokens[j].name) + "\"");
        }
      }
    } else if (t.token.size() < kMinTokenLength || t.token.size() > 4096) {
      return InvalidArgumentError(where + ": token: must be " + std::to_string(kMinTokenLength) +
                                  "-4096 characters");
    }
    for (char c : t.token) {
      if (c <= 0x20 || c >= 0x7f) {
        return InvalidArgumentError(where + ": token: only printable ASCII without spaces");
      }
    }
    for (size_t j = 0; j < i && !t.token.empty(); ++j) {
      if (tokens[j].token == t.token) {
        return InvalidArgumentError(where + ": token: the same secret as token \"" +
                                    Shown(tokens[j].name) + "\"");
      }
    }
    for (const std::string& ns : t.namespaces) {
      if (!IsValidJobId(ns)) {
        return InvalidArgumentError(where + ": namespaces: \"" + Shown(ns) +
                                    "\" is not a job id prefix ([A-Za-z0-9_.-]{1,128})");
      }
    }
    if (t.mutations_per_minute < 0) {
      return InvalidArgumentError(where + ": mutations_per_minute: must be >= 0");
    }
  }
  return Status::Ok();
}

bool Principal::Allows(std::string_view job_id) const {
  if (namespaces.empty()) return true;
  for (const std::string& prefix : namespaces) {
    if (job_id.starts_with(prefix)) return true;
  }
  return false;
}

namespace {

// Equality in time that depends only on `presented`'s length.
bool SecretEquals(std::string_view presented, std::string_view secret) {
  unsigned char diff = presented.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    const unsigned char s = i < secret.size() ? static_cast<unsigned char>(secret[i]) : 0;
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(presented[i]) ^ s);
  }
  return diff == 0;
}

}  // namespace

const ApiToken* TokenSet::Find(std::string_view presented) const {
  const ApiToken* found = nullptr;
  // Every token is compared (no early exit).
  for (const ApiToken& t : tokens_) {
    if (!t.token.empty() && SecretEquals(presented, t.token)) found = &t;
  }
  return found;
}

const ApiToken* TokenSet::FindSubject(std::string_view subject) const {
  if (subject.empty()) return nullptr;
  for (const ApiToken& t : tokens_) {
    if (t.subject == subject) return &t;
  }
  return nullptr;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  const std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

bool IsIpLiteral(std::string_view host) {
  const std::string h(host);
  in_addr a{};
  in6_addr a6{};
  return inet_pton(AF_INET, h.c_str(), &a) == 1 || inet_pton(AF_INET6, h.c_str(), &a6) == 1;
}

}  // namespace gnomon::server
