// The interface between the API's router (src/server/http_api.h) and the handlers of its
// resources (jobs, runs, nodes, audit, cron preview, assets, probes, metrics): the router has
// matched the route, authenticated the caller and checked the role before a handler runs.
#ifndef GNOMON_SRC_SERVER_API_HANDLER_H_
#define GNOMON_SRC_SERVER_API_HANDLER_H_

#include <string>
#include <vector>

#include "src/server/auth.h"
#include "src/server/http_message.h"

namespace gnomon::server {

// One request in flight.
struct Call {
  const Request& req;
  std::vector<std::string> segments;  // the path split at '/': "/api/v1/jobs/x" -> api v1 jobs x
  std::string method;                 // the request's method, HEAD read as GET
  Principal who;
  // Set by a handler that refuses the call for who the caller is (e.g. "namespace": a job outside
  // the token's namespaces): the router logs and counts it as an auth failure.
  std::string_view denied;
  // Audit of a mutating call (set by the handler; an empty action = not audited): what was done
  // to which job, and its state before and after (JSON, secrets redacted).
  std::string action;
  std::string target;
  std::string before;
  std::string after;
};

// A resource's handler. Handle is called on the server's worker threads, many at once:
// implementations are thread-safe and never throw (the router turns an escaped exception into a
// 500 all the same).
class ApiHandler {
 public:
  virtual ~ApiHandler() = default;
  virtual Response Handle(Call& call) = 0;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_API_HANDLER_H_
