#include "src/coord/redis/redis_codec.h"

#include <charconv>
#include <cstdio>

#include "src/coord/coordinator_util.h"

namespace gnomon::coord::redis {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool IsValidKeyPart(const std::string& s) { return s.size() <= 64 && IsValidJobId(s); }

std::string Ms(Instant t) { return std::to_string(t.unix_millis()); }
std::string Ms(Duration d) { return std::to_string(d.count()); }

Status ValidateFire(const FireKey& fire) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateFireKey(fire));
  const int64_t ms = fire.scheduled_at.unix_millis();
  if (ms > kMaxAbsMillis || ms < -kMaxAbsMillis) {
    return InvalidArgumentError("fire " + fire.RunId() + ": scheduled instant is out of range");
  }
  return Status::Ok();
}

std::string FireId(int64_t scheduled_ms, int64_t shard) {
  return std::to_string(scheduled_ms) + ":" + std::to_string(shard);
}
std::string MemberPrefix(int64_t scheduled_ms, const std::string& job, int shard) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%016lld ", static_cast<long long>(kInvertBase - scheduled_ms));
  std::string out = buf;
  out += job;
  std::snprintf(buf, sizeof(buf), " %010d ", shard);
  out += buf;
  return out;
}
std::string Member(const coord::RunPosition& p) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%010lld", static_cast<long long>(kMaxAttempt - p.attempt));
  return MemberPrefix(p.scheduled_ms, p.job_id, p.shard) + buf;
}

Status Malformed(const char* what) {
  return InternalError(std::string("redis: unexpected reply to ") + what);
}

bool IsArray(const RedisReply& r, size_t min_size) {
  return r.type == RedisReply::Type::kArray && r.elements.size() >= min_size;
}
const std::string& Word(const RedisReply& r) { return r.elements[0].str; }

bool IntAt(const RedisReply& r, size_t i, int64_t& out) {
  return i < r.elements.size() && ParseInt(r.elements[i].str, out);
}

std::optional<MemberParts> ParseMember(std::string_view member) {
  const size_t a = member.find(' ');
  const size_t b = a == std::string_view::npos ? a : member.find(' ', a + 1);
  const size_t c = b == std::string_view::npos ? b : member.find(' ', b + 1);
  int64_t inv_ms = 0, shard = 0, inv_att = 0;
  if (c == std::string_view::npos || !ParseInt(member.substr(0, a), inv_ms) ||
      !ParseInt(member.substr(b + 1, c - b - 1), shard) ||
      !ParseInt(member.substr(c + 1), inv_att)) {
    return std::nullopt;
  }
  return MemberParts{std::string(member.substr(a + 1, b - a - 1)), kInvertBase - inv_ms, shard,
                     kMaxAttempt - inv_att};
}

std::string EncodeRecord(const RunRecord& record) {
  std::string out(ToString(record.outcome));
  out += '\n';
  AppendField(out, std::to_string(record.shard_count));
  AppendField(out, std::to_string(record.fencing_token));
  AppendField(out, record.node_id);
  AppendField(out, Ms(record.started_at));
  AppendField(out, Ms(record.finished_at));
  AppendField(out, record.error);
  AppendField(out, record.output);
  AppendField(out, record.skip_reason);
  AppendField(out, record.params);
  AppendField(out, record.cause);
  AppendField(out, record.exit_code ? std::to_string(*record.exit_code) : std::string());
  return out;
}

