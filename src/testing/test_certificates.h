// Certificates for tests of TLS links (tests only, CMake target gnomon_test_certificates), made
// with the openssl command line in a fresh temporary folder (removed by the destructor). EC P-256
// keys, a few milliseconds each:
//   ca.crt/ca.key          the test CA
//   server.crt/server.key  signed by the CA; CN localhost, SAN IP:127.0.0.1 and DNS:localhost
//   client.crt/client.key  signed by the CA; CN gnomon-client (clientAuth)
//   other-ca.crt           a second CA that signed nothing here (a "wrong CA")
//   self.crt/self.key      a self-signed server certificate (SAN IP:127.0.0.1, DNS:localhost)
//   expired.crt            the server key's certificate, signed by the CA, expired yesterday
//
// Thread safety: none; make them once per test binary.
#ifndef GNOMON_SRC_TESTING_TEST_CERTIFICATES_H_
#define GNOMON_SRC_TESTING_TEST_CERTIFICATES_H_

#include <string>

namespace gnomon::testing {

// Whether /usr/bin/openssl is there (tests that need certificates skip without it).
bool HaveOpenssl();

class TestCertificates {
 public:
  // The subject (RFC 2253) of client.crt.
  static constexpr const char* kClientSubject = "CN=gnomon-client";

  TestCertificates();  // makes them; ok() tells whether every openssl command succeeded
  ~TestCertificates();
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  bool ok() const { return ok_; }
  const std::string& dir() const { return dir_; }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string ca() const { return File("ca.crt"); }
  std::string other_ca() const { return File("other-ca.crt"); }
  // openssl's output, for a failure message when !ok().
  std::string Log() const;

 private:
  std::string dir_;
  bool ok_ = false;
};

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_TESTING_TEST_CERTIFICATES_H_
