#include "src/server/api_client.h"

#include <httplib.h>

#include <algorithm>

#include "src/server/admin_token.h"

namespace gnomon::server {
namespace {

// The client and headers of a request, or the error that prevents it.
struct Prepared {
  std::unique_ptr<httplib::Client> client;
  httplib::Headers headers;
  ApiReply refused;
};

Prepared Prepare(const ApiClientOptions& o) {
  Prepared p;
  if (o.client_cert.empty() != o.client_key.empty()) {
    p.refused.error = "--cert and --key go together";
    p.refused.usage_error = true;
    return p;
  }
  Result<std::string> token =
      ClientToken(o.token, o.token_file, o.data_dir, o.server, !o.client_cert.empty());
  if (!token.ok()) {
    p.refused.error = token.status().message();
    p.refused.usage_error = true;
    return p;
  }
  p.client = std::make_unique<httplib::Client>(o.server, o.client_cert, o.client_key);
  if (!o.ca_file.empty()) p.client->set_ca_cert_path(o.ca_file.c_str());
  p.client->enable_server_certificate_verification(true);
  p.client->set_connection_timeout(5);
  p.client->set_read_timeout(30);
  if (!token->empty()) p.headers.emplace("Authorization", "Bearer " + *token);
  return p;
}

// Fills status, body, etag and (for 4xx/5xx) the error of `reply` from `r`.
void Answered(const httplib::Response& r, ApiReply& reply) {
  reply.status = r.status;
  if (!r.body.empty()) reply.body = nlohmann::json::parse(r.body, nullptr, false);
  reply.etag = r.get_header_value("ETag");
  if (r.status >= 400) {
    const std::string message = reply.body.is_object() && reply.body.contains("error")
                                    ? reply.body["error"].value("message", r.body)
                                    : r.body;
    reply.error = std::to_string(r.status) + ": " + message;
    reply.usage_error = r.status < 500;
  }
}

}  // namespace

ApiReply ApiClient::Call(const std::string& method, const std::string& path,
                         const std::string& body,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  Prepared p = Prepare(options_);
  if (!p.client) return p.refused;
  for (const auto& [k, v] : headers) p.headers.emplace(k, v);
  ApiReply reply;
  try {
    httplib::Result r = method == "GET"      ? p.client->Get(path, p.headers)
                        : method == "DELETE" ? p.client->Delete(path, p.headers)
                        : method == "PUT"
                            ? p.client->Put(path, p.headers, body, "application/json")
                            : p.client->Post(path, p.headers, body, "application/json");
    if (!r) {
      reply.error = options_.server + ": " + httplib::to_string(r.error());
      return reply;
    }
    Answered(*r, reply);
  } catch (const std::exception& e) {  // httplib adapter boundary
    reply.error = e.what();
  }
  return reply;
}

ApiReply ApiClient::Stream(
    const std::string& path,
    const std::function<void(const std::string&, const nlohmann::json&)>& on_event) {
  Prepared p = Prepare(options_);
  if (!p.client) return p.refused;
  ApiReply reply;
  std::string pending, error_body;
  int status = 0;
  try {
    httplib::Result r = p.client->Get(
        path, p.headers,
        [&](const httplib::Response& head) {
          status = head.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (status != 200) {
            error_body.append(data, n);
            return true;
          }
          pending.append(data, n);
          for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
            const std::string block = pending.substr(0, end);
            pending.erase(0, end + 2);
            std::string name = "message", data_text;
            size_t at = 0;
            while (at <= block.size()) {
              size_t eol = block.find('\n', at);
              if (eol == std::string::npos) eol = block.size();
              const std::string_view line(block.data() + at, eol - at);
              if (line.starts_with("event: ")) name = line.substr(7);
              if (line.starts_with("data: ")) data_text += line.substr(6);
              at = eol + 1;
            }
            if (!data_text.empty())
              on_event(name, nlohmann::json::parse(data_text, nullptr, false));
          }
          return true;
        });
    if (!r) {
      reply.error = options_.server + ": " + httplib::to_string(r.error());
      return reply;
    }
    httplib::Response answered = *r;
    answered.body = error_body;
    Answered(answered, reply);
  } catch (const std::exception& e) {  // httplib adapter boundary
    reply.error = e.what();
  }
  return reply;
}

ApiReply ApiClient::PrintOutput(const std::string& run_id, bool follow, std::ostream& out) {
  const std::string path = "/api/v1/runs/" + httplib::detail::encode_query_param(run_id);
  std::string shown;  // the newest attempt's output as last printed
  int attempt = 0;
  auto print = [&](const nlohmann::json& run) {
    const nlohmann::json attempts = run.value("attempts", nlohmann::json::array());
    if (attempts.empty()) return;
    const nlohmann::json& last = attempts.back();
    const std::string text = last.value("output", "");
    if (last.value("attempt", 0) != attempt) shown.clear();
    attempt = last.value("attempt", 0);
    size_t from = 0;
    if (text.starts_with(shown)) {
      from = shown.size();
    } else {
      const std::string anchor = shown.substr(shown.size() - std::min<size_t>(shown.size(), 512));
      if (size_t at = text.rfind(anchor); at != std::string::npos) from = at + anchor.size();
    }
    out << text.substr(from) << std::flush;
    shown = text;
  };
  if (!follow) {
    ApiReply r = Call("GET", path);
    if (r.ok()) print(r.body);
    return r;
  }
  return Stream(path + "?follow=1", [&](const std::string& event, const nlohmann::json& data) {
    if (event == "run") print(data);
  });
}

}  // namespace gnomon::server
