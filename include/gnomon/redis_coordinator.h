// RedisCoordinator: the Coordinator (gnomon/coordinator.h) on a real Redis server (6.2+; tested
// against 7.0), for a fleet of hosts (docs/configuration.md "Backend URLs":
// `redis://[user:pass@]host:port[/db]`, over TLS `rediss://`).
//
// Atomicity. Every operation that reads and then writes is ONE Lua script, loaded once with
// SCRIPT LOAD and run with EVALSHA (a NOSCRIPT reply, e.g. after a server restart or SCRIPT
// FLUSH, reloads the script and retries once). Redis runs a script alone, so a claim (fire
// marker created only if absent, early-fire guard, paused check, overlap check, fencing token),
// a renew (owner and token compared, then extended), a report (token compared, history record
// written, lease released), ResolveLost (compare-and-set on the token) and a checkpoint save
// (fenced) each happen whole or not at all, whatever the number of nodes. Claims and reports
// made at once by several threads are sent together, one script call per batch (claim_one and
// report_one per item, each answered on its own; src/coord/redis/redis_batcher.h).
//
// Key layout ("key groups"). Every key starts with `<prefix>:<ns>` (RedisOptions::prefix / ns),
// written B below. Each job belongs to one of 1,024 key groups, G = the low 10 bits of the
// 64-bit FNV-1a hash of its id (coord::redis::KeyGroup; the scripts' group_of computes the same);
// the group is the hash tag of every key of the job, so a job's keys share one Redis Cluster
// slot, and so do a group's jobs. The hash and the 1,024 are part of the layout: changing either
// re-keys every job. With J = B:{g<G>}:job:<job>:
//   J:state                       hash: paused, reason, fails, last (ms), token (counter),
//                                 trim_at (see Boundedness)
//   J:fire:<ms>:<shard>           hash: the fire marker: att, tok, node, lease (ms), open, sc,
//                                 cp (checkpoint). No TTL while open; once closed or skipped,
//                                 a TTL of fire_retention from the later of then and <ms>.
//   J:live                        zset: open fires of the job ("<ms>:<shard>"), score = lease end
//   J:runs                        zset (all scores 0, ordered by member = listing order):
//                                 "<9e15-ms, 16 digits> <job> <shard, 10> <2^31-1-attempt, 10>"
//   J:run:<ms>:<shard>:<n>        hash: one history record (attempt n); written when the
//                                 attempt starts and updated in place by its reports (a running
//                                 record has no err, output, skip nor exit yet: read as empty)
// Shared keys, under the tag {~shared} (not a job id, so no job's tag can equal it):
//   B:{~shared}:leases    zset "<job> <ms>:<shard>" -> lease end (ms): ListExpired reads it
//   B:{~shared}:runs      zset, the same members as every J:runs: the all-jobs listing
//   B:{~shared}:jobs      hash job -> "<version>\n<definition json>"
//   B:{~shared}:meta      hash: jobs_version, audit_seq (counters)
//   B:{~shared}:nodes     hash node -> "<last heartbeat ms>\n<encoded NodeInfo>"
//   B:{~shared}:nodes:exp zset node -> heartbeat expiry (ms)
//   B:{~shared}:audit     zset seq -> "<seq>\n<at ms>\n<who, action, target, status, before,
//                         after>"
//   B:{~shared}:audit_failed  the same for failed calls (status >= 400), capped apart
//                         (newest `keep` kept); its seq is meta's audit_seq (same scheme as tokens)
//   B:{~shared}:events    pub/sub channel: the new jobs version after each definition/pause change
//   B:{~shared}:layout    "groups": the layout the keyspace holds. Open writes it into an empty
//                         keyspace and refuses one of the earlier per-job layout ("B:{job}:…",
//                         global B:leases, B:runs, …) until MigrateKeyGroups has moved it.
//   B:queue:<tag>         queue streams (gnomon/redis_queue.h), each its own slot
// A script's writes to the lease index and the listing wait until it ends (also when it fails
// halfway) and go as one ZADD / ZREM per index, the last write of a member winning, so a claim or
// report batch pays per index one command, not one per fire; the listing is then trimmed once per
// script.
// Under a Redis Cluster (RedisOptions::cluster_seeds) every script touches one slot, but a
// batch, which touches the slots of one primary: a job's scripts its group's, whose own lease
// index B:{g<G>}:leases and B:{g<G>}:runs_new (new listing members, copied into
// B:{~shared}:runs by the node right after, and swept by ListExpired when a copy was missed)
// stand in for the shared ones; batches go one call per primary, and first read each of their
// groups' B:{g<G>}:probe (never written) so that a group not served there fails the call before
// anything is written; a pause-state change bumps the jobs version in a second call; the
// listing keeps max_records_total members without deleting the records it drops (each job's
// cap still holds). docs/redis-cluster.md has the design and what is not done yet.
//
// Boundedness. History is capped per job (max_records_per_job) and in total (max_records_total),
// with a slack of cap / 16 (1 to 64): once a new record makes an index exceed its cap by the
// slack, the oldest finished records beyond the cap are dropped in one batch (running ones are
// kept), so an index holds at most cap + slack - 1 records besides running ones (10,063 per job
// and 100,063 in total by default) and the trimming work is shared by `slack` writes. A batch
// looks at most at 4 slacks + 64 records (the global index, trimmed once per script: at most
// max(4 slacks, the script's additions), and a claim script adds at most 128). Claims of old
// instants (a misfire catch-up) list at the old end: in the global index a running record there
// leaves the global listing only (it stays listed under its job); in a job's index running records
// are kept, and when more than 64 hold the trim back, the job's trim_at (now + 1 s) defers the next
// try by a second, so no write scans the whole excess. A job's index is then bounded by its cap,
// its running fires and a second of its writes. PruneHistory applies the per-job retention
// (keep_last fires, max_age). Fire markers are kept fire_retention after the later of their
// close and their instant, so a pruned fire still cannot be claimed twice; a claim (by schedule or
// a backfill) of a fire fire_retention or more before the server's clock is refused
// (ClaimOutcome::kTooOld), so none can come once a marker is gone. The markers' memory is bounded
// by fire_retention times the fires per second (246 bytes each, docs/operations.md).
//
// Fencing tokens. token = max(last token of the job + 1, server TIME in microseconds, read once
// per script in ms and multiplied by 1000, see src/coord/redis/redis_script_helpers.cc
// counter_after). The counter makes tokens strictly increase while the server keeps its writes; the
// server-clock floor makes them keep increasing after a restart that lost the last writes (no AOF,
// or an fsync window): any token issued before the restart is at most the server's microsecond
// clock at that moment (unless a job claimed more than once per microsecond, which one script per
// claim cannot do), so the first token after it is larger. REQUIRES: the server's clock does
// not step backwards across a restart by more than the writes lost. Job-definition versions use
// the same scheme, so a re-created job never reuses a version. Tokens are about 1.8e15 today.
//
// Time. In production the scripts read the server's clock (redis.call('TIME'); Redis 7
// replicates scripts by their effects, so that is allowed): lease expiry, the early-fire guard,
// heartbeats and max_age use the backend clock, as the Coordinator contract says. Test seam:
// RedisOptions::clock_override makes the coordinator pass its "now" to every script instead
// (the conformance suite's FakeClock). Tokens always use the server's TIME.
//
// Connections. A pool of connections (RedisOptions::connections), each guarded by a mutex. A
// connection or I/O error returns Unavailable and drops the connection; the next call
// reconnects, and after a failed reconnect the next attempt waits a capped exponential backoff
// with jitter (reconnect_backoff_min .. reconnect_backoff_max), returning Unavailable at once
// meanwhile, so no call blocks longer than connect_timeout / io_timeout. The password never
// appears in a Status message or in a log.
//
// TLS (RedisOptions::tls, `rediss://`). Every connection, the subscriber's and the sentinels'
// too, speaks TLS through OpenSSL: the server's certificate chain is checked against tls.ca_file
// (else the system's CAs) and its name (DNS or IP subjectAltName) against tls.server_name, else
// the host connected to (with Sentinel: the primary's address as Sentinel reports it, and each
// sentinel's own host). A failed handshake is Unavailable naming the server and OpenSSL's reason
// ("redis 10.0.0.5:6380: TLS: certificate verify failed (unable to get local issuer
// certificate)"); Open fails on it, later calls retry with the backoff like any other outage.
//
// Persistence. Open() reads CONFIG GET appendonly and maxmemory-policy: without `appendonly yes`
// the server loses acknowledged claims on a restart (docs/reliability.md F4), and under any
// policy but `noeviction` a full server may evict fire markers (they carry a TTL once closed, so
// the volatile-* policies pick them too) and a fire may then be claimed again. Open refuses
// either with FailedPrecondition unless allow_unsafe is set; then unsafe_persistence() is true
// (the daemon logs it loudly and exports it as a metric).
//
// Thread safety: safe to call from many threads at once (calls are serialised on the one
// connection). Do not keep a RedisCoordinator across fork().
#ifndef GNOMON_REDIS_COORDINATOR_H_
#define GNOMON_REDIS_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/coordinator.h"
#include "gnomon/time.h"
#include "gnomon/tls.h"

