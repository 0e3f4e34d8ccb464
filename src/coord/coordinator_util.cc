#include "src/coord/coordinator_util.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <tuple>

namespace gnomon::coord {
namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Status ValidateFireKey(const FireKey& fire) {
  if (!IsValidJobId(fire.job_id)) {
    return InvalidArgumentError("job id \"" + fire.job_id.substr(0, 128) +
                                "\" does not match [A-Za-z0-9_.-]{1,128}");
  }
  if (fire.shard_count < 1 || fire.shard < 0 || fire.shard >= fire.shard_count) {
    return InvalidArgumentError("fire " + fire.RunId() + ": shard " + std::to_string(fire.shard) +
                                " is out of range for shard_count " +
                                std::to_string(fire.shard_count));
  }
  return Status::Ok();
}

Status ValidateTtl(Duration ttl, std::string_view what) {
  if (ttl <= Duration(0)) {
    return InvalidArgumentError(std::string(what) + ": " + std::to_string(ttl.count()) +
                                "ms is not positive");
  }
  return Status::Ok();
}

Status ValidateResolveLost(const ExpiredFire& expired, const std::string& node_id,
                           LostPolicy policy, Duration ttl) {
  GNOMON_RETURN_IF_ERROR(ValidateFireKey(expired.fire));
  if (policy == LostPolicy::kRerun) {
    GNOMON_RETURN_IF_ERROR(ValidateTtl(ttl, "resolve lost: ttl"));
    if (node_id.empty()) return InvalidArgumentError("resolve lost: node_id is empty");
  }
  return Status::Ok();
}

Status ValidateClaimRequest(const ClaimRequest& req) {
  GNOMON_RETURN_IF_ERROR(ValidateFireKey(req.fire));
  if (req.node_id.empty()) return InvalidArgumentError("claim: node_id is empty");
  GNOMON_RETURN_IF_ERROR(ValidateTtl(req.lease_ttl, "claim: lease_ttl"));
  if (req.skew_tolerance < Duration(0)) {
    return InvalidArgumentError("claim: skew_tolerance is negative");
  }
  if (req.cause.size() > kMaxCauseBytes) {
    return InvalidArgumentError("claim: cause longer than 256 bytes");
  }
  return Status::Ok();
}

Status ValidateReport(const Claim& claim, const RunRecord& record, bool final) {
  const std::string run_id = claim.fire.RunId();
  auto mismatch = [&](const char* field) {
    return InvalidArgumentError("report for " + run_id + " attempt " +
                                std::to_string(claim.attempt) + ": record " + field +
                                " does not match the claim");
  };
  if (record.run_id != run_id) return mismatch("run_id");
  if (record.job_id != claim.fire.job_id) return mismatch("job_id");
  if (record.scheduled_at != claim.fire.scheduled_at) return mismatch("scheduled_at");
  if (record.shard != claim.fire.shard) return mismatch("shard");
  if (record.attempt != claim.attempt) return mismatch("attempt");
  if (record.fencing_token != claim.fencing_token) return mismatch("fencing_token");
  if (final && record.outcome == RunOutcome::kRunning) {
    return InvalidArgumentError("report for " + run_id + ": a final record cannot be running");
  }
  if (record.params.size() > kMaxParamsBytes) {
    return InvalidArgumentError("report for " + run_id + ": params larger than 16 KiB");
  }
  if (record.cause.size() > kMaxCauseBytes) {
    return InvalidArgumentError("report for " + run_id + ": cause longer than 256 bytes");
  }
  return Status::Ok();
}

Result<int> PageLimit(int limit) {
  if (limit < 1) return InvalidArgumentError("limit " + std::to_string(limit) + " is below 1");
  return std::min(limit, kMaxPageSize);
}

std::string TruncateOutput(std::string output) {
  if (output.size() > kMaxOutputBytes) output.erase(0, output.size() - kMaxOutputBytes);
  return output;
}

void CancelRecord(RunRecord& record, const std::string& reason, Instant now) {
  if (record.outcome == RunOutcome::kRunning) {
    record.outcome = RunOutcome::kCancelled;
    record.finished_at = now;
    record.error = reason;
  } else {
    record.error += (record.error.empty() ? "retry " : "; retry ") + reason;
  }
}

Status NoSuchFire(const FireKey& fire) {
  return NotFoundError("run " + fire.RunId() + " has no record");
}

Status JobNotFound(const std::string& job_id) {
  return NotFoundError("job " + job_id.substr(0, 128) + " does not exist");
}

int64_t AuditStoredCode(AuditResult result) {
  // By AuditResult: ok, invalid, denied, not found, conflict, rate limited, unavailable, failed.
  static constexpr int64_t kCodes[] = {200, 400, 403, 404, 409, 429, 503, 500};
  const auto i = static_cast<size_t>(result);
  return i < std::size(kCodes) ? kCodes[i] : 500;
}

AuditResult AuditResultOfStoredCode(int64_t code) {
  if (code < 400) return AuditResult::kOk;
  switch (code) {
    case 401:
    case 403:
      return AuditResult::kDenied;
    case 404:
      return AuditResult::kNotFound;
    case 409:
    case 412:
      return AuditResult::kConflict;
    case 429:
      return AuditResult::kRateLimited;
    case 503:
    case 504:
      return AuditResult::kUnavailable;
    default:
      return code < 500 ? AuditResult::kInvalid : AuditResult::kFailed;
  }
}

Status ValidateRerun(const FireKey& fire, const std::string& node_id, Duration ttl,
                     const std::string& cause) {
  GNOMON_RETURN_IF_ERROR(ValidateFireKey(fire));
  GNOMON_RETURN_IF_ERROR(ValidateTtl(ttl, "rerun: ttl"));
  if (node_id.empty()) return InvalidArgumentError("rerun: node_id is empty");
  if (cause.size() > kMaxCauseBytes) {
    return InvalidArgumentError("rerun: cause longer than 256 bytes");
  }
  return Status::Ok();
}

Status FireNotEnded(const FireKey& fire) {
  return FailedPreconditionError("run " + fire.RunId() +
                                 " has not ended (it runs or waits for its retry)");
}

Status FireEnded(const FireKey& fire) {
  return FailedPreconditionError("run " + fire.RunId() + " already ended");
}

FailureEffect FailureEffectOf(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kSucceeded:
      return FailureEffect::kReset;
    case RunOutcome::kFailed:
    case RunOutcome::kTimedOut:
    case RunOutcome::kLost:
      return FailureEffect::kIncrement;
    case RunOutcome::kRunning:
    case RunOutcome::kCancelled:
    case RunOutcome::kSkipped:
      return FailureEffect::kUnchanged;
  }
  return FailureEffect::kUnchanged;
}

