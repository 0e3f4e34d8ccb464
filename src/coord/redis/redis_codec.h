// The Redis backend's value codecs and reply parsing (internal): how instants, listing members
// and history records are written as text, and how script replies are read. Keep the formats:
// keyspaces written by earlier releases must keep working (key layout:
// gnomon/redis_coordinator.h; scripts: redis_scripts.h).
//
// Thread safety: pure functions.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_CODEC_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_CODEC_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_connection.h"

namespace gnomon::coord::redis {

// A length-prefixed field "<size>:<bytes>" appended to `out` (node and audit encodings).
void AppendField(std::string& out, std::string_view v);
// Reads one AppendField field from the front of `in` into `out`; false when malformed.
bool ReadField(std::string_view& in, std::string& out);

// Instants a fire may have: the listing member stores 9e15 - ms in 16 digits.
inline constexpr int64_t kMaxAbsMillis = 999'999'999'999'999;
inline constexpr int64_t kInvertBase = 9'000'000'000'000'000;
inline constexpr int64_t kMaxAttempt = 2147483647;

// Whether `text` is exactly a decimal int64 (stored in `out`).
bool ParseInt(std::string_view text, int64_t& out);
// A job id or node id usable inside a key.
bool IsValidKeyPart(const std::string& s);
// Instants and durations as decimal unix ms.
std::string Ms(Instant t);
std::string Ms(Duration d);
// ValidateFireKey, and InvalidArgument unless the instant is within +-kMaxAbsMillis.
Status ValidateFire(const FireKey& fire);
// A fire's id in its job's hash, "<ms>:<shard>" (its fields m:<fid> and cp:<fid>, "live").
std::string FireId(int64_t scheduled_ms, int64_t shard);
// The listing member of a record position (see redis_scripts.cc: member()), and the prefix the
// members of one fire share.
std::string MemberPrefix(int64_t scheduled_ms, const std::string& job, int shard);
std::string Member(const coord::RunPosition& p);
// A reply that is not the shape a script promised: a bug or a foreign key layout.
Status Malformed(const char* what);
// Whether `r` is an array of at least `min_size` elements; its first element's text (the word);
// its element `i` as an int64.
bool IsArray(const RedisReply& r, size_t min_size);
const std::string& Word(const RedisReply& r);
bool IntAt(const RedisReply& r, size_t i, int64_t& out);
// The parts of a listing member "<9e15 - ms> <job> <shard> <2^31-1 - attempt>", or nullopt when
// it is malformed.
struct MemberParts {
  std::string job;
  int64_t scheduled_ms = 0;
  int64_t shard = 0;
  int64_t attempt = 0;
};
std::optional<MemberParts> ParseMember(std::string_view member);
// A history record as its field r:<member> of its job's hash holds it and a report sends it:
// "<outcome>\n", then shard count, token, node, start ms, end ms, error, output, skip reason,
// params, cause and exit code ("" when unknown), each an AppendField. The scripts write the same
// (record_of in redis_script_helpers.cc). The output is stored as given (the caller truncates).
std::string EncodeRecord(const RunRecord& record);
// The record stored under listing member `member`.
Result<RunRecord> DecodeRecord(const std::string& member, std::string_view encoded);
// Records from an "OK, member, record, member, record ..." reply.
Result<std::vector<RunRecord>> DecodeRecords(const RedisReply& reply, const char* what);
// A fire marker, the field m:<ms>:<shard> of its job's hash: "<attempt> <token> <lease end ms>
// <open 1/0> <shard count> <attempt start ms> <node, AppendField><cause>" (redis_script_helpers.cc
// marker_of).
struct FireMarker {
  int64_t attempt = 0;
  int64_t token = 0;
  int64_t lease_ms = 0;
  bool open = false;
  int64_t shard_count = 0;
  int64_t started_ms = 0;
  std::string node;
  std::string cause;
};
std::optional<FireMarker> ParseMarker(std::string_view text);
// The record (EncodeRecord's encoding) of the attempt that holds the fire of marker `m`, while
// it runs (running_record in redis_script_helpers.cc).
std::string RunningRecord(const FireMarker& m);
// The LeaseLost answer of a script's "LEASE <reason>" reply to `claim`.
Status LeaseLost(const gnomon::Claim& claim, const RedisReply& reply);

// ClaimMany and ReportMany: `out` (one answer per request, in order) from script calls of at
// most `chunk` requests. `args(i)` is request i's script arguments, or why it is invalid (then
// its answer, unsent); `send` one call's items; `parse(i, element)` request i's answer from its
// element of the call's reply. A failed call is the answer of each request it carried.
template <typename Answer, typename ArgsFn, typename SendFn, typename ParseFn>
void SendInChunks(std::vector<Answer>& out, size_t chunk, const char* what, ArgsFn args,
                  SendFn send, ParseFn parse) {
  for (size_t from = 0; from < out.size(); from += chunk) {
    const size_t to = std::min(out.size(), from + chunk);
    std::vector<std::vector<std::string>> items;
    std::vector<size_t> sent;
    for (size_t i = from; i < to; ++i) {
      Result<std::vector<std::string>> a = args(i);
      if (!a.ok()) {
        out[i] = a.status();
        continue;
      }
      items.push_back(std::move(*a));
      sent.push_back(i);
    }
    if (sent.empty()) continue;
    std::vector<const std::vector<std::string>*> ptrs;
    for (const std::vector<std::string>& item : items) ptrs.push_back(&item);
    Result<RedisReply> r = send(ptrs);
    for (size_t k = 0; k < sent.size(); ++k) {
      if (!r.ok()) {
        out[sent[k]] = r.status();
      } else if (r->type != RedisReply::Type::kArray || r->elements.size() != sent.size()) {
        out[sent[k]] = Malformed(what);
      } else if (r->elements[k].is_error()) {
        out[sent[k]] = UnavailableError(r->elements[k].str);  // its part of the batch failed
      } else {
        out[sent[k]] = parse(sent[k], r->elements[k]);
      }
    }
  }
}

}  // namespace gnomon::coord::redis

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_CODEC_H_
