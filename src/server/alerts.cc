// AlertObserver: the adapter around nlohmann::json and OpenSSL's HMAC (their exceptions stop
// here, docs/architecture.md rule 4); requests go through net::HttpClient.
#include "src/server/alerts.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "src/net/http_url.h"

namespace gnomon::server {
namespace {

net::HttpClientOptions ClientOptions(const AlertOptions& o) {
  net::HttpClientOptions c;
  c.total_timeout = o.request_timeout;
  c.connect_timeout = o.request_timeout;
  c.max_body_bytes = 1024;  // only the status matters; the rest of an answer is dropped
  c.tls = o.tls;
  c.egress = o.egress;
  return c;
}

bool IsAlertEvent(std::string_view name) {
  return std::find(std::begin(kAlertEvents), std::end(kAlertEvents), name) !=
         std::end(kAlertEvents);
}

// The alert an event raises, or empty.
std::string_view AlertEventOf(const SchedulerEvent& e) {
  using K = SchedulerEvent::Kind;
  switch (e.kind) {
    case K::kRunFinished:
      // kLost is reported by kLostRun ("lost_run"); cancellations are not failures.
      return e.outcome == RunOutcome::kFailed || e.outcome == RunOutcome::kTimedOut ? "run_failed"
                                                                                    : "";
    case K::kLostRun:
      return "lost_run";
    case K::kAutoPaused:
      return "auto_paused";
    case K::kSkipped:
      return e.detail == "misfire" ? "missed_fire" : "";
    default:
      return "";
  }
}

bool Applies(const AlertTarget& t, std::string_view event, std::string_view job) {
  if (!t.events.empty() && std::find(t.events.begin(), t.events.end(), event) == t.events.end()) {
    return false;
  }
  if (t.jobs.empty()) return true;
  return std::any_of(t.jobs.begin(), t.jobs.end(),
                     [&](const std::string& prefix) { return job.starts_with(prefix); });
}

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

// Lower-case hex HMAC-SHA256 of `message` keyed by `secret`.
std::string HmacSha256Hex(std::string_view secret, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // An empty key is legal HMAC; OpenSSL wants a non-null pointer for it.
  static const unsigned char kEmpty = 0;
  const void* key = secret.empty() ? &kEmpty : static_cast<const void*>(secret.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &len) == nullptr) {
    return "";
  }
  return Hex(mac, len);
}

std::string RandomPrefix() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace

Status ValidateAlertTargets(const std::vector<AlertTarget>& targets) {
  std::set<std::string> names;
  for (size_t i = 0; i < targets.size(); ++i) {
    const AlertTarget& t = targets[i];
    if (t.name.empty()) {
      return InvalidArgumentError("alert #" + std::to_string(i + 1) + ": name is empty");
    }
    const std::string where = "alert \"" + t.name + "\"";
    if (!names.insert(t.name).second) {
      return InvalidArgumentError(where + ": name is used by another alert target");
    }
    if (t.url.empty()) return InvalidArgumentError(where + ": url is empty");
    Result<net::HttpUrl> url = net::ParseHttpUrl(t.url);
    if (!url.ok()) return url.status().WithPrefix(where);
    std::set<std::string_view> events;
    for (const std::string& e : t.events) {
      if (!IsAlertEvent(e)) {
        return InvalidArgumentError(where + ": events: unknown event \"" + e +
                                    "\" (run_failed, lost_run, auto_paused, missed_fire)");
      }
      if (!events.insert(e).second) {
        return InvalidArgumentError(where + ": events: \"" + e + "\" is listed twice");
      }
    }
    for (const std::string& prefix : t.jobs) {
      if (prefix.empty()) {
        return InvalidArgumentError(where +
                                    ": jobs: empty job prefix (omit jobs to match every job)");
      }
    }
  }
  return Status::Ok();
}

std::vector<std::shared_ptr<const AlertTarget>> AlertObserver::Share(
    std::vector<AlertTarget> targets) {
  std::vector<std::shared_ptr<const AlertTarget>> out;
  for (AlertTarget& t : targets) out.push_back(std::make_shared<const AlertTarget>(std::move(t)));
  return out;
}

std::vector<AlertTarget> AlertObserver::Targets() const {
  std::vector<AlertTarget> out;
  for (const auto& t : targets_) out.push_back(*t);
  return out;
}

Status AlertObserver::SetTargets(std::vector<AlertTarget> targets) {
  GNOMON_RETURN_IF_ERROR(ValidateAlertTargets(targets));
  std::vector<std::shared_ptr<const AlertTarget>> shared = Share(std::move(targets));
  std::lock_guard<std::mutex> lock(mu_);
  targets_ = std::move(shared);  // queued alerts keep the target they were made for
  return Status::Ok();
}

AlertObserver::AlertObserver(std::vector<AlertTarget> targets, std::string node_id,
                             AlertOptions options)
    : targets_(Share(std::move(targets))),
      node_id_(std::move(node_id)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Get()),
      client_(ClientOptions(options_)),
      delivery_prefix_(RandomPrefix()),
      rng_(std::random_device{}()) {
  GNOMON_CHECK(ValidateAlertTargets(Targets()).ok());
  GNOMON_CHECK(options_.queue_capacity >= 1);
  GNOMON_CHECK(options_.max_attempts >= 1);
  thread_ = std::jthread([this] { Run(); });
}

AlertObserver::~AlertObserver() { Stop(); }

void AlertObserver::OnEvent(const SchedulerEvent& event) {
  const std::string_view name = AlertEventOf(event);
  if (name.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  bool queued = false;
  for (const std::shared_ptr<const AlertTarget>& target : targets_) {
    if (!Applies(*target, name, event.job_id)) continue;
    queued = true;
    if (name == "missed_fire") {
      // Merge into this job's missed_fire alert for this target that has not been sent yet.
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](const auto& entry) {
        const Alert& a = entry.second;
        return a.target == target && a.sent == 0 && a.event == name && a.job == event.job_id;
      });
      if (it != queue_.end()) {
        Alert& a = it->second;
        ++a.count;
        a.scheduled_at = std::min(a.scheduled_at, event.scheduled_at);
        a.last_scheduled_at = std::max(a.last_scheduled_at, event.scheduled_at);
        a.at = std::max(a.at, event.at);
        continue;
      }
    }
    const uint64_t seq = next_seq_++;
    Alert a;
    a.target = target;
    a.event = std::string(name);
    a.job = event.job_id;
    a.run = event.run_id;
    a.attempt = event.attempt;
    a.fencing_token = event.fencing_token;
    a.scheduled_at = event.scheduled_at;
    a.last_scheduled_at = event.scheduled_at;
    a.at = event.at;
    a.outcome = std::string(ToString(event.outcome));
    a.detail = event.detail;
    a.delivery_id = delivery_prefix_ + "-" + std::to_string(seq);
    a.due = clock_.SteadyNow();
    if (name == "missed_fire" && options_.missed_fire_window > Duration::zero()) {
      a.due += options_.missed_fire_window;
      a.held = true;
    }
    queue_.emplace(seq, std::move(a));
    if (queue_.size() > options_.queue_capacity) {
      queue_.erase(queue_.begin());
      ++stats_.dropped;
    }
  }
  if (queued) {
    ++wake_;
    cv_.notify_all();
  }
}

