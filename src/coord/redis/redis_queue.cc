#include "gnomon/redis_queue.h"

#include <algorithm>

#include "src/coord/redis/redis_connection.h"

namespace gnomon {
namespace {

using coord::RedisReply;

constexpr const char* kGroup = "workers";

// XACK + XDEL, whole: KEYS[1] = stream, ARGV[1] = group, ARGV[2] = id.
constexpr const char* kDoneScript = R"lua(
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])
)lua";

bool ValidTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 64) return false;
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

Status Malformed(const std::string& what) {
  return InternalError("redis queue: unexpected reply to " + what);
}

// Appends the entries of an XREADGROUP/XAUTOCLAIM entry list ([[id, [field, value, ...]], ...]).
bool AppendEntries(const RedisReply& list, const std::string& tag, bool reclaimed,
                   std::vector<QueueEntry>& out) {
  if (list.type != RedisReply::Type::kArray) return false;
  for (const RedisReply& e : list.elements) {
    // A deleted entry still pending shows as [id, nil]: skip it (it is acknowledged below).
    if (e.type != RedisReply::Type::kArray || e.elements.size() != 2) return false;
    QueueEntry q;
    q.tag = tag;
    q.id = e.elements[0].str;
    q.reclaimed = reclaimed;
    const RedisReply& fields = e.elements[1];
    if (fields.type != RedisReply::Type::kArray) continue;
    for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
      if (fields.elements[i].str == "p") q.payload = fields.elements[i + 1].str;
    }
    out.push_back(std::move(q));
  }
  return true;
}

}  // namespace

RedisQueue::RedisQueue(std::string base, std::unique_ptr<coord::RedisConnection> conn)
    : base_(std::move(base)), conn_(std::move(conn)) {
  done_script_ = conn_->AddScript(kDoneScript);
}

RedisQueue::~RedisQueue() = default;

Result<std::unique_ptr<RedisQueue>> RedisQueue::Open(const RedisOptions& options) {
  if (!options.cluster_seeds.empty()) {
    return InvalidArgumentError("redis: queue mode needs one primary (not a Cluster) for now");
  }
  Result<coord::RedisConnectionConfig> config = RedisCoordinator::ConnectionConfigOf(options);
  if (!config.ok()) return config.status();
  Result<std::unique_ptr<coord::RedisConnection>> conn =
      coord::RedisConnection::Connect(std::move(config).value());
  if (!conn.ok()) return conn.status();
  std::unique_ptr<RedisQueue> q(
      new RedisQueue(options.prefix + ":" + options.ns, std::move(*conn)));
  GNOMON_RETURN_IF_ERROR(q->conn_->LoadScripts());
  return q;
}

std::string RedisQueue::Stream(const std::string& tag) const { return base_ + ":queue:" + tag; }

Status RedisQueue::EnsureGroup(const std::string& tag) {
  // From id 0: entries published before the first worker came are delivered too.
  Result<RedisReply> r = conn_->Command({"XGROUP", "CREATE", Stream(tag), kGroup, "0", "MKSTREAM"});
  if (!r.ok()) return r.status();
  if (r->is_error() && r->str.rfind("BUSYGROUP", 0) != 0) {
    return InternalError("redis queue: XGROUP CREATE: " + r->str);
  }
  return Status::Ok();
}

Status RedisQueue::Publish(const std::string& tag, const std::string& payload) {
  if (!ValidTag(tag)) return InvalidArgumentError("queue tag \"" + tag + "\" is not valid");
  Result<RedisReply> r = conn_->Command({"XADD", Stream(tag), "*", "p", payload});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kString) return Malformed("XADD");
  return Status::Ok();
}