namespace gnomon {
namespace coord {
class RedisAudit;
class RedisClaims;
class RedisDefinitions;
class RedisFires;
class RedisNodes;
class RedisRunHistory;
class RedisStore;
struct RedisConnectionConfig;
}  // namespace coord

// The bounds of RedisOptions::fire_retention.
inline constexpr Duration kMinFireRetention = std::chrono::hours(1);
inline constexpr Duration kMaxFireRetention = std::chrono::hours(24 * 366);

struct RedisOptions {
  // Server host name or address. Default "127.0.0.1".
  std::string host = "127.0.0.1";
  // Server TCP port, 1-65535. Default 6379.
  int port = 6379;
  // ACL user for AUTH; empty = password-only AUTH (or none). Default empty.
  std::string user;
  // Password for AUTH; empty = no AUTH. Never logged nor put in an error message. Default empty.
  std::string password;
  // Logical database (SELECT), >= 0. Default 0.
  int db = 0;
  // First part of every key; [A-Za-z0-9_.-]{1,64}. Default "gnomon".
  std::string prefix = "gnomon";
  // Namespace after the prefix (several clusters on one server); [A-Za-z0-9_.-]{1,64}.
  // Default "default".
  std::string ns = "default";
  // TCP connect timeout. Keep it below the lease ttl. Default 2 s. Must be > 0.
  Duration connect_timeout = std::chrono::seconds(2);
  // Timeout for one command's reply (read/write). Keep it below the lease ttl (a renew must fail
  // before the lease ends). Default 2 s. Must be > 0.
  Duration io_timeout = std::chrono::seconds(2);
  // First wait after a failed reconnect; doubles per failure (full jitter). Default 1 s.
  Duration reconnect_backoff_min = std::chrono::seconds(1);
  // Cap of the reconnect wait. Default 32 s. Must be >= reconnect_backoff_min.
  Duration reconnect_backoff_max = std::chrono::seconds(32);
  // How long a closed or skipped fire's marker is kept (it refuses a second claim of the fire),
  // counted from the later of its close and the fire's instant (URL `?fire_retention=2h`). A fire
  // older than this (backend clock) is not claimed, by schedule or a backfill
  // (ClaimOutcome::kTooOld): its marker may be gone. So it bounds how far back a catch-up reaches:
  // keep it above every job's catchup_window. Markers take memory for it: 246 bytes per fire
  // (docs/operations.md). kMinFireRetention (1 h) to kMaxFireRetention (366 days). Default 7 days.
  Duration fire_retention = std::chrono::hours(24 * 7);
  // History records kept per job (oldest finished ones are trimmed, in batches: up to
  // cap / 16, at most 63, more are held meanwhile; see Boundedness). Default 10000. Must be >= 1.
  int max_records_per_job = 10000;
  // History records kept across all jobs (trimmed the same way). Default 100000. Must be >= 1.
  int max_records_total = 100000;
  // Open() succeeds on a server without `appendonly yes` or with eviction on
  // (unsafe_persistence() is then true).
  // Default false: refuse.
  bool allow_unsafe = false;
  // Connections to the server, 1-64: a call uses an idle one, so concurrent calls (a node's
  // workers claiming and reporting at once) do not queue behind each other's round trips.
  // Default 8.
  int connections = 8;
  // Redis Sentinel: when non-empty, host/port are ignored and the primary of `sentinel_master` is
  // asked of these sentinels (in order) at every (re)connect, so a failover is followed. The
  // connection is only used when the server answers ROLE as master. Default empty.
  std::vector<std::pair<std::string, int>> sentinels;
  // The master name the sentinels monitor (required with sentinels).
  std::string sentinel_master;
  // Redis Cluster (URL `redis+cluster://h1:p1,h2:p2`): when non-empty, host/port are ignored;
  // these nodes are asked for the slot map (CLUSTER SHARDS) and each call goes to the primary
  // of its slot (docs/redis-cluster.md). Not with sentinels or db. Queue mode and
  // `gnomon migrate redis-groups` need one primary. Default empty.
  std::vector<std::pair<std::string, int>> cluster_seeds;
  // TLS for every connection (server, sentinels). Default: off.
  TlsOptions tls;
  // Replicas that must acknowledge a claim batch (WAIT) before the claims are answered, 0-16
  // (URL `?wait_replicas=N`). A batch that fewer replicas acknowledged within wait_timeout
  // answers Unavailable for each claim it granted, so that none of those fires starts, and takes
  // them back at once, so the fires' retries claim them anew; its other answers (claimed
  // already, overlap, paused, early) stand (see docs/operations.md
  // "Claims across a failover"). Under a Cluster, per key group: each group's claim call waits
  // for the replicas of its primary. Default 0: no WAIT.
  int wait_replicas = 0;
  // How long a claim batch's WAIT waits for its replicas; with wait_replicas, > 0 and below
  // io_timeout. Default 500 ms.
  Duration wait_timeout = std::chrono::milliseconds(500);
  // TEST SEAM: when set, "now" for every operation is this clock's Now(), passed to the scripts,
  // instead of the server's TIME. Not owned; must outlive the coordinator. Default null
  // (production: the server's clock).
  Clock* clock_override = nullptr;
};

// What RedisCoordinator::MigrateKeyGroups did.
struct KeyGroupMigration {
  bool already_done = false;  // the keyspace held key groups already; nothing was changed
  int64_t job_keys = 0;       // per-job keys moved into their group
  int64_t shared_keys = 0;    // global keys moved under {~shared}
};

// Parses `redis://[user[:password]@]host[:port][/db]` and
// `rediss://[user[:password]@]host[:port][/db][?tls_param=value&...]` (user and password may be
// percent-encoded; `redis://:password@host` = password only) into `base` with those fields
// replaced, `tls` included (off for redis://; for rediss:// on, with the query's parameters, see
// ParseTlsQuery in gnomon/tls.h) and `wait_replicas` (the query's `wait_replicas=N`, either
// scheme; 0 without it). The query starts at the first '?' after the user-info, which ends
// at the last '@' (a password may hold '@' and '?'; write '@' in a query value as %40).
// InvalidArgument (with the password redacted) when malformed.
Result<RedisOptions> ParseRedisUrl(std::string_view url, RedisOptions base = {});

// The query of a Redis URL (the part after '?', parameters joined by '&'): `wait_replicas=N`
// (0-16, 0 when absent), `fire_retention=<duration>` (RedisOptions::fire_retention, "2h",
// kMinFireRetention to kMaxFireRetention; the default when absent) and the tls_* parameters
// (ParseTlsQuery; `tls_scheme`: the URL is rediss:// or rediss+sentinel://, and `tls` is then
// enabled). InvalidArgument naming the parameter when one is unknown, malformed, out of range or
// given twice.
struct RedisQuery {
  TlsOptions tls;
  int wait_replicas = 0;
  std::optional<Duration> fire_retention;  // `fire_retention=<duration>`, 1h to 366d
};
Result<RedisQuery> ParseRedisQuery(std::string_view query, bool tls_scheme);

class RedisQueue;

class RedisCoordinator final : public Coordinator {
 public:
  // Connects, authenticates, selects the database, checks persistence (see the file comment)
  // and loads the scripts. Errors: InvalidArgument for bad options (a TLS file that cannot be
  // read); Unavailable when the server cannot be reached, refuses the credentials or fails the
  // TLS handshake (certificate chain or name; the message names the server and the reason);
  // FailedPrecondition when persistence is off, eviction is on (or either cannot be read) and
  // allow_unsafe is false, or
  // when the keyspace holds the per-job layout of an earlier release (the message names
  // `gnomon migrate redis-groups`) or a layout this version does not know.
  static Result<std::unique_ptr<RedisCoordinator>> Open(const RedisOptions& options);

