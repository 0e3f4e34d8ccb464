#include "src/coord/redis/redis_claims.h"

#include <cstdio>

#include "src/coord/coordinator_util.h"
#include "src/coord/redis/redis_codec.h"

namespace gnomon::coord {
namespace {

namespace scripts = redis_scripts;
using namespace redis;  // NOLINT(google-build-using-namespace): the backend's codecs

// A granted claim's answer from claim_one: "<now> <token> <lease>", or, when it replaced other
// fires, the array CLAIMED now token lease replaced...
struct Granted {
  int64_t now = 0;
  int64_t token = 0;
  int64_t lease = 0;
};
std::optional<Granted> GrantedOf(const RedisReply& r) {
  Granted g;
  if (r.type == RedisReply::Type::kString) {
    const size_t a = r.str.find(' ');
    const size_t b = a == std::string::npos ? a : r.str.find(' ', a + 1);
    const std::string_view s = r.str;
    if (b == std::string::npos || !ParseInt(s.substr(0, a), g.now) ||
        !ParseInt(s.substr(a + 1, b - a - 1), g.token) || !ParseInt(s.substr(b + 1), g.lease)) {
      return std::nullopt;
    }
    return g;
  }
  if (!IsArray(r, 4) || Word(r) != "CLAIMED" || !IntAt(r, 1, g.now) || !IntAt(r, 2, g.token) ||
      !IntAt(r, 3, g.lease)) {
    return std::nullopt;
  }
  return g;
}

// One claim_one reply (redis_scripts.cc) as the outcome of `req`.
Result<ClaimOutcome> ParseClaimReply(const ClaimRequest& req, const RedisReply& r) {
  using R = ClaimOutcome::Result;
  if (std::optional<Granted> g = GrantedOf(r)) {
    ClaimOutcome out = coord::MakeOutcome(R::kClaimed, Instant::FromUnixMillis(g->now));
    out.claim = gnomon::Claim{req.fire, 1, g->token, req.node_id, Instant::FromUnixMillis(g->lease),
                              req.cause};
    for (size_t i = 4; r.type == RedisReply::Type::kArray && i < r.elements.size(); ++i) {
      // "<ms>:<shard>:<shard_count>"
      const std::string& s = r.elements[i].str;
      size_t c1 = s.find(':', 1);
      size_t c2 = c1 == std::string::npos ? c1 : s.find(':', c1 + 1);
      int64_t ms = 0, shard = 0, count = 0;
      if (c2 == std::string::npos || !ParseInt(std::string_view(s).substr(0, c1), ms) ||
          !ParseInt(std::string_view(s).substr(c1 + 1, c2 - c1 - 1), shard) ||
          !ParseInt(std::string_view(s).substr(c2 + 1), count)) {
        return Malformed("claim (replaced fires)");
      }
      FireKey replaced;
      replaced.job_id = req.fire.job_id;
      replaced.scheduled_at = Instant::FromUnixMillis(ms);
      replaced.shard = static_cast<int>(shard);
      replaced.shard_count = static_cast<int>(count);
      out.replaced.push_back(std::move(replaced));
    }
    return out;
  }
  int64_t now = 0;
  if (!IsArray(r, 2) || !IntAt(r, 1, now)) return Malformed("claim");
  const std::string& word = Word(r);
  if (word == "LATE") {
    // The command sat in a buffer (a paused or overloaded server) past the client's timeout:
    // refused unapplied, so no claim exists that no node runs (chaos F6).
    return UnavailableError("redis: the claim of " + req.fire.RunId() +
                            " reached the server after the client's deadline; not applied");
  }
  const Instant backend_now = Instant::FromUnixMillis(now);
  if (word == "ALREADY") return coord::MakeOutcome(R::kAlreadyClaimed, backend_now);
  if (word == "EARLY") return coord::MakeOutcome(R::kTooEarly, backend_now);
  if (word == "OLD") return coord::MakeOutcome(R::kTooOld, backend_now);
  if (word == "PAUSED") return coord::MakeOutcome(R::kPaused, backend_now);
  if (word == "OVERLAP") return coord::MakeOutcome(R::kOverlap, backend_now);
  if (word == "BUSY") return coord::MakeOutcome(R::kBusy, backend_now);
  return Malformed("claim");
}

}  // namespace

RedisClaims::RedisClaims(RedisStore& store)
    : store_(store),
      claims_(kClaimChunk, [this](const auto& items) { return SendClaims(items); }),
      reports_(kReportChunk, [this](const auto& items) { return SendReports(items); }) {}

std::vector<std::string> RedisClaims::ClaimArgs(const ClaimRequest& req) const {
  const int64_t ms = req.fire.scheduled_at.unix_millis();
  return scripts::ArgList(scripts::kClaimItem)
      .Add("job", req.fire.job_id)
      .Add("group", std::to_string(redis::KeyGroup(req.fire.job_id)))
      .Add("ms", std::to_string(ms))
      .Add("shard", std::to_string(req.fire.shard))
      .Add("shard_count", std::to_string(req.fire.shard_count))
      .Add("node", req.node_id)
      .Add("ttl_ms", Ms(req.lease_ttl))
      .Add("skew_ms", Ms(req.skew_tolerance))
      .Add("overlap", std::string(ToString(req.overlap)))
      .Add("deadline", store_.ClaimDeadline(req.lease_ttl))
      .Add("cause", req.cause)
      .Add("member", Member(coord::RunPosition{ms, req.fire.job_id, req.fire.shard, 1}))
      .Take();
}

Result<ClaimOutcome> RedisClaims::Claim(const ClaimRequest& req) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(req));
  GNOMON_RETURN_IF_ERROR(ValidateFire(req.fire));
  Result<RedisReply> r = claims_.Submit(ClaimArgs(req));
  if (!r.ok()) return r.status();
  return ParseClaimReply(req, *r);
}

