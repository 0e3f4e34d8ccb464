// What gnomon's outgoing HTTP connections may do: TLS settings and the egress rule. The HTTP
// executor (gnomon/http_executor.h), webhook alerts and OTLP span export take these in their
// options; the client that applies them lives in src/net (libcurl).
//
// The egress rule is a list of CIDR blocks a connection may reach (allow) and may not reach
// (deny). It is evaluated against the IP address a connection is actually made to, after name
// resolution, for every connection of a request (each address tried, each redirect hop, the
// proxy), so a host name that resolves to a denied address (DNS rebinding) is refused as well as
// the address itself. Semantics:
//   - deny wins over allow;
//   - an empty allow list allows every address that is not denied;
//   - an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked as the IPv4 address a.b.c.d;
//   - EgressRule::Default() denies the link-local blocks 169.254.0.0/16 (among them the cloud
//     metadata service 169.254.169.254) and fe80::/10, and nothing else.
//
// Everything here is a value type without I/O (except ValidateTlsOptions, which reads files);
// thread-compatible.
#ifndef GNOMON_NET_H_
#define GNOMON_NET_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/tls.h"

namespace gnomon::net {

// TLS of https:// requests: gnomon::TlsOptions (gnomon/tls.h), the options of every peer link.
// Here the URL's scheme decides whether TLS is spoken (`enabled` is not read); ca_file, cert_file,
// key_file and verify apply; server_name is not supported (the certificate must name the URL's
// host). The defaults verify the server against the system's CAs (libcurl's bundle,
// /etc/ssl/certs/ca-certificates.crt on Debian) and send no client certificate.
using gnomon::TlsOptions;

// OK, or InvalidArgument naming the field ("tls.ca_file: \"/x.pem\": No such file or directory")
// when a file is set but cannot be read, when only one of cert_file and key_file is set, or when
// server_name is set. Reads the files' first bytes; does not parse them (a malformed PEM file
// fails the first request, naming the file).
Status ValidateTlsOptions(const TlsOptions& tls);

// An IPv4 or IPv6 address. Value type.
class IpAddress {
 public:
  // Parses an IP literal: dotted-quad IPv4 ("192.0.2.1") or IPv6 in any inet_pton form
  // ("2001:db8::1", "::ffff:192.0.2.1"), optionally in brackets ("[::1]"). No port, no zone
  // ("%eth0"). nullopt when `text` is not one (e.g. a host name).
  static std::optional<IpAddress> Parse(std::string_view text);
  static IpAddress V4(const std::array<uint8_t, 4>& bytes);
  static IpAddress V6(const std::array<uint8_t, 16>& bytes);
  // 0.0.0.0.
  IpAddress() = default;

  bool is_v4() const { return v4_; }
  // Network byte order; 4 bytes for IPv4, 16 for IPv6.
  const uint8_t* bytes() const { return bytes_.data(); }
  int bit_length() const { return v4_ ? 32 : 128; }
  // The IPv4 address of an IPv4-mapped IPv6 address (::ffff:a.b.c.d); otherwise a copy.
  IpAddress Unmapped() const;
  // "192.0.2.1", "2001:db8::1" (inet_ntop).
  std::string ToString() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;

 private:
  bool v4_ = true;
  std::array<uint8_t, 16> bytes_{};  // IPv4: the first 4
};

// A block of addresses: "10.0.0.0/8", "fe80::/10", or an address alone (a /32 or /128).
struct Cidr {
  IpAddress network;      // its host bits are zero
  int prefix_length = 0;  // 0-32 (IPv4) or 0-128 (IPv6)

  // InvalidArgument saying what is wrong with `text`: not an address, a prefix length out of
  // range, or host bits set ("10.0.0.1/8: host bits are set (the block is 10.0.0.0/8)"). An
  // IPv4-mapped IPv6 block with a prefix of at least 96 (::ffff:10.0.0.0/104) is kept as the
  // IPv4 block (10.0.0.0/8).
  static Result<Cidr> Parse(std::string_view text);

  // Whether `address` is in the block (never across families; see Unmapped()).
  bool Contains(const IpAddress& address) const;
  // "10.0.0.0/8".
  std::string ToString() const;

  friend bool operator==(const Cidr&, const Cidr&) = default;
};

struct EgressRule {
  // Blocks a connection may reach. Default empty: every address that is not denied.
  std::vector<Cidr> allow;
  // Blocks a connection may not reach; wins over allow. Default empty (but see Default()).
  std::vector<Cidr> deny;

  // The built-in rule: deny 169.254.0.0/16 and fe80::/10 (link-local), allow the rest.
  static EgressRule Default();
  // The rule of exactly these lists (a config's `egress_allow` / `egress_deny`: whoever sets a
  // deny list replaces the built-in one, so Default()'s blocks must be listed to be kept; a
  // repeated entry is kept once). InvalidArgument naming the entry: `egress_deny[2]:
  // "10.0.0.0/33": prefix length 33 is out of range 0-32`.
  static Result<EgressRule> Parse(const std::vector<std::string>& allow,
                                  const std::vector<std::string>& deny);
};

// Whether a connection to `address` is allowed: OK, or FailedPrecondition naming the address
// and the rule, "egress: 169.254.169.254 is denied by egress_deny 169.254.0.0/16" or "egress:
// 192.0.2.1 is not in egress_allow (10.0.0.0/8, fd00::/8)". IPv4-mapped IPv6 addresses are checked
// as IPv4.
Status CheckEgress(const EgressRule& rule, const IpAddress& address);
// The same for an IP literal, e.g. the host of a URL ("169.254.169.254", "[fe80::1]").
// InvalidArgument when `ip_literal` is not an IP address: a host name can only be checked when a
// connection is made (IpAddress::Parse tells which is which).
Status CheckEgress(const EgressRule& rule, std::string_view ip_literal);

}  // namespace gnomon::net

#endif  // GNOMON_NET_H_
