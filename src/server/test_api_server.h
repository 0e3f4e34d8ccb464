// For tests: an HttpApi with its JobCatalog, served by an HttpServer on a free loopback port.
#ifndef GNOMON_SRC_SERVER_TEST_API_SERVER_H_
#define GNOMON_SRC_SERVER_TEST_API_SERVER_H_

#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "src/server/http_api.h"
#include "src/server/http_server.h"
#include "src/server/job_catalog.h"

namespace gnomon::server {

// Passes every request to `inner`; when GNOMON_API_RECORD names a file, also appends each answer
// to it as one JSON line {method, path, status, content_type, body} (bodies of JSON answers
// only), for the contract test (tests/openapi/contract.py) that checks them against the OpenAPI
// document.
class RecordingHandler final : public HttpHandler {
 public:
  explicit RecordingHandler(HttpHandler& inner) : inner_(inner) {}
  std::optional<Response> Admit(const Request& head) override {
    std::optional<Response> r = inner_.Admit(head);
    if (r) Record(head, *r);
    return r;
  }
  Response Handle(const Request& request) override {
    Response r = inner_.Handle(request);
    Record(request, r);
    return r;
  }

 private:
  static void Record(const Request& req, const Response& r) {
    const char* file = std::getenv("GNOMON_API_RECORD");
    if (file == nullptr || *file == '\0') return;
    nlohmann::json line = {{"method", req.method},
                           {"path", req.path},
                           {"status", r.status},
                           {"content_type", r.stream ? "text/event-stream" : r.content_type}};
    if (!r.stream && r.status != 204 && r.status != 304 &&
        r.content_type.starts_with("application/json")) {
      nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
      if (body.is_discarded()) {
        line["invalid_json"] = r.body;
      } else {
        line["body"] = std::move(body);
      }
    }
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::ofstream(file, std::ios::app)
        << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  HttpHandler& inner_;
};

class TestApiServer {
 public:
  // Listens on 127.0.0.1, any free port; `options.listen` is set accordingly.
  TestApiServer(Scheduler& scheduler, Coordinator& coordinator, MetricsObserver& metrics,
                std::vector<ApiToken> tokens, HttpApiOptions options = {},
                HttpServerOptions http = {}, JobCatalogOptions catalog_options = {},
                const Reloadable<Policies>& policies = RootAllowed())
      : catalog(scheduler, coordinator, WithClock(std::move(catalog_options), options.clock),
                policies),
        api(scheduler, coordinator, catalog, metrics, Loopback(options), std::move(tokens)),
        recorder(api),
        server(recorder, LoopbackHttp(std::move(http), options.max_body_bytes)) {
    // The server closes a connection whose body it refuses; a test client still writing must get
    // EPIPE, not be killed by SIGPIPE.
    ::signal(SIGPIPE, SIG_IGN);
  }

  Status Start() { return server.Start(); }
  int port() const { return server.port(); }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server.port());
    c->set_read_timeout(10, 0);
    return c;
  }

  JobCatalog catalog;
  HttpApi api;
  RecordingHandler recorder;
  HttpServer server;

  // The default policy with allow_root (the tests run as root; the policy's checks have tests of
  // their own).
  static const Reloadable<Policies>& RootAllowed() {
    static const Reloadable<Policies>* policies = [] {
      ExecutorPolicy p;
      p.allow_root = true;
      return new Reloadable<Policies>(*Policies::Make({p}));
    }();
    return *policies;
  }

 private:
  static JobCatalogOptions WithClock(JobCatalogOptions o, Clock* clock) {
    if (o.clock == nullptr) o.clock = clock;
    return o;
  }
  static HttpApiOptions Loopback(HttpApiOptions o) {
    o.listen = "127.0.0.1:0";
    return o;
  }
  static HttpServerOptions LoopbackHttp(HttpServerOptions o, size_t max_body_bytes) {
    o.listen = "127.0.0.1:0";
    o.max_body_bytes = max_body_bytes;
    return o;
  }
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_TEST_API_SERVER_H_
