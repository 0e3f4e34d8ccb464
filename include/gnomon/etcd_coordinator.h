// EtcdCoordinator: the Coordinator (gnomon/coordinator.h) on an etcd v3 cluster (3.4+; tested
// against Debian's 3.4), for a fleet that wants linearizable claims (docs/configuration.md
// "Backend URLs": `etcd://[user:pass@]h1:2379[,h2:2379...][/prefix]`).
//
// Protocol. etcd's v3 API through its JSON gateway over plain HTTP/1.1 (`POST /v3/kv/range`,
// `/v3/kv/txn`, `/v3/watch`, `/v3/auth/authenticate`), with Debian's cpp-httplib and
// nlohmann-json: no gRPC/protobuf toolchain. Keys and values travel base64-encoded; int64 fields
// are JSON strings; fields with default values are omitted from responses (a txn whose compares
// fail has no `succeeded` field: absent means false). Every read is linearizable (the gateway's
// default), never serializable.
//
// Atomicity. etcd has transactions (compares on a key's value, version, create or mod revision,
// then a list of puts/deletes/ranges) but no arithmetic or scripting. So every read-modify-write
// operation is an optimistic transaction: read the keys it depends on (one txn of ranges at one
// revision), decide in C++, then commit one txn whose compares require every key read to still
// have the mod_revision seen (0 = still absent); on a conflict, read again and decide again (at
// most 64 rounds, then Unavailable). A claim (fire marker created only if absent, paused check,
// early-fire guard, overlap check, fencing token), a renew (token, open and unexpired compared,
// then extended), a report, ResolveLost (compare-and-set on the token) and a checkpoint save are
// each applied whole or not at all, whatever the number of nodes. Insertions into a range read
// are not caught by per-key compares, so every operation that creates a job's live fire, or
// issues its token, also rewrites the job's state key: operations on one job are serialised by
// that key's mod_revision (the overlap check cannot miss a concurrent claim of the same job).
//
// Key layout. Every key starts with EtcdOptions::prefix (default "gnomon/default/", always
// ending in '/'), written P below. <ms> is the scheduled instant (unix ms + 5e15, 17 digits,
// ascending), <~ms> its inverse (5e15 - ms, 17 digits, newest first), <shard> and <~att>
// (2^31-1 - attempt) 10 digits; job ids never contain '/' or ' ', and every prefix read ends in
// '/' so job `j1` never matches `j10`:
//   P state/<job>                     JSON: paused, reason, fails, last (ms), tok (last token),
//                                     pruned (ms: the latest PruneHistory cutoff that dropped
//                                     fire markers; a claim before it is refused,
//                                     ClaimOutcome::kTooOld)
//   P fire/<job>/<ms> <shard>         JSON fire marker: sc, att, tok, node, lease (ms), open.
//                                     Kept after the fire closes (refuses a second claim) until
//                                     PruneHistory's max_age.
//   P live/<job>/<ms> <shard>         the same JSON, present only while the fire is open:
//                                     ListExpired and the overlap check read only these
//   P cp/<job>/<ms> <shard>           the fire's checkpoint (raw bytes)
//   P runs/<~ms> <job> <shard> <~att> JSON history record (output and error base64); the key
//                                     order is ListRuns' order across all jobs
//   P jobruns/<job>/<~ms> <shard> <~att>  per-job index: value = the record's outcome
//   P jobs/<job>                      a dynamic job definition; its version = mod_revision
//   P jobsver                         rewritten by every definition or pause change:
//                                     JobsVersion() = its mod_revision; WaitJobsChange watches it
//   P nodes/<node>                    JSON NodeInfo and heartbeat expiry
//   P auditseq, P audit/<seq, 20>     audit counter and records (P auditfail/<seq, 20>: failed
//                                     calls, status >= 400, capped apart)
//
// Boundedness. History is capped per job (max_records_per_job) and in total
// (max_records_total): the txn that adds a record also counts them, and when over a cap the
// oldest finished records are deleted (running ones never). PruneHistory applies the per-job
// retention (keep_last fires, max_age); fire markers go only with max_age. The audit log keeps
// the newest `keep` records (trimmed in the append's own txn). etcd itself keeps every old
// revision until compacted: run etcd with --auto-compaction-retention (docs/operations.md, "etcd").
//
// Fencing tokens. token = max(the job's last token + 1, the etcd revision the claim read + 1).
// The txn that issues it compares the job's state key, so tokens strictly increase per job; the
// revision floor keeps them increasing even if the state key was deleted, and a token is never
// larger than the revision that committed it. etcd does not lose acknowledged writes (raft,
// fsync), so tokens never go backwards across restarts. Job-definition versions are the def
// key's mod_revision, so a re-created job never reuses a version.
//
// Time. etcd has no clock API, and its lease TTLs count down on the leader in real time. So
// lease expiry, the early-fire guard, heartbeat expiry, audit `at` and max_age are computed by
// the client from the backend clock and stored as unix-ms deadlines in the values; expiry is
// decided by whoever reads them. The backend clock is an estimate of the etcd member's wall
// clock, not this host's: every gateway response carries an HTTP `Date` header (the member's
// clock, whole seconds), and a response sent at local steady time s and received at r bounds the
// offset (member clock - local steady clock) to [Date - r, Date + 1 s - s]. The client keeps the
// intersection of these intervals (each widened by 100 ppm of its age for drift) and reads the
// midpoint. Open() calibrates it with about 20-40 cheap probes (a serializable count of the key
// P clock) timed around the member's predicted second boundary: two sweeps, 1-2 s, leaving an
// uncertainty of about the round trip (a few ms on a LAN; ClockUncertainty()). A thread keeps it
// calibrated: it sweeps again when drift has widened the interval to 4 times that, or at once
// when a response contradicts it (a clock was stepped; the estimate restarts from that
// response). So a node whose own clock is wrong by any amount neither claims early nor expires
// leases early: guarantee 3 holds against the member's clock, as with Redis's TIME. REQUIRES:
// the members' clocks agree (run NTP on the etcd hosts; responses from members whose clocks
// disagree by more than the round trip restart the estimate). No etcd leases are attached: a
// key of a dead holder stays until ResolveLost handles it, exactly like the other backends. With
// EtcdOptions::clock set (the conformance suite passes its FakeClock) that clock is used as is
// and nothing is calibrated.
//
// Connections. A pool of keep-alive HTTP connections per endpoint (one request per connection
// at a time, so callers on many threads run in parallel). A call goes to the current endpoint;
// a refused connection, or a member answering "unavailable" (no leader, stopping), moves to the
// next endpoint at once (every write is a compare-guarded txn, so resending one that did apply
// fails its compares and is re-read, never applied twice); a timeout (connect_timeout /
// io_timeout) or a broken connection returns Unavailable and moves the next call to the next
// endpoint, so no call blocks much longer than one timeout. A failed endpoint is skipped for a
// capped exponential backoff with jitter (a wait in [cap/2, cap], cap doubling from
// reconnect_backoff_min to reconnect_backoff_max; requests that fail together count once). When
// every endpoint is backing off, one call at a time, at most every 200 ms, probes the endpoint
// due soonest and the other calls return Unavailable at once: a cluster that comes back is used
// within 200 ms (or as soon as a frozen one answers the probe it holds), whatever the backoff.
// A claim whose txn got no answer (a timeout: it may be applied, even seconds later by a frozen
// member that resumes) is remembered; when this node claims that fire again and finds its own
// claim applied and still open, it adopts it (fresh lease, same token) instead of reporting
// AlreadyClaimed, so the fire still runs once rather than being left for ResolveLost. With
// user/password, a token from /v3/auth/authenticate is sent in the Authorization header and renewed
// when etcd rejects it. The password never appears in a Status message.
//
// Thread safety: safe to call from many threads at once. Do not keep one across fork().
#ifndef GNOMON_ETCD_COORDINATOR_H_
#define GNOMON_ETCD_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/time.h"
#include "gnomon/tls.h"