Result<RedisReply> RedisClaims::SendClaims(
    const std::vector<const std::vector<std::string>*>& items) {
  auto args_of = [&](const RedisStore::BatchItems& part) {
    return store_.BatchArgs(scripts::kClaimMany, part);
  };
  const RedisOptions& o = store_.options();
  if (o.wait_replicas == 0) {
    return store_.EvalBatch(items, [&](const RedisStore::BatchItems& part, const std::string& ib) {
      return store_.Eval(scripts::kClaimMany, {ib, ib}, args_of(part));
    });
  }
  // wait_replicas: the batch's claims count once N replicas have them (a failover to a replica
  // then keeps them); fewer acknowledgements answer every claim the batch granted Unavailable, so
  // that none of those fires starts. Under a Cluster each group's call waits for the replicas of
  // its primary.
  const std::string want = std::to_string(o.wait_replicas);
  const std::string timeout_ms = std::to_string(o.wait_timeout.count());
  return store_.EvalBatch(
      items, [&](const RedisStore::BatchItems& part, const std::string& ib) -> Result<RedisReply> {
        RedisReply acked;
        Result<RedisReply> r = store_.EvalThen(scripts::kClaimMany, {ib, ib}, args_of(part),
                                               {"WAIT", want, timeout_ms}, acked);
        if (!r.ok() || r->is_error()) return r;
        if (acked.type != RedisReply::Type::kInteger) return Malformed("WAIT");
        if (acked.integer < o.wait_replicas) {
          // Only a granted claim needs its replicas: each is answered Unavailable (and taken
          // back). The batch's other answers (claimed elsewhere, overlap, paused, early) stand:
          // losing what they wrote in a failover cannot make a fire run twice.
          const std::string why =
              "redis " + store_.AddressOf(ib) + ": the claim batch was acknowledged by " +
              std::to_string(acked.integer) + " of " + want + " replica(s) within " + timeout_ms +
              " ms (wait_replicas): its fires are not started" + Unclaim(part, *r, ib);
          if (r->type != RedisReply::Type::kArray) return Malformed("claim batch");
          for (RedisReply& e : r->elements) {
            if (GrantedOf(e)) e = RedisReply{RedisReply::Type::kError, why};
          }
        }
        return r;
      });
}

