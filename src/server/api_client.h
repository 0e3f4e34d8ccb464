// ApiClient: a client of a daemon's HTTP API, for the command line (`gnomon job ...`): finds the
// token (ClientToken), speaks http or https (optionally with a client certificate), and turns
// every failure into one line of text for people. One request at a time; thread-compatible.
#ifndef GNOMON_SRC_SERVER_API_CLIENT_H_
#define GNOMON_SRC_SERVER_API_CLIENT_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace gnomon::server {

struct ApiClientOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  std::string token_file;
  std::string data_dir;     // a local server's data directory: its generated admin token
  std::string ca_file;      // https: the CAs to trust instead of the system's
  std::string client_cert;  // https with mutual TLS: this client's certificate and key
  std::string client_key;
};

struct ApiReply {
  // What went wrong, for people (empty when the request succeeded).
  std::string error;
  // The HTTP status; 0 when there was none (unreachable server, bad options).
  int status = 0;
  bool usage_error = false;  // refused before sending (options, token) or answered 4xx
  nlohmann::json body;       // the parsed answer (null when it was not JSON)
  std::string etag;
  bool ok() const { return error.empty(); }
};

class ApiClient {
 public:
  explicit ApiClient(ApiClientOptions options) : options_(std::move(options)) {}

  // One request; `body` is JSON for POST and PUT; `headers` are added (If-Match).
  ApiReply Call(const std::string& method, const std::string& path, const std::string& body = "",
                const std::vector<std::pair<std::string, std::string>>& headers = {});
  // GET `path` as server-sent events: on_event(name, data) for each event until the stream ends.
  // The reply carries the error when it could not be opened or broke.
  ApiReply Stream(const std::string& path,
                  const std::function<void(const std::string&, const nlohmann::json&)>& on_event);
  // Prints the output of run `run_id`'s newest attempt to `out`; with `follow`, also what it
  // prints next, until the run ends (GET ?follow=1). Of a tail that moved on (only the last
  // 64 KiB are kept), the text after the last bytes printed is printed.
  ApiReply PrintOutput(const std::string& run_id, bool follow, std::ostream& out);

 private:
  const ApiClientOptions options_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_API_CLIENT_H_
