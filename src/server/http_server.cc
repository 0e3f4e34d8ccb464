// HttpServer over cpp-httplib (interim transport).
#include "src/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "src/server/api_util.h"
#include "src/server/http_api.h"

namespace gnomon::server {
namespace {

class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int threads, int max_queued) : max_queued_(std::max(1, max_queued)) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      threads_.emplace_back([this] { Work(); });
    }
  }
  ~BoundedTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return jobs_.size() < max_queued_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutdown_ && threads_.empty()) return;
      shutdown_ = true;
    }
    ready_.notify_all();
    space_.notify_all();
    threads_.clear();  // joins; queued connections are still served first
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.notify_one();
      fn();
    }
  }

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable space_;
  std::list<std::function<void()>> jobs_;
  bool shutdown_ = false;
  std::vector<std::jthread> threads_;  // last: joined before the rest is destroyed
};

class Server final : public httplib::Server {
 public:
  bool SetListenBacklog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpHandler& handler, HttpServerOptions options)
      : handler_(handler), options_(std::move(options)) {}

  Status StartOne(const std::string& listen, bool probe, std::unique_ptr<Server>& server,
                  std::jthread& thread, int& port);
  void StopOne(std::unique_ptr<Server>& server, std::jthread& thread) {
    if (!server) return;
    server->stop();
    if (thread.joinable()) thread.join();
    server.reset();
  }

  HttpHandler& handler_;
  const HttpServerOptions options_;
  std::unique_ptr<Server> server_, probe_server_;
  std::jthread thread_, probe_thread_;
  int port_ = 0;
  int probe_port_ = 0;
};

