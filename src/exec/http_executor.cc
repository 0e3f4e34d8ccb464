// HttpExecutor: the adapter around cpp-httplib. Its exceptions stop here (STYLE.md rule 4).
#include "gnomon/http_executor.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "src/exec/http_url.h"
#include "src/exec/output_tail.h"

namespace gnomon {
namespace {

using exec_internal::OutputTail;

ExecResult Failed(std::string error) {
  ExecResult r;
  r.outcome = RunOutcome::kFailed;
  r.error = std::move(error);
  return r;
}

bool IsHeaderValue(std::string_view v) {
  return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string RunJson(const RunContext& ctx) {
  std::string json = "{\"job_id\":";
  AppendJsonString(json, ctx.job_id);
  json += ",\"run_id\":";
  AppendJsonString(json, ctx.run_id);
  json += ",\"scheduled_at\":";
  AppendJsonString(json, ctx.scheduled_at.ToRfc3339());
  json += ",\"fencing_token\":" + std::to_string(ctx.fencing_token);
  json += ",\"attempt\":" + std::to_string(ctx.attempt);
  json += ",\"node_id\":";
  AppendJsonString(json, ctx.node_id);
  json += ",\"shard_index\":" + std::to_string(ctx.shard_index);
  json += ",\"shard_count\":" + std::to_string(ctx.shard_count);
  json += ",\"deadline\":";
  if (ctx.deadline) {
    AppendJsonString(json, ctx.deadline->ToRfc3339());
  } else {
    json += "null";
  }
  json += ",\"checkpoint\":";
  if (ctx.checkpoint) {
    AppendJsonString(json, *ctx.checkpoint);
  } else {
    json += "null";
  }
  json += ",\"traceparent\":";
  AppendJsonString(json, ctx.traceparent);
  json += "}";
  return json;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The socket of the request in flight, for cancellation. httplib's stop() only reaches a socket
// once the request is registered as in flight; a shutdown() of our own duplicate of the socket
// also interrupts a connect or a send/receive at any point. Owning a duplicate means the number
// can never name another file by the time it is shut down. Thread-safe.
class SocketCanceller {
 public:
  ~SocketCanceller() {
    std::lock_guard lock(mu_);
    if (dup_fd_ >= 0) close(dup_fd_);
  }
  void Adopt(int sock) {
    std::lock_guard lock(mu_);
    if (dup_fd_ >= 0) close(dup_fd_);
    dup_fd_ = fcntl(sock, F_DUPFD_CLOEXEC, 0);
    if (cancelled_ && dup_fd_ >= 0) shutdown(dup_fd_, SHUT_RDWR);
  }
  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (dup_fd_ >= 0) shutdown(dup_fd_, SHUT_RDWR);
  }

 private:
  std::mutex mu_;
  int dup_fd_ = -1;         // guarded by mu_
  bool cancelled_ = false;  // guarded by mu_
};

ExecResult Cancelled(std::string output) {
  ExecResult r;
  r.outcome = RunOutcome::kCancelled;
  r.error = "cancelled: the request was aborted";
  r.output = std::move(output);
  return r;
}

}  // namespace

HttpExecutor::HttpExecutor(HttpExecutorOptions options, Clock& clock)
    : options_(options), clock_(clock) {}

ExecResult HttpExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  if (!job.http) return Failed("job \"" + job.id + "\" has no http target");
  const HttpTarget& target = *job.http;
  std::string error;
  const std::optional<exec_internal::HttpUrl> url = exec_internal::ParseHttpUrl(target.url, &error);
  if (!url) return Failed(error);
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (url->scheme == "https") {
    return Failed("url \"" + target.url +
                  "\": https is not supported (cpp-httplib was built without OpenSSL)");
  }
#endif
  std::string method = target.method;
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (method != "POST" && method != "GET") {
    return Failed("http method \"" + target.method + "\" is not supported (POST or GET)");
  }

  Duration timeout = options_.default_timeout;
  if (ctx.deadline) {
    timeout = *ctx.deadline - clock_.Now();
    if (timeout <= Duration::zero()) return Failed("the deadline passed before the request");
  }