namespace gnomon {
namespace coord {
class EtcdClient;
}  // namespace coord

struct EtcdOptions {
  // Client endpoints (host, port) of the cluster's members, tried in order with failover.
  // Default {("127.0.0.1", 2379)}. Must not be empty; ports 1-65535.
  std::vector<std::pair<std::string, int>> endpoints = {{"127.0.0.1", 2379}};
  // etcd user for /v3/auth/authenticate; empty = no authentication. Default empty.
  std::string user;
  // Its password. Never logged nor put in an error message. Default empty.
  std::string password;
  // TLS to every endpoint (`etcd://https://h1:2379,https://h2:2379?tls_ca=...`): the CA that signs
  // the members' certificates (they must name the host connected to, or tls_server_name), a
  // client certificate for a cluster with --client-cert-auth. Default off (plain HTTP).
  TlsOptions tls;
  // First part of every key: non-empty, printable ASCII without spaces, ending in '/' (added
  // when missing). Several clusters can share one etcd with different prefixes.
  // Default "gnomon/default/".
  std::string prefix = "gnomon/default/";
  // TCP connect timeout. Keep it below the lease ttl. Default 2 s. Must be > 0.
  Duration connect_timeout = std::chrono::seconds(2);
  // Timeout for one request's reply. Keep it below the lease ttl (a renew must fail before the
  // lease ends). Default 2 s. Must be > 0.
  Duration io_timeout = std::chrono::seconds(2);
  // First wait before a failed endpoint is tried again; doubles per failure (jitter: [cap/2, cap]).
  // Default 1 s.
  Duration reconnect_backoff_min = std::chrono::seconds(1);
  // Cap of that wait. Default 32 s. Must be >= reconnect_backoff_min.
  Duration reconnect_backoff_max = std::chrono::seconds(32);
  // History records kept per job at most (oldest finished ones are trimmed). Default 10000.
  // Must be >= 1.
  int max_records_per_job = 10000;
  // History records kept across all jobs at most. Default 100000. Must be >= 1. etcd keeps its
  // whole key space in memory-mapped bbolt (default quota 2 GiB): see docs/operations.md, "etcd".
  int max_records_total = 100000;
  // Idle connections kept per endpoint. Default 8. Must be >= 1.
  int max_idle_connections = 8;
  // The backend clock (see the file comment, "Time"). Not owned; must outlive the coordinator.
  // Default null = the etcd member's clock, estimated from its responses' Date headers.
  Clock* clock = nullptr;
};

// Parses `etcd://[user:password@]host[:port][,host[:port]...][/prefix]` (user and password may
// be percent-encoded; the default port is 2379; the prefix gets a trailing '/') into `base` with
// those fields replaced. Endpoints may carry their scheme: `https://` on every one for TLS, with
// the query parameters of ParseTlsQuery (`etcd://https://h1:2379,https://h2:2379?tls_ca=/ca.pem`),
// `http://` for plain. InvalidArgument (with the password redacted) when malformed.
Result<EtcdOptions> ParseEtcdUrl(std::string_view url, EtcdOptions base = {});

class EtcdCoordinator final : public Coordinator {
 public:
  // Validates the options, connects to the first reachable endpoint and authenticates; without
  // EtcdOptions::clock, also calibrates the member clock estimate (1-2 s, at most 2.2 s).
  // Errors: InvalidArgument for bad options; Unavailable when no endpoint answers or the
  // credentials are refused.
  static Result<std::unique_ptr<EtcdCoordinator>> Open(const EtcdOptions& options);
  ~EtcdCoordinator() override;
  EtcdCoordinator(const EtcdCoordinator&) = delete;
  EtcdCoordinator& operator=(const EtcdCoordinator&) = delete;

