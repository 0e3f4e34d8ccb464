// HttpExecutor: a job's HTTP target and run context -> one request through net::HttpClient.
#include "gnomon/http_executor.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/net/http_client.h"
#include "src/net/http_url.h"

namespace gnomon {
namespace {

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
  // A compact JSON object (RunContext::params), sent as it is.
  json += ",\"params\":" + (ctx.params.empty() ? std::string("{}") : ctx.params);
  json += "}";
  return json;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

ExecResult Cancelled(std::string output) {
  ExecResult r;
  r.outcome = RunOutcome::kCancelled;
  r.error = "cancelled: the request was aborted";
  r.output = std::move(output);
  return r;
}

net::HttpClientOptions ClientOptions(const HttpExecutorOptions& o) {
  net::HttpClientOptions c;
  c.connect_timeout = o.connect_timeout;
  c.max_body_bytes = o.max_output_bytes;
  c.keep_body_tail = true;
  c.tls = o.tls;
  c.egress = o.egress;
  return c;
}

}  // namespace

HttpExecutor::HttpExecutor(HttpExecutorOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      client_(std::make_unique<net::HttpClient>(ClientOptions(options_))) {}

HttpExecutor::~HttpExecutor() = default;

ExecResult HttpExecutor::Execute(const JobSpec& job, const RunContext& ctx) {
  if (!job.http) return Failed("job \"" + job.id + "\" has no http target");
  const HttpTarget& target = *job.http;
  Result<net::HttpUrl> url = net::ParseHttpUrl(target.url);
  if (!url.ok()) return Failed(url.status().message());
  std::string method = target.method;
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (method != "POST" && method != "GET") {
    return Failed("http method \"" + target.method + "\" is not supported (POST or GET)");
  }

  net::HttpRequest req;
  req.method = method;
  req.url = target.url;
  req.stop = ctx.stop;
  // With a deadline the request must end by it; without one only silence ends it, and its
  // total time is unbounded, as for a process job without a timeout.
  if (ctx.deadline) {
    const Duration left = *ctx.deadline - clock_.Now();
    if (left <= Duration::zero()) return Failed("the deadline passed before the request");
    req.timeout = left;
  } else {
    req.timeout = Duration::zero();
    req.idle_timeout = options_.default_timeout;
  }
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
      // A GET has no body: its parameters travel in this header (compact JSON; JSON escapes
      // control bytes, so it is always a valid header value).
      {"X-Gnomon-Params", method == "POST" ? std::string() : ctx.params},
  };
  // Unset values are left out (an empty header is legal HTTP, but some servers drop it anyway).
  // Values that cannot be header values are never sent.
  std::erase_if(run_headers,
                [](const auto& h) { return h.second.empty() || !IsHeaderValue(h.second); });
  bool has_content_type = false;
  for (const auto& [name, value] : target.headers) {
    // (clang 14 cannot capture a structured binding: the lambda takes the name by a reference.)
    const bool overridden =
        std::any_of(run_headers.begin(), run_headers.end(),
                    [&header = name](const auto& h) { return EqualsIgnoreCase(h.first, header); });
    if (overridden) continue;
    req.headers.emplace_back(name, value);
    has_content_type = has_content_type || EqualsIgnoreCase(name, "Content-Type");
  }
  for (auto& header : run_headers) req.headers.push_back(std::move(header));
  if (method == "POST") {
    req.body = RunJson(ctx);
    if (!has_content_type) req.headers.emplace_back("Content-Type", "application/json");
  }

  net::EgressRule job_egress;
  if (options_.egress_for) {
    job_egress = options_.egress_for(job);
    req.egress = &job_egress;
  }
  if (ctx.stop.stop_requested()) return Cancelled("");
  Result<net::HttpResponse> res = client_->Send(req);
  if (ctx.stop.stop_requested() && (!res.ok() || res->status < 200 || res->status > 299)) {
    return Cancelled(res.ok() ? std::move(res->body) : std::string());
  }
  if (!res.ok()) return Failed(res.status().message());
  ExecResult result;
  result.exit_code = res->status;
  result.output = std::move(res->body);
  if (res->status < 200 || res->status > 299) {
    result.outcome = RunOutcome::kFailed;
    result.error = method + " " + target.url + ": HTTP status " + std::to_string(res->status);
  }
  return result;
}

}  // namespace gnomon
