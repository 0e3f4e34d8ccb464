// HttpClient: the adapter around libcurl (a C library: no exceptions to stop here, only codes to
// turn into a Status).
//
// Why the multi interface for a single transfer: curl_easy_perform polls in steps of up to a
// second and checks the progress callback only between them, so a stop request could wait that
// long. Driving the one easy handle with curl_multi_poll lets a std::stop_callback wake the poll
// (curl_multi_wakeup is documented safe from any thread) and the call returns at once.
#include "src/net/http_client.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <mutex>

#include "src/net/http_url.h"

namespace gnomon::net {

namespace {

// The locks libcurl asks for around shared data: one mutex per kind (calls on many threads use
// the share at once).
struct ShareLocks {
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
};

void GlobalInit() {
  // curl_global_init is not thread-safe in every libcurl; a function-local static runs it once.
  // Never cleaned up: other threads may still be using libcurl when statics are destroyed.
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)init;  // on failure curl_easy_init returns null, reported by Send
}

void LockShared(CURL*, curl_lock_data data, curl_lock_access, void* user) {
  static_cast<ShareLocks*>(user)->locks[data].lock();
}
void UnlockShared(CURL*, curl_lock_data data, void* user) {
  static_cast<ShareLocks*>(user)->locks[data].unlock();
}

struct EasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using ListPtr = std::unique_ptr<curl_slist, ListDeleter>;

// Appends to a list; false when out of memory.
bool Append(ListPtr& list, const std::string& item) {
  curl_slist* grown = curl_slist_append(list.get(), item.c_str());
  if (grown == nullptr) return false;
  list.release();  // NOLINT(bugprone-unused-return-value): `grown` owns it now
  list.reset(grown);
  return true;
}

// The state of one call that libcurl's callbacks see. They all run on the calling thread, inside
// curl_multi_perform.
struct Call {
  const HttpClientOptions* options = nullptr;
  const EgressRule* egress = nullptr;
  std::string body;
  uint64_t body_bytes = 0;
  int sockets_asked = 0;              // connections libcurl wanted to open
  std::vector<std::string> refusals;  // egress messages of those refused
  curl_off_t bytes_moved = 0;         // body bytes sent + received so far (progress callback)
};

int OnProgress(void* user, curl_off_t, curl_off_t received, curl_off_t, curl_off_t sent) {
  static_cast<Call*>(user)->bytes_moved = received + sent;
  return 0;  // never aborts: stops and timeouts are decided by the loop in Send
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  Call& call = *static_cast<Call*>(user);
  const size_t n = size * count;
  call.body_bytes += n;
  const size_t cap = call.options->max_body_bytes;
  if (!call.options->keep_body_tail) {
    if (call.body.size() < cap) call.body.append(data, std::min(n, cap - call.body.size()));
  } else if (cap > 0) {
    // Keep the last `cap` bytes: append, and trim once twice the cap is held (amortised O(1)).
    if (n >= cap) {
      call.body.assign(data + (n - cap), cap);
    } else {
      call.body.append(data, n);
      if (call.body.size() >= 2 * cap) call.body.erase(0, call.body.size() - cap);
    }
  }
  return n;  // every byte is consumed: the rest is discarded, the transfer goes on
}

std::optional<IpAddress> AddressOf(const sockaddr* sa, socklen_t len) {
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::array<uint8_t, 4> b;
    std::memcpy(b.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return IpAddress::V4(b);
  }
  if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::array<uint8_t, 16> b;
    std::memcpy(b.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return IpAddress::V6(b);
  }
  return std::nullopt;
}

// The egress filter: libcurl calls this for every socket it wants to connect (each address of a
// resolved name, each redirect hop, the proxy), with the address it will connect to. A refused
// address never gets a socket; libcurl then tries the next address or fails the transfer with
// CURLE_COULDNT_CONNECT.
curl_socket_t OnOpenSocket(void* user, curlsocktype, curl_sockaddr* a) {
  Call& call = *static_cast<Call*>(user);
  ++call.sockets_asked;
  const std::optional<IpAddress> ip = AddressOf(&a->addr, a->addrlen);
  if (!ip) {
    call.refusals.push_back("egress: address family " + std::to_string(a->family) +
                            " is not IPv4 or IPv6");
    return CURL_SOCKET_BAD;
  }
  const Status allowed = CheckEgress(*call.egress, *ip);
  if (!allowed.ok()) {
    if (std::find(call.refusals.begin(), call.refusals.end(), allowed.message()) ==
        call.refusals.end()) {
      call.refusals.push_back(allowed.message());
    }
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

// RFC 9110 token characters (header names, methods).
bool IsToken(std::string_view s) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kSpecials.find(c) != kSpecials.npos;
  });
}