Result<RunRecord> DecodeRecord(const std::string& member, std::string_view encoded) {
  const std::optional<MemberParts> m = ParseMember(member);
  if (!m) return Malformed("history listing");
  const size_t nl = encoded.find('\n');
  if (nl == std::string_view::npos) return Malformed("history record");
  Result<RunOutcome> outcome = ParseRunOutcome(std::string(encoded.substr(0, nl)));
  if (!outcome.ok()) return Malformed("history record outcome");
  std::string_view in = encoded.substr(nl + 1);
  std::string sc, tok, st, fin, exit;
  RunRecord r;
  int64_t n_sc = 0, n_tok = 0, n_st = 0, n_fin = 0;
  if (!ReadField(in, sc) || !ReadField(in, tok) || !ReadField(in, r.node_id) ||
      !ReadField(in, st) || !ReadField(in, fin) || !ReadField(in, r.error) ||
      !ReadField(in, r.output) || !ReadField(in, r.skip_reason) || !ReadField(in, r.params) ||
      !ReadField(in, r.cause) || !ReadField(in, exit) || !in.empty() || !ParseInt(sc, n_sc) ||
      !ParseInt(tok, n_tok) || !ParseInt(st, n_st) || !ParseInt(fin, n_fin) || n_sc < 1 ||
      n_sc > INT32_MAX) {
    return Malformed("history record");
  }
  int64_t exit_code = 0;
  if (!exit.empty()) {
    if (!ParseInt(exit, exit_code) || exit_code < INT32_MIN || exit_code > INT32_MAX) {
      return Malformed("history record exit code");
    }
    r.exit_code = static_cast<int>(exit_code);
  }
  FireKey key;
  key.job_id = m->job;
  key.scheduled_at = Instant::FromUnixMillis(m->scheduled_ms);
  key.shard = static_cast<int>(m->shard);
  key.shard_count = static_cast<int>(n_sc);
  r.run_id = key.RunId();
  r.job_id = key.job_id;
  r.scheduled_at = key.scheduled_at;
  r.shard = key.shard;
  r.shard_count = key.shard_count;
  r.attempt = static_cast<int>(m->attempt);
  r.fencing_token = n_tok;
  r.started_at = Instant::FromUnixMillis(n_st);
  r.finished_at = Instant::FromUnixMillis(n_fin);
  r.outcome = *outcome;
  return r;
}

std::optional<FireMarker> ParseMarker(std::string_view text) {
  FireMarker m;
  int64_t* numbers[] = {&m.attempt, &m.token, &m.lease_ms, nullptr, &m.shard_count, &m.started_ms};
  for (int64_t* n : numbers) {
    const size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const std::string_view word = text.substr(0, space);
    if (n == nullptr) {
      if (word != "0" && word != "1") return std::nullopt;
      m.open = word == "1";
    } else if (!ParseInt(word, *n)) {
      return std::nullopt;
    }
    text.remove_prefix(space + 1);
  }
  if (!ReadField(text, m.node)) return std::nullopt;
  m.cause = std::string(text);
  return m;
}

std::string RunningRecord(const FireMarker& m) {
  RunRecord r;
  r.outcome = RunOutcome::kRunning;
  r.shard_count = static_cast<int>(m.shard_count);
  r.fencing_token = m.token;
  r.node_id = m.node;
  r.started_at = Instant::FromUnixMillis(m.started_ms);
  r.finished_at = Instant::FromUnixMillis(0);
  r.cause = m.cause;
  return EncodeRecord(r);
}

Result<std::vector<RunRecord>> DecodeRecords(const RedisReply& reply, const char* what) {
  if (!IsArray(reply, 1) || Word(reply) != "OK" || reply.elements.size() % 2 != 1) {
    return Malformed(what);
  }
  std::vector<RunRecord> out;
  for (size_t i = 1; i + 1 < reply.elements.size(); i += 2) {
    if (reply.elements[i + 1].type != RedisReply::Type::kString) return Malformed(what);
    Result<RunRecord> r = DecodeRecord(reply.elements[i].str, reply.elements[i + 1].str);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Status LeaseLost(const gnomon::Claim& claim, const RedisReply& reply) {
  return LeaseLostError(claim.fire.RunId() + " (token " + std::to_string(claim.fencing_token) +
                        "): " + (reply.elements.size() > 1 ? reply.elements[1].str : "fenced"));
}

void AppendField(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}

bool ReadField(std::string_view& in, std::string& out) {
  size_t colon = in.find(':');
  int64_t len = 0;
  if (colon == std::string_view::npos || !ParseInt(in.substr(0, colon), len) || len < 0 ||
      static_cast<size_t>(len) > in.size() - colon - 1) {
    return false;
  }
  out = std::string(in.substr(colon + 1, len));
  in.remove_prefix(colon + 1 + len);
  return true;
}

}  // namespace gnomon::coord::redis
