// The OpenSSL side of the HTTP server's TLS (src/server/http_tls_context.h).
#include "src/server/http_tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>

#include "src/job/key_hint.h"

namespace gnomon::server {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's reason for the first error queued on this thread (then clears the queue).
std::string OpenSslReason() {
  const unsigned long e = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// A PEM key with a passphrase must fail, not prompt on the daemon's terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

// Longest client certificate subject passed on; a longer one counts as none.
constexpr size_t kMaxSubjectBytes = 1024;

}  // namespace

// The TLS server context of tls_cert, tls_key and client_ca. Errors name the option and file.
Result<std::shared_ptr<ssl::context>> MakeTlsContext(const HttpServerOptions& o) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* c = context->native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_default_passwd_cb(c, NoPassphrase);
  auto bad = [](const char* option, const std::string& file, const std::string& why) {
    return InvalidArgumentError("api: " + std::string(option) + ": \"" + Shown(file) +
                                "\": " + why);
  };
  if (SSL_CTX_use_certificate_chain_file(c, o.tls_cert.c_str()) != 1) {
    return bad("tls_cert", o.tls_cert, "not a readable PEM certificate: " + OpenSslReason());
  }
  const std::string not_its_key = "is not the key of tls_cert \"" + Shown(o.tls_cert) + "\"";
  if (SSL_CTX_use_PrivateKey_file(c, o.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return bad("tls_key", o.tls_key, not_its_key);
    }
    return bad("tls_key", o.tls_key,
               "not a readable PEM private key without passphrase: " + OpenSslReason());
  }
  if (SSL_CTX_check_private_key(c) != 1) return bad("tls_key", o.tls_key, not_its_key);
  if (!o.client_ca.empty()) {
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca.c_str());
    if (names == nullptr || SSL_CTX_load_verify_locations(c, o.client_ca.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return bad("client_ca", o.client_ca, "not a readable PEM CA certificate: " + OpenSslReason());
    }
    SSL_CTX_set_client_CA_list(c, names);  // takes ownership
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Session resumption with client certificates needs a context id.
    static constexpr unsigned char kId[] = "gnomon-api";
    SSL_CTX_set_session_id_context(c, kId, sizeof kId - 1);
  }
  return context;
}

// The RFC 2253 subject of the peer's verified certificate; empty when there is none.
std::string VerifiedPeerSubject(SSL* ssl) {
  if (SSL_get_verify_result(ssl) != X509_V_OK) return "";
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  std::string subject;
  if (BIO* bio = BIO_new(BIO_s_mem())) {
    if (X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL's type
      if (n > 0 && static_cast<size_t>(n) <= kMaxSubjectBytes) subject.assign(data, n);
    }
    BIO_free(bio);
  }
  X509_free(cert);
  return subject;
}

}  // namespace gnomon::server
