// RedisClaims (internal): the hot half of RedisCoordinator's ClaimStore (gnomon/claim_store.h):
// claims, renewals, next attempts and reports. Concurrent Claim and Report calls go to the server
// together (src/coord/redis/redis_batcher.h): one script call per batch (claim_one and report_one
// per item, each answered on its own); ClaimMany and ReportMany send their own batches in chunks.
// The rules run on the server, in the Lua of redis_scripts.cc (those of src/coord/fire_ledger.h).
//
// Thread safety: safe to call from many threads at once (the batchers are thread-safe; state
// lives on the server).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_CLAIMS_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_CLAIMS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_batcher.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisClaims {
 public:
  // `store` must outlive this object.
  explicit RedisClaims(RedisStore& store);
  RedisClaims(const RedisClaims&) = delete;
  RedisClaims& operator=(const RedisClaims&) = delete;

  Result<ClaimOutcome> Claim(const ClaimRequest& req);
  std::vector<Result<ClaimOutcome>> ClaimMany(const std::vector<ClaimRequest>& reqs);
  Status Renew(gnomon::Claim& claim, Duration ttl);
  Result<gnomon::Claim> NextAttempt(const gnomon::Claim& claim, Duration ttl);
  Status Report(const gnomon::Claim& claim, const RunRecord& record, bool final);
  std::vector<Status> ReportMany(const std::vector<ReportRequest>& reqs);

 private:
  // The script arguments of one claim (claim_one; layout kClaimItem in
  // src/coord/redis/redis_scripts.h).
  std::vector<std::string> ClaimArgs(const ClaimRequest& req) const;
  // The script arguments of one report (report_one; layout kReportItem in
  // src/coord/redis/redis_scripts.h), once it is valid.
  Result<std::vector<std::string>> ReportArgs(const gnomon::Claim& claim, const RunRecord& record,
                                              bool final) const;
  static Status ParseReportReply(const gnomon::Claim& claim, const RedisReply& reply);

  // Chunks bound how long one script holds the server (a claim is some 12 commands, a report
  // some 8).
  static constexpr size_t kClaimChunk = 128;
  static constexpr size_t kReportChunk = 64;
  Result<RedisReply> SendClaims(const std::vector<const std::vector<std::string>*>& items);
  // Takes back the claims of `items` that `replies` granted, in the slot of `index_base`.
  std::string Unclaim(const std::vector<const std::vector<std::string>*>& items,
                      const RedisReply& replies, const std::string& index_base);
  Result<RedisReply> SendReports(const std::vector<const std::vector<std::string>*>& items);

  RedisStore& store_;
  RedisBatcher claims_;
  RedisBatcher reports_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_CLAIMS_H_