void AlertObserver::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ = clock_.SteadyNow() + options_.drain_timeout;
      ++wake_;
      cv_.notify_all();
    }
  }
  if (thread_.joinable()) thread_.join();
}

AlertStats AlertObserver::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  AlertStats s = stats_;
  s.queued = queue_.size();
  return s;
}

Duration AlertObserver::Backoff(int failed_attempts) {
  // Full jitter (uniform in [0, cap]) spreads the retries of many alerts after an outage.
  Duration cap = options_.backoff_initial;
  for (int i = 1; i < failed_attempts && cap < options_.backoff_max; ++i) cap *= 2;
  cap = std::min(cap, options_.backoff_max);
  double f = 0;
  if (options_.jitter) {
    f = options_.jitter();
  } else {
    f = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  f = std::clamp(f, 0.0, 1.0);
  return Duration(static_cast<int64_t>(static_cast<double>(cap.count()) * f));
}

void AlertObserver::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const Duration now = clock_.SteadyNow();
    if (stopping_ && (queue_.empty() || now >= drain_deadline_)) break;
    // While stopping, held missed_fire alerts are due at once; retries keep their backoff.
    const auto due = [&](const Alert& a) { return stopping_ && a.held ? now : a.due; };
    auto next = queue_.end();
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (next == queue_.end() || due(it->second) < due(next->second)) next = it;
    }
    if (next != queue_.end() && due(next->second) <= now) {
      const uint64_t seq = next->first;
      Alert alert = std::move(next->second);
      queue_.erase(next);
      alert.held = false;
      ++alert.sent;
      ++stats_.attempts;
      lock.unlock();
      const Result<int> sent = Send(alert);
      lock.lock();
      const int status = sent.ok() ? *sent : 0;
      if (status >= 200 && status <= 299) {
        ++stats_.delivered;
        continue;
      }
      stats_.last_error = sent.ok() ? "POST " + net::RedactUrl(alert.target->url) +
                                          ": HTTP status " + std::to_string(status)
                                    : sent.status().message();
      if ((status == 0 || status == 429 || status >= 500) && alert.sent < options_.max_attempts) {
        // Back in its old place: the oldest alert is still the first dropped on overflow.
        alert.due = clock_.SteadyNow() + Backoff(alert.sent);
        ++stats_.retries;
        queue_.emplace(seq, std::move(alert));
        if (queue_.size() > options_.queue_capacity) {
          queue_.erase(queue_.begin());
          ++stats_.dropped;
        }
      } else {
        ++stats_.failed;
        if (options_.on_given_up) {
          const std::string error = stats_.last_error;
          lock.unlock();
          options_.on_given_up(alert.target->name, alert.event, alert.job, error);
          lock.lock();
        }
      }
      continue;
    }
    Duration deadline = next == queue_.end() ? Duration::max() : due(next->second);
    if (stopping_) deadline = std::min(deadline, drain_deadline_);
    const uint64_t seen = wake_;
    clock_.WaitUntilSteady(lock, cv_, deadline, [&] { return wake_ != seen; });
  }
  stats_.dropped += queue_.size();
  queue_.clear();
}