bool IsHeaderValue(std::string_view v) {
  return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Milliseconds for libcurl: at least 1 (0 would mean "no limit" to libcurl), at most LONG_MAX.
long Millis(Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return static_cast<long>(std::clamp<int64_t>(ms, 1, std::numeric_limits<long>::max()));
}

// "host:port" of the URL libcurl last worked on (after redirects), for TLS messages.
std::string PeerOf(CURL* easy, const std::string& fallback_url) {
  char* effective = nullptr;
  curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &effective);
  Result<HttpUrl> url = ParseHttpUrl(effective != nullptr ? effective : fallback_url);
  if (!url.ok()) return RedactUrl(fallback_url);
  const bool v6 = url->host.find(':') != std::string::npos;
  return (v6 ? "[" + url->host + "]" : url->host) + ":" + std::to_string(url->port);
}

}  // namespace

// The DNS cache shared by one client's calls.
struct HttpClient::Shared {
  CURLSH* share = nullptr;
  ShareLocks locks;
};

HttpClient::HttpClient(HttpClientOptions options)
    : options_(std::move(options)), shared_(std::make_unique<Shared>()) {
  GlobalInit();
  shared_->share = curl_share_init();
  if (shared_->share != nullptr) {
    curl_share_setopt(shared_->share, CURLSHOPT_LOCKFUNC, LockShared);
    curl_share_setopt(shared_->share, CURLSHOPT_UNLOCKFUNC, UnlockShared);
    curl_share_setopt(shared_->share, CURLSHOPT_USERDATA, &shared_->locks);
    curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    // Not CURL_LOCK_DATA_SSL_SESSION: with Debian's libcurl 7.88 and OpenSSL 3, a session taken
    // from the shared cache is copied outside the lock while another call may free it (a data
    // race that TSan reported in HttpClientTlsTest.ManyThreadsShareOneClient). A full TLS
    // handshake per request is the price; these clients send a few requests a second at most.
  }
}

HttpClient::~HttpClient() {
  if (shared_->share != nullptr) curl_share_cleanup(shared_->share);
}