Status HttpServer::Impl::StartOne(const std::string& listen, bool probe,
                                  std::unique_ptr<Server>& server, std::jthread& thread,
                                  int& port_out) {
  Result<std::pair<std::string, int>> addr = ParseListenAddress(listen);
  if (!addr.ok()) return addr.status();
  try {
    server = std::make_unique<Server>();
    Server& s = *server;
    const int threads = probe ? 2 : 64;
    const int queued = 64;
    s.new_task_queue = [threads, queued] { return new BoundedTaskQueue(threads, queued); };
    auto secs = [](Duration d) { return static_cast<time_t>(d.count() / 1000); };
    auto usecs = [](Duration d) { return static_cast<time_t>((d.count() % 1000) * 1000); };
    s.set_read_timeout(secs(options_.body_timeout), usecs(options_.body_timeout));
    s.set_write_timeout(secs(options_.write_timeout), usecs(options_.write_timeout));
    s.set_keep_alive_timeout(std::max<time_t>(1, secs(options_.idle_timeout)));
    s.set_keep_alive_max_count(100);
    s.set_payload_max_length(options_.max_body_bytes);
    s.set_tcp_nodelay(true);
    auto convert = [probe](const httplib::Request& in) {
      Request r;
      r.method = in.method;
      r.path = in.path;
      for (const auto& [k, v] : in.params) r.params.emplace(k, v);
      r.authorization = in.get_header_value("Authorization");
      r.if_match = in.get_header_value("If-Match");
      r.if_none_match = in.get_header_value("If-None-Match");
      r.content_type = in.get_header_value("Content-Type");
      r.origin = in.get_header_value("Origin");
      r.host = in.get_header_value("Host");
      r.sec_fetch_site = in.get_header_value("Sec-Fetch-Site");
      if (in.has_header("Content-Length")) {
        r.content_length = in.get_header_value<uint64_t>("Content-Length");
      }
      r.chunked = in.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
      r.remote_address = in.remote_addr;
      r.probe_lane = probe;
      return r;
    };
    auto write = [](const Response& from, httplib::Response& to) {
      to.status = from.status;
      for (const auto& [k, v] : from.headers) to.set_header(k, v);
      if (from.status != 204 && from.status != 304) {
        to.set_content(from.body, from.content_type.c_str());
      }
    };
    const size_t max_body = options_.max_body_bytes;
    s.set_pre_routing_handler(
        [this, convert, write, max_body](const httplib::Request& in, httplib::Response& out) {
          Request req = convert(in);
          const bool has_body = req.method == "POST" || req.method == "PUT" ||
                                req.method == "DELETE" || req.method == "PATCH";
          if (!has_body) {
            write(handler_.Handle(req), out);
            return httplib::Server::HandlerResponse::Handled;
          }
          std::optional<Response> early;
          if (req.content_length && *req.content_length > max_body) {
            early = Error(413, "payload_too_large",
                          "request body larger than " + std::to_string(max_body) + " bytes");
          } else {
            early = handler_.Admit(req);
          }
          if (!early) return httplib::Server::HandlerResponse::Unhandled;
          early->headers.emplace_back("Connection", "close");
          write(*early, out);
          return httplib::Server::HandlerResponse::Handled;
        });
    auto with_body = [this, convert, write, max_body](const httplib::Request& in,
                                                      httplib::Response& out,
                                                      const httplib::ContentReader& reader) {
      Request req = convert(in);
      bool too_large = false;
      bool read_ok = true;
      if (req.content_length || req.chunked) {
        read_ok = reader([&](const char* data, size_t len) {
          if (req.body.size() + len > max_body) {
            too_large = true;
            return false;
          }
          req.body.append(data, len);
          return true;
        });
      }
      Response res;
      if (too_large) {
        res = Error(413, "payload_too_large",
                    "request body larger than " + std::to_string(max_body) + " bytes");
        res.headers.emplace_back("Connection", "close");
      } else if (!read_ok) {
        res = Error(400, "invalid_argument", "the request body could not be read");
        res.headers.emplace_back("Connection", "close");
      } else {
        res = handler_.Handle(req);
      }
      write(res, out);
    };
    s.Post("/.*", with_body);
    s.Put("/.*", with_body);
    s.Delete("/.*", with_body);
    s.Patch("/.*", with_body);
    s.set_exception_handler(
        [write](const httplib::Request&, httplib::Response& out, std::exception_ptr) {
          write(Error(500, "internal", "internal error"), out);
        });
    s.set_error_handler([write](const httplib::Request&, httplib::Response& out) {
      if (!out.body.empty()) return;
      if (out.status == 413) {
        write(Error(413, "payload_too_large", "request body too large"), out);
      } else if (out.status == 404) {
        write(Error(404, "not_found", "no such endpoint"), out);
      } else if (out.status >= 400) {
        write(Error(out.status, "bad_request", "the request could not be processed"), out);
      }
    });
    s.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    const int port = addr->second == 0
                         ? s.bind_to_any_port(addr->first)
                         : (s.bind_to_port(addr->first, addr->second) ? addr->second : -1);
    if (port <= 0 || !s.SetListenBacklog(512)) {
      server.reset();
      return UnavailableError("listen: cannot bind " + Shown(listen));
    }
    port_out = port;
  } catch (const std::exception& e) {
    server.reset();
    return InternalError(std::string("http server: ") + e.what());
  }
  Server* raw = server.get();
  thread = std::jthread([raw] {
    try {
      raw->listen_after_bind();
    } catch (...) {
    }
  });
  while (!raw->is_running()) std::this_thread::yield();
  return Status::Ok();
}

HttpServer::HttpServer(HttpHandler& handler, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(handler, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  GNOMON_RETURN_IF_ERROR(
      impl_->StartOne(impl_->options_.listen, false, impl_->server_, impl_->thread_, impl_->port_));
  if (!impl_->options_.probe_listen.empty()) {
    Status s = impl_->StartOne(impl_->options_.probe_listen, true, impl_->probe_server_,
                               impl_->probe_thread_, impl_->probe_port_);
    if (!s.ok()) {
      impl_->StopOne(impl_->server_, impl_->thread_);
      return s;
    }
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  impl_->StopOne(impl_->server_, impl_->thread_);
  impl_->StopOne(impl_->probe_server_, impl_->probe_thread_);
}

int HttpServer::port() const { return impl_->port_; }
int HttpServer::probe_port() const { return impl_->probe_port_; }

}  // namespace gnomon::server