// The primary answered, so it can take back what it granted: the batch's claims are withdrawn
// (kUnclaim), and each fire's retry (the failed claims, handled per `misfire`) claims it anew
// rather than finding it claimed by a run that never started. Withdrawing is best effort: a
// claim it misses keeps its marker, its lease ends unrenewed and the lost-run scan records it
// per `on_lost`. -> "" or why some claims stay.
std::string RedisClaims::Unclaim(const std::vector<const std::vector<std::string>*>& items,
                                 const RedisReply& replies, const std::string& index_base) {
  scripts::ArgList args(scripts::ArgNames(scripts::kUnclaim), store_.CommonArgs());
  size_t granted = 0;
  for (size_t i = 0; i < items.size() && i < replies.elements.size(); ++i) {
    const std::optional<Granted> g = GrantedOf(replies.elements[i]);
    if (!g) continue;
    const std::vector<std::string>& item = *items[i];  // kClaimItem: job, group, ms, shard first
    for (size_t k : {0, 2, 3}) args.Add("fires...", item[k]);
    args.Add("fires...", std::to_string(g->token));
    ++granted;
  }
  if (granted == 0) return "";
  Result<RedisReply> r = store_.Eval(scripts::kUnclaim, {index_base, index_base}, args.Take());
  if (!r.ok()) return "; withdrawing its claims failed (" + r.status().ToString() + ")";
  if (!IsArray(*r, 1) || Word(*r) != "OK" || r->elements.size() != granted + 1) {
    return "; withdrawing its claims failed (malformed reply)";
  }
  size_t kept = 0;
  for (size_t i = 1; i < r->elements.size(); ++i) kept += r->elements[i].str != "OK";
  if (kept == 0) return "; its claims were withdrawn";
  return "; " + std::to_string(kept) + " of its claims could not be withdrawn (lease gone)";
}

Result<RedisReply> RedisClaims::SendReports(
    const std::vector<const std::vector<std::string>*>& items) {
  return store_.EvalBatch(items, [&](const RedisStore::BatchItems& part, const std::string& ib) {
    return store_.Eval(scripts::kReportMany, {ib, ib},
                       store_.BatchArgs(scripts::kReportMany, part));
  });
}

std::vector<Result<ClaimOutcome>> RedisClaims::ClaimMany(const std::vector<ClaimRequest>& reqs) {
  std::vector<Result<ClaimOutcome>> out(reqs.size(),
                                        Result<ClaimOutcome>(InternalError("redis: not claimed")));
  SendInChunks(
      out, kClaimChunk, "claim batch",
      [&](size_t i) -> Result<std::vector<std::string>> {
        GNOMON_RETURN_IF_ERROR(coord::ValidateClaimRequest(reqs[i]));
        GNOMON_RETURN_IF_ERROR(ValidateFire(reqs[i].fire));
        return ClaimArgs(reqs[i]);
      },
      [&](const auto& items) { return SendClaims(items); },
      [&](size_t i, const RedisReply& e) { return ParseClaimReply(reqs[i], e); });
  return out;
}

Status RedisClaims::Renew(gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "renew: ttl"));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  std::vector<std::string> args =
      FencedArgs(scripts::kRenew, claim, store_.CommonArgs()).Add("ttl_ms", Ms(ttl)).Take();
  Result<RedisReply> r =
      store_.Eval(scripts::kRenew,
                  {store_.JobBase(claim.fire.job_id), store_.IndexBase(claim.fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("renew");
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  int64_t lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, lease)) return Malformed("renew");
  claim.lease_expires_at = Instant::FromUnixMillis(lease);
  return Status::Ok();
}

