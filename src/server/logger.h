// Structured logs of `gnomon serve`: one line per event, as text (key=value) or JSON lines.
// Every line carries the node, job and run id fields (empty when not about a run) so that a
// `grep run=report@1764451800000` or a JSON query finds a run's whole story. Thread-safe.
#ifndef GNOMON_SRC_SERVER_LOGGER_H_
#define GNOMON_SRC_SERVER_LOGGER_H_

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/observer.h"

namespace gnomon::server {

enum class LogFormat { kText, kJson };
enum class LogLevel { kDebug, kInfo, kWarn, kError };
// "text" / "json" and "debug" / "info" / "warn" / "error", as in the config file.
std::string_view ToString(LogFormat f);
std::string_view ToString(LogLevel l);

class Logger {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;
  // Writes to `out` (not owned; default stderr).
  Logger(LogFormat format, LogLevel level, std::string node_id, FILE* out = stderr);

  // `job` and `run_id` may be empty. `fields` follow in order.
  void Log(LogLevel level, std::string_view event, std::string_view job, std::string_view run_id,
           const Fields& fields = {});
  void Info(std::string_view event, const Fields& fields = {}) {
    Log(LogLevel::kInfo, event, "", "", fields);
  }
  void Error(std::string_view event, const Fields& fields = {}) {
    Log(LogLevel::kError, event, "", "", fields);
  }

 private:
  const LogFormat format_;
  const LogLevel level_;
  const std::string node_id_;
  FILE* const out_;
  std::mutex mu_;
};

// Logs every scheduler event (lease renewals at debug level).
class LogObserver final : public Observer {
 public:
  explicit LogObserver(Logger& logger) : logger_(logger) {}
  void OnEvent(const SchedulerEvent& event) override;

 private:
  Logger& logger_;
};

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_LOGGER_H_
