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
// Key layout ("ledger", docs/redis-ledger-layout.md). Every key starts with `<prefix>:<ns>`
// (RedisOptions::prefix / ns), written B below. Each job belongs to one of 1,024 key groups, G =
// the low 10 bits of the 64-bit FNV-1a hash of its id (coord::redis::KeyGroup; the scripts'
// group_of computes the same); the group is the hash tag of every key of the job, so a job's keys
// share one Redis Cluster slot, and so do a group's jobs. The hash and the 1,024 are part of the
// layout: changing either re-keys every job. A fire creates no key of its own. With
// J = B:{g<G>}:job:<job>:
//   J                             hash: the job's state: paused, reason, fails, last (ms), token
//                                 (counter), trim_at; hn (its listing's entries), pr (its cutoff,
//                                 ms: a claim before it is too old); live, its open fires
//                                 ("<ms>:<shard> " each); m:<ms>:<shard>, a fire marker:
//                                 "<attempt> <token> <lease end> <open 1/0> <shard count>
//                                 <attempt start> <node as <length>:<bytes>><cause>";
//                                 cp:<ms>:<shard>, a fire's checkpoint; r:<member>, the history
//                                 record of a listing member, as the client encodes it
//                                 (src/coord/redis/redis_codec.h EncodeRecord). A running attempt
//                                 has no record field (or its live output's): readers list it from
//                                 its fire's open marker.
//   J:runs                        zset (all scores 0, ordered by member = listing order):
//                                 "<9e15-ms, 16 digits> <job> <shard, 10> <2^31-1-attempt, 10>"
// Shared keys, under the tag {~shared} (not a job id, so no job's tag can equal it):
//   B:{~shared}:leases    zset "<job> <ms>:<shard>" -> lease end (ms): ListExpired reads it;
//                         and one keeper member at +inf that holds it in the skiplist encoding
//                         (docs/redis-ledger-layout.md)
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
//   B:{~shared}:layout    "ledger": the layout the keyspace holds. Open writes it into an empty
//                         keyspace and refuses one of an earlier layout (key groups: "groups"; one
//                         slot per job: "B:{job}:…", global B:leases, B:runs, …) until
//                         MigrateKeyGroups has moved it.
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
// Boundedness. A job's listing (J:runs) is capped at max_records_per_job and the all-jobs
// listing at max_records_total, each with a slack of cap / 16 (1 to 64): once a new entry makes a
// listing exceed its cap by the slack, its oldest entries beyond the cap go in one batch, so a
// listing holds at most cap + slack - 1 entries besides open fires' (10,063 per job and 100,063
// in total by default) and the trimming work is shared by `slack` writes. A job's trim drops
// entries of closed fires only, with their records and fire markers, and raises the job's cutoff
// pr past their instants: a claim of a fire before it (by schedule or a backfill) is refused
// (ClaimOutcome::kTooOld), as the marker that would refuse it may be gone. The all-jobs trim
// drops the members and their records only (a running attempt's live output too: its next save
// writes it again); their jobs' entries and markers stay, bounded by each job's cap. A job's
// listing counts its entries (hn), so a claim pays nothing for its trim until it runs; open fires
// among the oldest (a misfire catch-up lists at the old end) are looked past, up to 64, and when
// more hold the trim back, the job's trim_at (now + 1 s) defers the next try by a second, so no
// claim scans the whole excess. PruneHistory (PruneHistoryMany: up to 64 jobs a script call)
// applies the per-job retention: the records of the fires beyond the newest keep_last go (their
// entries and markers stay: such a fire is still refused as claimed), and fires older than
// max_age go whole, markers included, the cutoff then now - max_age, as on the other backends. A
// claim of a fire fire_retention or more before the server's clock is refused too. So a job's
// markers, entries and records are bounded by its cap, whatever its rate.
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
// policy but `noeviction` a full server may evict a job's hash, its fire markers with it, and a
// fire may then be claimed again. Open refuses
// either with FailedPrecondition unless allow_unsafe is set; then unsafe_persistence() is true
// (the daemon logs it loudly and exports it as a metric).
//
// Thread safety: safe to call from many threads at once (calls are serialised on the one
// connection). Do not keep a RedisCoordinator across fork().
#ifndef GNOMON_REDIS_COORDINATOR_H_
#define GNOMON_REDIS_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
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
  // How far back a fire may be claimed (URL `?fire_retention=2h`): a fire older than this
  // (backend clock) is not claimed, by schedule or a backfill (ClaimOutcome::kTooOld). It bounds
  // how far back a catch-up reaches (so does the job's cutoff, see Boundedness): keep it above
  // every job's catchup_window. kMinFireRetention (1 h) to kMaxFireRetention (366 days). Default
  // 7 days.
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
  bool already_done = false;  // the keyspace held this version's layout already; nothing changed
  int64_t job_keys = 0;       // per-job keys moved into their group
  int64_t shared_keys = 0;    // global keys moved under {~shared}
  int64_t ledger_keys = 0;    // state, live, marker and record keys moved into their job's hash
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
  // when the keyspace holds the layout of an earlier release (the message names
  // `gnomon migrate redis-groups`) or a layout this version does not know.
  static Result<std::unique_ptr<RedisCoordinator>> Open(const RedisOptions& options);

  // Moves a keyspace written by an earlier release to this version's layout, in place. One slot
  // per job (one primary only): every per-job key is RENAMEd into its key group and the global
  // keys move under {~shared}. Key groups (one primary or a Cluster): each job's state, open
  // fires, fire markers, checkpoints and records move into its hash J, one key per script (a
  // marker alone, whose records were trimmed, gets a listing entry so that the job's cap drops it
  // in turn). The layout marker is written last. Refuses (FailedPrecondition, naming them) while
  // a node's heartbeat in the old keyspace has not expired: a node of the earlier release still
  // running would claim again the fires whose markers moved. Can be repeated: a move stopped
  // halfway is finished by the next run, and a keyspace already on this layout is left as it is
  // (already_done). Errors as Open's otherwise.
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
  bool ClaimsMayBeWithdrawn() const override;                      // with wait_replicas
  int AddRoutesListener(std::function<void()> listener) override;  // Sentinel, Cluster
  void RemoveRoutesListener(int handle) override;
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
  std::vector<Status> PruneHistoryMany(const std::vector<PruneRequest>& reqs) override;

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