  try {
    httplib::Request req;
    req.method = method;
    req.path = url->path;
    for (const auto& [name, value] : target.headers) {
      if (name.empty() || !IsHeaderValue(name) || name.find(':') != std::string::npos) {
        return Failed("http header name \"" + name + "\" is invalid");
      }
      if (!IsHeaderValue(value)) return Failed("http header " + name + ": value has CR/LF/NUL");
    }
    std::vector<std::pair<std::string, std::string>> run_headers = {
        {"X-Gnomon-Job-Id", ctx.job_id},
        {"X-Gnomon-Run-Id", ctx.run_id},
        {"X-Gnomon-Scheduled-At", ctx.scheduled_at.ToRfc3339()},
        {"X-Gnomon-Fencing-Token", std::to_string(ctx.fencing_token)},
        {"X-Gnomon-Attempt", std::to_string(ctx.attempt)},
        {"X-Gnomon-Node-Id", ctx.node_id},
        {"X-Gnomon-Shard-Index", std::to_string(ctx.shard_index)},
        {"X-Gnomon-Shard-Count", std::to_string(ctx.shard_count)},
        {"X-Gnomon-Deadline", ctx.deadline ? ctx.deadline->ToRfc3339() : std::string()},
        {"X-Gnomon-Checkpoint",
         ctx.checkpoint && IsHeaderValue(*ctx.checkpoint) ? *ctx.checkpoint : std::string()},
        {"traceparent", ctx.traceparent},
    };
    // Unset values are left out (an empty header is legal HTTP, but some servers, httplib's
    // among them, drop it anyway). Values that cannot be header values are never sent.
    std::erase_if(run_headers,
                  [](const auto& h) { return h.second.empty() || !IsHeaderValue(h.second); });
    for (const auto& [name, value] : target.headers) {
      const bool overridden =
          std::any_of(run_headers.begin(), run_headers.end(),
                      [&](const auto& h) { return EqualsIgnoreCase(h.first, name); });
      if (!overridden) req.headers.emplace(name, value);
    }
    for (const auto& [name, value] : run_headers) req.headers.emplace(name, value);
    if (method == "POST") {
      req.body = RunJson(ctx);
      bool has_content_type = false;
      for (const auto& [name, value] : req.headers) {
        has_content_type = has_content_type || EqualsIgnoreCase(name, "Content-Type");
      }
      if (!has_content_type) req.headers.emplace("Content-Type", "application/json");
    }

    OutputTail body(options_.max_output_bytes);
    req.content_receiver = [&body, &ctx](const char* data, size_t n, uint64_t, uint64_t) {
      body.Append(std::string_view(data, n));
      return !ctx.stop.stop_requested();
    };

    httplib::Client client(url->scheme_host_port);
    if (!client.is_valid()) return Failed("url \"" + target.url + "\": invalid host or port");
    client.set_follow_location(false);
    client.set_keep_alive(false);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    SocketCanceller canceller;
    client.set_socket_options([&canceller](socket_t sock) { canceller.Adopt(sock); });

    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    bool sent = false;
    {
      std::stop_callback on_stop(ctx.stop, [&client, &canceller] {
        canceller.Cancel();
        client.stop();
      });
      if (ctx.stop.stop_requested()) return Cancelled("");
      sent = client.send(req, res, err);
    }
    if (ctx.stop.stop_requested() && (!sent || res.status < 200 || res.status > 299)) {
      return Cancelled(body.Contents());
    }
    if (!sent) {
      std::string why = httplib::to_string(err) + " error";
      if (err == httplib::Error::Read || err == httplib::Error::ConnectionTimeout) {
        why += " (timeout " + FormatDuration(timeout) + ", or the connection was closed)";
      }
      return Failed(method + " " + target.url + ": " + why);
    }
    ExecResult result;
    result.exit_code = res.status;
    result.output = body.Contents();
    if (res.status < 200 || res.status > 299) {
      result.outcome = RunOutcome::kFailed;
      result.error = method + " " + target.url + ": HTTP status " + std::to_string(res.status);
    }
    return result;
  } catch (const std::exception& e) {
    return Failed(method + " " + target.url + ": " + e.what());
  } catch (...) {
    return Failed(method + " " + target.url + ": unknown exception");
  }
}

}  // namespace gnomon