Result<gnomon::Claim> RedisClaims::NextAttempt(const gnomon::Claim& claim, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(coord::ValidateTtl(ttl, "next attempt: ttl"));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  std::vector<std::string> args = FencedArgs(scripts::kNextAttempt, claim, store_.CommonArgs())
                                      .Add("ttl_ms", Ms(ttl))
                                      .Add("node", claim.node_id)
                                      .Take();
  Result<RedisReply> r =
      store_.Eval(scripts::kNextAttempt,
                  {store_.JobBase(claim.fire.job_id), store_.IndexBase(claim.fire.job_id)}, args);
  if (!r.ok()) return r.status();
  if (!IsArray(*r, 1)) return Malformed("next attempt");
  if (Word(*r) == "LEASE") return LeaseLost(claim, *r);
  int64_t attempt = 0, token = 0, lease = 0;
  if (Word(*r) != "OK" || !IntAt(*r, 1, attempt) || !IntAt(*r, 2, token) || !IntAt(*r, 3, lease)) {
    return Malformed("next attempt");
  }
  return gnomon::Claim{claim.fire, static_cast<int>(attempt), token, claim.node_id,
                       Instant::FromUnixMillis(lease)};
}

Result<std::vector<std::string>> RedisClaims::ReportArgs(const gnomon::Claim& claim,
                                                         const RunRecord& record,
                                                         bool final) const {
  GNOMON_RETURN_IF_ERROR(coord::ValidateReport(claim, record, final));
  GNOMON_RETURN_IF_ERROR(ValidateFire(claim.fire));
  const char* effect = "none";
  if (final) {
    switch (coord::FailureEffectOf(record.outcome)) {
      case coord::FailureEffect::kReset:
        effect = "reset";
        break;
      case coord::FailureEffect::kIncrement:
        effect = "inc";
        break;
      case coord::FailureEffect::kUnchanged:
        break;
    }
  }
  scripts::ArgList args(scripts::kReportItem);
  const int64_t ms = claim.fire.scheduled_at.unix_millis();
  args.Add("job", claim.fire.job_id)
      .Add("group", std::to_string(redis::KeyGroup(claim.fire.job_id)))
      .Add("fid", FireId(ms, claim.fire.shard))
      .Add("token", std::to_string(claim.fencing_token))
      .Add("member",
           Member(coord::RunPosition{ms, claim.fire.job_id, claim.fire.shard, claim.attempt}))
      .Add("final", final ? "1" : "0")
      .Add("failure_effect", effect);
  RunRecord stored = record;
  stored.output = coord::TruncateOutput(record.output);
  args.Add("record", EncodeRecord(stored));
  return args.Take();
}

Status RedisClaims::ParseReportReply(const gnomon::Claim& claim, const RedisReply& r) {
  if (r.type == RedisReply::Type::kString && r.str == "OK") return Status::Ok();
  if (!IsArray(r, 1)) return Malformed("report");
  if (Word(r) == "LEASE") return LeaseLost(claim, r);
  if (Word(r) != "OK") return Malformed("report");
  return Status::Ok();
}

Status RedisClaims::Report(const gnomon::Claim& claim, const RunRecord& record, bool final) {
  Result<std::vector<std::string>> args = ReportArgs(claim, record, final);
  if (!args.ok()) return args.status();
  Result<RedisReply> r = reports_.Submit(std::move(*args));
  if (!r.ok()) return r.status();
  return ParseReportReply(claim, *r);
}

std::vector<Status> RedisClaims::ReportMany(const std::vector<ReportRequest>& reqs) {
  std::vector<Status> out(reqs.size(), InternalError("redis: not reported"));
  SendInChunks(
      out, kReportChunk, "report batch",
      [&](size_t i) { return ReportArgs(*reqs[i].claim, *reqs[i].record, reqs[i].final); },
      [&](const auto& items) { return SendReports(items); },
      [&](size_t i, const RedisReply& e) { return ParseReportReply(*reqs[i].claim, e); });
  return out;
}

}  // namespace gnomon::coord