Result<std::vector<QueueEntry>> RedisQueue::Take(const std::vector<std::string>& tags,
                                                 const std::string& consumer, int count,
                                                 Duration block, Duration reclaim_after) {
  if (tags.empty()) return InvalidArgumentError("take: no tags");
  if (count < 1) return InvalidArgumentError("take: count < 1");
  if (consumer.empty()) return InvalidArgumentError("take: consumer is empty");
  for (const std::string& tag : tags) {
    if (!ValidTag(tag)) return InvalidArgumentError("queue tag \"" + tag + "\" is not valid");
    GNOMON_RETURN_IF_ERROR(EnsureGroup(tag));
  }
  std::vector<QueueEntry> out;
  // Entries whose worker stopped touching them.
  for (const std::string& tag : tags) {
    if (static_cast<int>(out.size()) >= count) break;
    Result<RedisReply> r = conn_->Command({"XAUTOCLAIM", Stream(tag), kGroup, consumer,
                                           std::to_string(reclaim_after.count()), "0-0", "COUNT",
                                           std::to_string(count - static_cast<int>(out.size()))});
    if (!r.ok()) return r.status();
    if (r->is_error()) return InternalError("redis queue: XAUTOCLAIM: " + r->str);
    if (r->type != RedisReply::Type::kArray || r->elements.size() < 2 ||
        !AppendEntries(r->elements[1], tag, true, out)) {
      return Malformed("XAUTOCLAIM");
    }
  }
  if (!out.empty()) return out;
  std::vector<std::string> argv = {
      "XREADGROUP", "GROUP",
      kGroup,       consumer,
      "COUNT",      std::to_string(count),
      "BLOCK",      std::to_string(std::max<int64_t>(1, block.count())),
      "STREAMS"};
  for (const std::string& tag : tags) argv.push_back(Stream(tag));
  for (size_t i = 0; i < tags.size(); ++i) argv.push_back(">");
  Result<RedisReply> r = conn_->Command(argv);
  if (!r.ok()) return r.status();
  if (r->is_error()) return InternalError("redis queue: XREADGROUP: " + r->str);
  if (r->type == RedisReply::Type::kNil) return out;  // timed out
  if (r->type != RedisReply::Type::kArray) return Malformed("XREADGROUP");
  for (const RedisReply& stream : r->elements) {
    if (stream.type != RedisReply::Type::kArray || stream.elements.size() != 2) {
      return Malformed("XREADGROUP");
    }
    const std::string& key = stream.elements[0].str;
    const std::string tag = key.substr(std::min(key.size(), base_.size() + 7));
    if (!AppendEntries(stream.elements[1], tag, false, out)) return Malformed("XREADGROUP");
  }
  return out;
}

Status RedisQueue::Touch(const std::vector<QueueEntry>& entries, const std::string& consumer) {
  for (const QueueEntry& e : entries) {
    Result<RedisReply> r =
        conn_->Command({"XCLAIM", Stream(e.tag), kGroup, consumer, "0", e.id, "JUSTID"});
    if (!r.ok()) return r.status();
    if (r->is_error()) return InternalError("redis queue: XCLAIM: " + r->str);
  }
  return Status::Ok();
}

Status RedisQueue::Done(const QueueEntry& entry) {
  Result<RedisReply> r = conn_->Eval(done_script_, {Stream(entry.tag)}, {kGroup, entry.id});
  if (!r.ok()) return r.status();
  if (r->is_error()) return InternalError("redis queue: done: " + r->str);
  return Status::Ok();
}

Result<int64_t> RedisQueue::Length(const std::string& tag) {
  Result<RedisReply> r = conn_->Command({"XLEN", Stream(tag)});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kInteger) return Malformed("XLEN");
  return r->integer;
}

Result<int64_t> RedisQueue::Pending(const std::string& tag) {
  Result<RedisReply> r = conn_->Command({"XPENDING", Stream(tag), kGroup});
  if (!r.ok()) return r.status();
  if (r->is_error()) {
    if (r->str.rfind("NOGROUP", 0) == 0) return int64_t{0};
    return InternalError("redis queue: XPENDING: " + r->str);
  }
  if (r->type != RedisReply::Type::kArray || r->elements.empty() ||
      r->elements[0].type != RedisReply::Type::kInteger) {
    return Malformed("XPENDING");
  }
  return r->elements[0].integer;
}

}  // namespace gnomon