  // Moves a keyspace written by an earlier release (one slot per job) to key groups, in place:
  // every per-job key is RENAMEd into its group (TTLs kept), the global keys move under
  // {~shared}, and the layout marker is written last. Refuses
  // (FailedPrecondition, naming them) while a node's heartbeat in the old keyspace has not
  // expired: a node of the earlier release still running would claim again the fires whose
  // markers moved. Can be repeated: a move stopped halfway is finished by the next run, and a
  // keyspace already on key groups is left as it is (already_done). Errors as Open's otherwise.
  static Result<KeyGroupMigration> MigrateKeyGroups(const RedisOptions& options);
  ~RedisCoordinator() override;
  RedisCoordinator(const RedisCoordinator&) = delete;
  RedisCoordinator& operator=(const RedisCoordinator&) = delete;

  // True when Open found the server without `appendonly yes` or with a `maxmemory-policy` other
  // than `noeviction`, and allow_unsafe let it through.
  bool unsafe_persistence() const { return unsafe_persistence_; }

  // The backend clock: the server's TIME (or clock_override).
  Result<Instant> Now() override;

  Result<ClaimOutcome> Claim(const ClaimRequest& req) override;
  Result<std::vector<JobState>> GetJobStates(const std::vector<std::string>& job_ids) override;
  std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs) override;
  std::string ClaimRoute(const std::string& job_id) const override;
  bool ClaimsMayBeWithdrawn() const override;  // with wait_replicas
  Status Renew(gnomon::Claim& claim, Duration ttl) override;
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl) override;
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final) override;
  std::vector<Status> ReportMany(const std::vector<ReportRequest>& reqs) override;
  Result<std::vector<ExpiredFire>> ListExpired(int limit) override;
  Result<std::optional<gnomon::Claim>> ResolveLost(const ExpiredFire& fire,
                                                   const std::string& node_id, LostPolicy policy,
                                                   Duration ttl) override;
  Status RecordSkipped(const FireKey& fire, const std::string& node_id,
                       const std::string& reason) override;
  Status CancelFire(const FireKey& fire, const std::string& reason) override;
  Result<gnomon::Claim> RerunFire(const FireKey& fire, const std::string& node_id, Duration ttl,
                                  const std::string& cause) override;

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
  // Wakes on the PUBLISH every definition/pause change makes (channel B:events), on a second,
  // subscriber-only connection; polls while that connection is down.
  Result<int64_t> WaitJobsChange(int64_t since, Duration timeout) override;

  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override;
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep) override;
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq) override;

 private:
  friend class RedisQueue;  // connects with the same options
  // The connections' settings (with the TLS context loaded: InvalidArgument when a TLS file
  // cannot be read).
  static Result<coord::RedisConnectionConfig> ConnectionConfigOf(const RedisOptions& options);
  explicit RedisCoordinator(std::unique_ptr<coord::RedisStore> store);

  // The options, key base, connections and server clock every part shares
  // (src/coord/redis/redis_store.h); declared first, so destroyed last.
  const std::unique_ptr<coord::RedisStore> store_;
  const bool unsafe_persistence_;
  // One part per role, each over store_ (src/coord/redis/redis_<role>.h).
  const std::unique_ptr<coord::RedisClaims> claims_;
  const std::unique_ptr<coord::RedisFires> fires_;
  const std::unique_ptr<coord::RedisRunHistory> history_;
  const std::unique_ptr<coord::RedisDefinitions> definitions_;
  const std::unique_ptr<coord::RedisAudit> audit_;
  const std::unique_ptr<coord::RedisNodes> nodes_;
};

}  // namespace gnomon

#endif  // GNOMON_REDIS_COORDINATOR_H_