  // The backend clock: the member clock estimate, or EtcdOptions::clock when set (see the
  // file comment, "Time"). Never fails: it reads the estimate, sends nothing.
  Result<Instant> Now() override;
  // The estimate's uncertainty (half-width of the interval the member's clock is in, for logs
  // and metrics); nullopt with EtcdOptions::clock set.
  std::optional<Duration> ClockUncertainty() const;

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override;
  Status Renew(gnomon::Claim& claim, Duration ttl) override;
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) override;
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override;
  Result<std::vector<ExpiredFire>> ListExpired(int limit) override;
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) override;
  Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                       const std::string& reason) override;
  Status CancelFire(const FireKey& fire, const std::string& reason) override;
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause) override;
  // Reads the fires' markers (P fire/...) in one txn per 100 fires.
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override;

  Status SaveCheckpoint(const gnomon::Claim& claim, const std::string& value) override;
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) override;
  Result<std::optional<std::string>> LoadCheckpoint(const FireKey& fire) override;

  Result<JobState> GetJobState(const std::string& job_id) override;
  Status SetPaused(const std::string& job_id, bool paused, const std::string& reason) override;

  Result<RunPage> ListRuns(const RunQuery& query) override;
  Result<std::vector<RunRecord>> GetRun(const std::string& run_id) override;
  Status PruneHistory(const std::string& job_id, int keep_last, Duration max_age) override;

  Status Heartbeat(const NodeInfo& node, Duration ttl) override;
  Result<std::vector<NodeInfo>> ListNodes() override;

  Result<int64_t> PutJob(const std::string& job_id, const std::string& definition,
                         int64_t expected_version) override;
  Status DeleteJob(const std::string& job_id, int64_t expected_version) override;
  Result<StoredJob> GetJob(const std::string& job_id) override;
  Result<std::vector<StoredJob>> ListJobs() override;
  Result<int64_t> JobsVersion() override;
  // Watches P jobsver (etcd /v3/watch, a streamed response) from the revision JobsVersion()
  // read, so a change by any node wakes the waiter at once; `timeout` is real time. Falls back
  // to polling when the watch cannot be set up.
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout) override;

  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override;
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) override;

 private:
  class Impl;
  explicit EtcdCoordinator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gnomon

#endif  // GNOMON_ETCD_COORDINATOR_H_