Result<HttpResponse> HttpClient::Send(const HttpRequest& request) const {
  Result<HttpUrl> url = ParseHttpUrl(request.url);
  if (!url.ok()) return url.status();
  const std::string where = request.method + " " + RedactUrl(request.url) + ": ";
  if (!IsToken(request.method)) {
    return InvalidArgumentError(where + "the method is not an HTTP token");
  }
  const EgressRule& egress = request.egress != nullptr ? *request.egress : options_.egress;
  // A URL naming a denied address fails before any socket exists.
  if (IpAddress::Parse(url->host)) {
    Status allowed = CheckEgress(egress, url->host);
    if (!allowed.ok()) return allowed.WithPrefix(where.substr(0, where.size() - 2));
  }
  const Duration total = request.timeout.value_or(options_.total_timeout);
  if (total < Duration::zero()) {
    return DeadlineExceededError(where + "the time allowed (" + FormatDuration(total) +
                                 ") ran out before the request");
  }
  const Duration idle = request.idle_timeout.value_or(options_.idle_timeout);
  const Duration connect = total > Duration::zero() && total < options_.connect_timeout
                               ? total
                               : options_.connect_timeout;

  ListPtr headers;
  bool has_content_type = false;
  bool ok = Append(headers, "Expect:");  // no 100-continue round trip before a body
  for (const auto& [name, value] : request.headers) {
    if (!IsToken(name)) {
      return InvalidArgumentError(where + "header name \"" + name + "\" is not an HTTP token");
    }
    if (!IsHeaderValue(value)) {
      return InvalidArgumentError(where + "header " + name + ": the value has CR, LF or NUL");
    }
    has_content_type = has_content_type || EqualsIgnoreCase(name, "Content-Type");
    // "Name;" is libcurl's way to send a header with an empty value ("Name:" would remove it).
    ok = ok && Append(headers, value.empty() ? name + ";" : name + ": " + value);
  }
  const bool send_body =
      !request.body.empty() || request.method == "POST" || request.method == "PUT";
  // Without this, a body would go out as application/x-www-form-urlencoded.
  if (send_body && !has_content_type) ok = ok && Append(headers, "Content-Type:");
  ListPtr resolve;
  for (const std::string& entry : options_.resolve) ok = ok && Append(resolve, entry);

  // What the handles point to is declared first, so that it outlives them.
  Call call;
  call.options = &options_;
  call.egress = &egress;
  char error_buffer[CURL_ERROR_SIZE] = {};
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!ok || easy == nullptr || multi == nullptr) {
    return InternalError(where + "libcurl could not be initialised (out of memory?)");
  }

  CURL* e = easy.get();
  CURLcode rc = CURLE_OK;
  const auto set = [&](CURLoption option, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, option, value);
  };
  set(CURLOPT_URL, request.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  set(CURLOPT_FOLLOWLOCATION, options_.max_redirects > 0 ? 1L : 0L);
  set(CURLOPT_MAXREDIRS, static_cast<long>(options_.max_redirects));
  set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_ERRORBUFFER, error_buffer);
  set(CURLOPT_USERAGENT, options_.user_agent.c_str());
  set(CURLOPT_HTTPHEADER, headers.get());
  if (resolve) set(CURLOPT_RESOLVE, resolve.get());
  if (shared_->share != nullptr) set(CURLOPT_SHARE, shared_->share);
  set(CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
  set(CURLOPT_OPENSOCKETDATA, &call);
  set(CURLOPT_WRITEFUNCTION, OnBody);
  set(CURLOPT_WRITEDATA, &call);
  if (connect > Duration::zero()) set(CURLOPT_CONNECTTIMEOUT_MS, Millis(connect));
  if (total > Duration::zero()) set(CURLOPT_TIMEOUT_MS, Millis(total));
  // The idle timeout is measured by the loop below (libcurl's LOW_SPEED_TIME averages over
  // several seconds, so a request that sent a body would only be cut seconds late).
  set(CURLOPT_NOPROGRESS, 0L);
  set(CURLOPT_XFERINFOFUNCTION, OnProgress);
  set(CURLOPT_XFERINFODATA, &call);
  if (options_.proxy) set(CURLOPT_PROXY, options_.proxy->c_str());
  if (!options_.tls.ca_file.empty()) set(CURLOPT_CAINFO, options_.tls.ca_file.c_str());
  if (!options_.tls.cert_file.empty()) {
    set(CURLOPT_SSLCERT, options_.tls.cert_file.c_str());
  }
  if (!options_.tls.key_file.empty()) {
    set(CURLOPT_SSLKEY, options_.tls.key_file.c_str());
  }
  set(CURLOPT_SSL_VERIFYPEER, options_.tls.verify ? 1L : 0L);
  set(CURLOPT_SSL_VERIFYHOST, options_.tls.verify ? 2L : 0L);
  if (request.method == "GET" && request.body.empty()) {
    set(CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD" && request.body.empty()) {
    set(CURLOPT_NOBODY, 1L);
  } else {
    if (send_body) {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      set(CURLOPT_POSTFIELDS, request.body.data());
    }
    if (request.method != "POST") set(CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (rc != CURLE_OK) {
    return InternalError(where + "libcurl refused an option: " + curl_easy_strerror(rc));
  }

  if (request.stop.stop_requested()) return UnavailableError(where + "cancelled");
  if (curl_multi_add_handle(multi.get(), e) != CURLM_OK) {
    return InternalError(where + "libcurl could not start the transfer");
  }
  bool cancelled = false;
  bool went_idle = false;
  CURLMcode multi_error = CURLM_OK;
  {
    // Runs on the stopping thread, or at once here if the stop came before this line. The
    // callback's destructor waits for a running callback, so `multi` outlives every wakeup.
    std::stop_callback wake(request.stop, [m = multi.get()] { curl_multi_wakeup(m); });
    SystemClock& clock = SystemClock::Get();
    Duration last_activity = clock.SteadyNow();
    curl_off_t last_moved = 0;
    int running = 1;
    while (true) {
      if (request.stop.stop_requested()) {
        cancelled = true;
        break;
      }
      multi_error = curl_multi_perform(multi.get(), &running);
      if (multi_error != CURLM_OK || running == 0) break;
      // libcurl shortens the wait to its own next timeout; 1 s is only a backstop.
      int wait_ms = 1000;
      if (idle > Duration::zero()) {
        const Duration now = clock.SteadyNow();
        if (call.bytes_moved != last_moved) {
          last_moved = call.bytes_moved;
          last_activity = now;
        }
        const Duration left = last_activity + idle - now;
        if (left <= Duration::zero()) {
          went_idle = true;
          break;
        }
        wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, left.count()));
      }
      multi_error = curl_multi_poll(multi.get(), nullptr, 0, wait_ms, nullptr);
      if (multi_error != CURLM_OK) break;
    }
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) {
      result = msg->data.result;
      done = true;
    }
  }
  curl_multi_remove_handle(multi.get(), e);

  if (cancelled) return UnavailableError(where + "cancelled");
  if (went_idle) {
    return DeadlineExceededError(where + "idle timeout " + FormatDuration(idle) +
                                 " (no byte sent or received for that long)");
  }
  if (multi_error != CURLM_OK) {
    return InternalError(where + "libcurl: " + curl_multi_strerror(multi_error));
  }
  if (!done) return InternalError(where + "libcurl ended without a result");
  const std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(result);
  switch (result) {
    case CURLE_OK: {
      HttpResponse response;
      long status = 0;
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
      response.status = static_cast<int>(status);
      response.body = std::move(call.body);
      if (options_.keep_body_tail && response.body.size() > options_.max_body_bytes) {
        response.body.erase(0, response.body.size() - options_.max_body_bytes);
      }
      response.body_bytes = call.body_bytes;
      return response;
    }
    case CURLE_COULDNT_CONNECT:
      if (!call.refusals.empty()) {
        std::string message;
        for (const std::string& r : call.refusals) message += (message.empty() ? "" : "; ") + r;
        // Other addresses were allowed but could not be reached: say so too.
        if (static_cast<size_t>(call.sockets_asked) > call.refusals.size()) {
          message += "; other addresses: " + detail;
        }
        return FailedPreconditionError(where + message);
      }
      return UnavailableError(where + "connect: " + detail);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return UnavailableError(where + "DNS: " + detail);
    case CURLE_OPERATION_TIMEDOUT: {
      // Which limit ended it: the connection (TCP, then TLS for https) was not made yet, or the
      // transfer ran out of total time.
      curl_off_t connected_us = 0;
      curl_off_t tls_us = 0;
      curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connected_us);
      curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &tls_us);
      const bool connected = connected_us > 0 && (url->scheme != "https" || tls_us > 0);
      const std::string which = connected ? "total timeout " + FormatDuration(total)
                                          : "connect timeout " + FormatDuration(connect);
      return DeadlineExceededError(where + which + " (" + detail + ")");
    }
    case CURLE_PEER_FAILED_VERIFICATION:
      return UnavailableError(where + "TLS: the certificate of " + PeerOf(e, request.url) +
                              " was not verified: " + detail);
    case CURLE_SSL_CONNECT_ERROR:
      return UnavailableError(where + "TLS: handshake with " + PeerOf(e, request.url) +
                              " failed: " + detail);
    case CURLE_SSL_CACERT_BADFILE:
      return InvalidArgumentError(where + "TLS: ca_file \"" + options_.tls.ca_file +
                                  "\": " + detail);
    case CURLE_SSL_CERTPROBLEM:
      return InvalidArgumentError(where + "TLS: client certificate \"" + options_.tls.cert_file +
                                  "\" / key \"" + options_.tls.key_file + "\": " + detail);
    case CURLE_TOO_MANY_REDIRECTS:
      return UnavailableError(where + "too many redirects (more than " +
                              std::to_string(options_.max_redirects) + "): " + detail);
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgumentError(where + "unsupported protocol: " + detail);
    case CURLE_SEND_ERROR:
      return UnavailableError(where + "send: " + detail);
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return UnavailableError(where + "receive: " + detail);
    default:
      return UnavailableError(where + detail);
  }
}

}  // namespace gnomon::net
