// The HTTP transport against real sockets: binding, routing to the handler, and the bounds of
// docs/http-api.md "Limits".
#include "src/server/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <string>

namespace gnomon::server {
namespace {

// Answers every request with its method and path; counts calls.
class EchoHandler final : public HttpHandler {
 public:
  std::optional<Response> Admit(const Request&) override { return std::nullopt; }
  Response Handle(const Request& r) override {
    ++handled;
    Response out;
    out.content_type = "text/plain";
    out.body = r.method + " " + r.path + " " + r.body;
    return out;
  }
  std::atomic<int> handled{0};
};

HttpServerOptions Loopback() {
  HttpServerOptions o;
  o.listen = "127.0.0.1:0";
  return o;
}

// A second server on a taken port must fail, not share the port (SO_REUSEPORT).
TEST(HttpServerTest, ATakenPortIsAnError) {
  EchoHandler handler;
  HttpServer first(handler, Loopback());
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions second_options;
  second_options.listen = "127.0.0.1:" + std::to_string(first.port());
  HttpServer second(handler, second_options);
  const Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  first.Stop();
}

TEST(HttpServerTest, ServesTheHandler) {
  EchoHandler handler;
  HttpServer server(handler, Loopback());
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Post("/x/y", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "POST /x/y {}");
  server.Stop();
  server.Stop();  // idempotent
}

}  // namespace
}  // namespace gnomon::server
