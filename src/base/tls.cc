#include "gnomon/tls.h"

#include <algorithm>
#include <array>
#include <set>

namespace gnomon {
namespace {

// `s` for an error message: at most 64 characters, control and non-ASCII bytes as '?'.
std::string Printable(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  if (s.size() > 64) out += "...";
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr std::array<std::string_view, 5> kTlsParams = {"tls_ca", "tls_cert", "tls_key",
                                                        "tls_server_name", "tls_verify"};

}  // namespace

Result<std::string> PercentDecode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    const int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? HexValue(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return InvalidArgumentError("malformed percent-encoding");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

Result<TlsOptions> ParseTlsQuery(std::string_view query, bool tls_scheme,
                                 std::string_view how_to_enable) {
  TlsOptions tls;
  tls.enabled = tls_scheme;
  std::set<std::string, std::less<>> seen;
  size_t start = 0;
  while (true) {
    const size_t amp = query.find('&', start);
    const std::string_view item = query.substr(start, amp - start);
    const size_t eq = item.find('=');
    const std::string name = Printable(item.substr(0, eq));
    if (item.empty()) return InvalidArgumentError("empty query parameter (expected name=value)");
    if (std::find(kTlsParams.begin(), kTlsParams.end(), item.substr(0, eq)) == kTlsParams.end()) {
      return InvalidArgumentError("unknown query parameter \"" + name +
                                  "\"; known: tls_ca, tls_cert, tls_key, tls_server_name, "
                                  "tls_verify");
    }
    if (!tls_scheme) {
      return InvalidArgumentError("query parameter " + name +
                                  " needs TLS: " + std::string(how_to_enable));
    }
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("query parameter " + name + " has no value (" + name + "=...)");
    }
    if (!seen.insert(name).second) {
      return InvalidArgumentError("query parameter " + name + " is given twice");
    }
    Result<std::string> decoded = PercentDecode(item.substr(eq + 1));
    if (!decoded.ok()) {
      return InvalidArgumentError("query parameter " + name + ": malformed percent-encoding");
    }
    const std::string& value = *decoded;
    if (value.empty()) return InvalidArgumentError("query parameter " + name + " is empty");
    if (std::any_of(value.begin(), value.end(), [](char c) { return c >= 0 && c < 0x20; })) {
      return InvalidArgumentError("query parameter " + name + " contains a control character");
    }
    if (name == "tls_ca") {
      tls.ca_file = value;
    } else if (name == "tls_cert") {
      tls.cert_file = value;
    } else if (name == "tls_key") {
      tls.key_file = value;
    } else if (name == "tls_server_name") {
      const bool ok = value.size() <= 253 && std::all_of(value.begin(), value.end(), [](char c) {
                        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                               (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
                               c == ':';
                      });
      if (!ok) {
        return InvalidArgumentError("query parameter tls_server_name: \"" + Printable(value) +
                                    "\" is not a host name or IP address");
      }
      tls.server_name = value;
    } else if (value == "true" || value == "false") {
      tls.verify = value == "true";
    } else {
      return InvalidArgumentError("query parameter tls_verify must be true or false, not \"" +
                                  Printable(value) + "\"");
    }
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgumentError("query parameters tls_cert and tls_key go together");
  }
  return tls;
}

}  // namespace gnomon