RunPosition PositionOf(const RunRecord& record) {
  return RunPosition{record.scheduled_at.unix_millis(), record.job_id, record.shard,
                     record.attempt};
}

bool ListedBefore(const RunPosition& a, const RunPosition& b) {
  return std::forward_as_tuple(b.scheduled_ms, a.job_id, a.shard, b.attempt) <
         std::forward_as_tuple(a.scheduled_ms, b.job_id, b.shard, a.attempt);
}

std::string EncodeCursor(const RunPosition& last) {
  // The job id goes last: it cannot contain ':' but the format does not rely on that.
  return "r1:" + std::to_string(last.scheduled_ms) + ":" + std::to_string(last.shard) + ":" +
         std::to_string(last.attempt) + ":" + last.job_id;
}

Result<std::optional<RunPosition>> PageStart(std::string_view cursor) {
  if (cursor.empty()) return std::optional<RunPosition>();
  Result<RunPosition> pos = DecodeCursor(cursor);
  if (!pos.ok()) return pos.status();
  return std::optional<RunPosition>(*pos);
}

Result<RunPosition> DecodeCursor(std::string_view cursor) {
  auto bad = [&] {
    return InvalidArgumentError("cursor \"" + std::string(cursor.substr(0, 64)) +
                                "\" is not one this backend issued");
  };
  if (!cursor.starts_with("r1:")) return bad();
  std::string_view rest = cursor.substr(3);
  int64_t fields[3];
  for (int64_t& field : fields) {
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos || !ParseInt(rest.substr(0, colon), field)) return bad();
    rest = rest.substr(colon + 1);
  }
  if (!IsValidJobId(rest) || fields[1] < 0 || fields[1] > INT32_MAX || fields[2] < 1 ||
      fields[2] > INT32_MAX) {
    return bad();
  }
  return RunPosition{fields[0], std::string(rest), static_cast<int>(fields[1]),
                     static_cast<int>(fields[2])};
}

ClaimOutcome MakeOutcome(ClaimOutcome::Result result, Instant backend_now) {
  ClaimOutcome out;
  out.result = result;
  out.backend_now = backend_now;
  return out;
}

RunRecord NewRecord(const FireKey& fire, int attempt, int64_t fencing_token,
                    const std::string& node_id, Instant started_at, RunOutcome outcome) {
  RunRecord r;
  r.run_id = fire.RunId();
  r.job_id = fire.job_id;
  r.scheduled_at = fire.scheduled_at;
  r.shard = fire.shard;
  r.shard_count = fire.shard_count;
  r.attempt = attempt;
  r.fencing_token = fencing_token;
  r.node_id = node_id;
  r.started_at = started_at;
  if (outcome != RunOutcome::kRunning) r.finished_at = started_at;
  r.outcome = outcome;
  return r;
}

}  // namespace gnomon::coord