Result<int> AlertObserver::Send(const Alert& alert) {
  const AlertTarget& target = *alert.target;
  std::string payload;
  try {
    nlohmann::json body = {
        {"event", alert.event},
        {"job", alert.job},
        {"run", alert.run},
        {"attempt", alert.attempt},
        {"fencing_token", alert.fencing_token},
        {"scheduled_at", alert.scheduled_at.ToRfc3339()},
        {"last_scheduled_at", alert.last_scheduled_at.ToRfc3339()},
        {"at", alert.at.ToRfc3339()},
        {"node", node_id_},
        {"outcome", alert.outcome},
        {"detail", alert.detail},
        {"count", alert.count},
    };
    // Invalid UTF-8 (from a process's output in `detail`) is replaced, never thrown.
    payload = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return InternalError(std::string("alert body: ") + e.what());
  }
  const std::string timestamp = std::to_string(clock_.Now().unix_seconds());
  net::HttpRequest req;
  req.method = "POST";
  req.url = target.url;
  req.headers = {
      {"Content-Type", "application/json"},
      {"X-Gnomon-Event", alert.event},
      {"X-Gnomon-Delivery", alert.delivery_id},
      {"X-Gnomon-Timestamp", timestamp},
  };
  if (!target.secret.empty()) {
    req.headers.emplace_back("X-Gnomon-Signature",
                             "sha256=" + HmacSha256Hex(target.secret, timestamp + "." + payload));
  }
  req.body = std::move(payload);
  Result<net::HttpResponse> res = client_.Send(req);
  if (!res.ok()) return res.status();
  return res->status;
}

}  // namespace gnomon::server
