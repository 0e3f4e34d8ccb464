// TLS of a link to a peer: a Redis server or Sentinel, an etcd member. The same options and the
// same URL query parameters everywhere (docs/configuration.md "Backend URLs").
#ifndef GNOMON_INCLUDE_GNOMON_TLS_H_
#define GNOMON_INCLUDE_GNOMON_TLS_H_

#include <string>
#include <string_view>

#include "gnomon/status.h"

namespace gnomon {

struct TlsOptions {
  // Speak TLS. Default false (plain TCP; the other fields must then be left empty/default).
  bool enabled = false;
  // PEM file of the CA certificates that may sign the server's certificate; empty = the system's
  // CAs (OpenSSL's default paths). Default empty.
  std::string ca_file;
  // PEM client certificate (chain) and its private key, for a server that asks for one (mutual
  // TLS); both or neither. Default empty (no client certificate).
  std::string cert_file;
  std::string key_file;
  // Name the server's certificate must carry (DNS name or IP address in its subjectAltName), and
  // the SNI sent (not for an IP address). Empty = the host connected to. Default empty.
  std::string server_name;
  // Check the server's certificate chain and name. Default true. false accepts any certificate:
  // the link is encrypted but a man in the middle can read and change everything, passwords
  // too (the daemon logs a warning at start). For tests with self-signed certificates only.
  bool verify = true;

  friend bool operator==(const TlsOptions&, const TlsOptions&) = default;
};

// The TLS query parameters of a backend URL ("tls_ca=/ca.pem&tls_verify=false"): tls_ca,
// tls_cert, tls_key, tls_server_name, tls_verify; percent-encoded values. `tls_scheme`: the URL
// asked for TLS (rediss://, https:// endpoints), else any parameter is an error telling
// `how_to_enable`. InvalidArgument naming the parameter; never echoes more than 64 bytes.
Result<TlsOptions> ParseTlsQuery(std::string_view query, bool tls_scheme,
                                 std::string_view how_to_enable);

// Decodes %XX escapes (no '+' for space). InvalidArgument when an escape is malformed.
Result<std::string> PercentDecode(std::string_view in);

}  // namespace gnomon

#endif  // GNOMON_INCLUDE_GNOMON_TLS_H_
