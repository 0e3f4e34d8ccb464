// The scripts' argument reading against their one C++ description (redis_scripts.h): each
// script's "-- ARGV[5..]:" line lists ArgNames(id) and it reads exactly those ARGV indices; each
// batch item function's "-- A[i..]:" line lists its item layout and it reads exactly those
// offsets. A script changed without its description (or the reverse) fails here. No server.
#include "src/coord/redis/redis_scripts.h"

#include <gtest/gtest.h>

#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace gnomon::coord::redis_scripts {
namespace {

std::vector<std::string> Names(std::span<const std::string_view> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

size_t FixedCount(std::span<const std::string_view> names) {
  size_t n = 0;
  for (std::string_view name : names) n += name.ends_with("...") ? 0 : 1;
  return n;
}

bool HasRest(std::span<const std::string_view> names) {
  return !names.empty() && names.back().ends_with("...");
}

// The names on the source's line that starts with `marker`, or nullopt without one.
std::optional<std::vector<std::string>> Declared(const std::string& source,
                                                 const std::string& marker) {
  const size_t at = source.find("\n" + marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t from = at + 1 + marker.size();
  std::istringstream line(source.substr(from, source.find('\n', from) - from));
  std::vector<std::string> out;
  for (std::string name; line >> name;) out.push_back(name);
  return out;
}

// The largest number `re`'s first group matches in `source` (-1 when none).
int MaxIndex(const std::string& source, const std::regex& re) {
  int max = -1;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), re);
       it != std::sregex_iterator(); ++it) {
    max = std::max(max, std::stoi((*it)[1].str()));
  }
  return max;
}

constexpr Topology kTopologies[] = {Topology::kSingle, Topology::kCluster};

TEST(RedisScriptsTest, EveryScriptDeclaresTheArgumentsOfItsDescription) {
  for (Topology topology : kTopologies) {
    for (int i = 0; i < kCount; ++i) {
      const Id id = static_cast<Id>(i);
      std::optional<std::vector<std::string>> declared =
          Declared(Source(id, topology), "-- ARGV[5..]:");
      ASSERT_TRUE(declared.has_value()) << "script " << i << " has no \"-- ARGV[5..]:\" line";
      EXPECT_EQ(*declared, Names(ArgNames(id))) << "script " << i;
    }
  }
}

TEST(RedisScriptsTest, EveryScriptReadsExactlyTheArgumentsOfItsDescription) {
  const std::regex argv(R"(ARGV\[(\d+)\])");
  for (int k = 0; k < 2 * kCount; ++k) {
    const int i = k % kCount;
    const Id id = static_cast<Id>(i);
    const std::string source = Source(id, kTopologies[k / kCount]);
    const int fixed = static_cast<int>(FixedCount(ArgNames(id)));
    // ARGV[1..4] are the common arguments; the script's own follow.
    if (fixed == 0 || HasRest(ArgNames(id))) {
      EXPECT_LE(MaxIndex(source, argv), 4 + fixed) << "script " << i;
    } else {
      EXPECT_EQ(MaxIndex(source, argv), 4 + fixed) << "script " << i;
    }
    for (int n = 5; n <= 4 + fixed; ++n) {
      EXPECT_NE(source.find("ARGV[" + std::to_string(n) + "]"), std::string::npos)
          << "script " << i << " does not read ARGV[" << n << "]";
    }
  }
}

TEST(RedisScriptsTest, BatchItemsAreReadAsDescribed) {
  const std::regex offset(R"(A\[i \+ (\d+)\])");
  for (const auto& [id, item] :
       {std::pair{kClaimMany, std::span<const std::string_view>(kClaimItem)},
        std::pair{kReportMany, std::span<const std::string_view>(kReportItem)},
        std::pair{kPruneMany, std::span<const std::string_view>(kPruneItem)}}) {
    const std::string source = Source(id);
    std::optional<std::vector<std::string>> declared = Declared(source, "-- A[i..]:");
    ASSERT_TRUE(declared.has_value()) << "script " << id;
    EXPECT_EQ(*declared, Names(item)) << "script " << id;
    const int fixed = static_cast<int>(FixedCount(item));
    EXPECT_EQ(MaxIndex(source, offset), fixed - 1) << "script " << id;
    EXPECT_NE(source.find("A[i]"), std::string::npos) << "script " << id;
    for (int k = 1; k < fixed; ++k) {
      EXPECT_NE(source.find("A[i + " + std::to_string(k) + "]"), std::string::npos)
          << "script " << id << " does not read A[i + " << k << "]";
    }
    // A rest starts right after the fixed part.
    if (HasRest(item)) {
      EXPECT_NE(source.find("i + " + std::to_string(fixed)), std::string::npos);
    }
  }
  // Each batch steps through its items by the item's size.
  EXPECT_NE(Source(kClaimMany).find("k * " + std::to_string(std::size(kClaimItem))),
            std::string::npos);
  EXPECT_NE(Source(kReportMany).find("k * " + std::to_string(std::size(kReportItem))),
            std::string::npos);
  EXPECT_NE(Source(kPruneMany).find("k * " + std::to_string(std::size(kPruneItem))),
            std::string::npos);
}

// Under a Cluster every script starts with "#!lua" (the server then refuses a key outside its
// slot), but for the batch scripts, which may touch every slot of their primary (a claim or
// report batch reads each group's lease index before it writes anything); each publishes on the
// sharded channel, and a fire batch's history members stay in its primary.
TEST(RedisScriptsTest, ClusterScriptsKeepToOneSlot) {
  for (int i = 0; i < kCount; ++i) {
    const Id id = static_cast<Id>(i);
    const std::string single = Source(id);
    const std::string cluster = Source(id, Topology::kCluster);
    EXPECT_FALSE(single.starts_with("#!")) << "script " << i;
    EXPECT_TRUE(
        cluster.starts_with(CrossSlot(id) ? "#!lua flags=allow-cross-slot-keys\n" : "#!lua\n"))
        << "script " << i;
    EXPECT_EQ(cluster.find("'PUBLISH'"), std::string::npos) << "script " << i;
    EXPECT_EQ(single.find("'SPUBLISH'"), std::string::npos) << "script " << i;
  }
  EXPECT_TRUE(CrossSlot(kClaimMany) && CrossSlot(kReportMany) && CrossSlot(kPruneMany) &&
              !CrossSlot(kPutJob));
  const std::string claim = Source(kClaimMany, Topology::kCluster);
  EXPECT_LT(claim.find("check_local(ARGV"), claim.find("claim_one(ARGV"));
  const std::string report = Source(kReportMany, Topology::kCluster);
  EXPECT_LT(report.find("check_local(ARGV"), report.find("report_one(ARGV"));
  const std::string prune = Source(kPruneMany, Topology::kCluster);
  EXPECT_LT(prune.find("check_local(ARGV"), prune.find("prune_one(ARGV"));
  EXPECT_NE(claim.find("GB .. ':runs_new'"), std::string::npos);
  EXPECT_EQ(claim.find("GB .. ':runs')"), std::string::npos);
  EXPECT_EQ(claim.find("trim(GB"), std::string::npos);
}

// ListsRecords names exactly the scripts that can list a new record (list_attempt): under a
// Cluster their callers copy the group's runs_new into the all-jobs listing.
TEST(RedisScriptsTest, ListsRecordsNamesTheScriptsThatIndexNewRecords) {
  for (int i = 0; i < kCount; ++i) {
    const Id id = static_cast<Id>(i);
    EXPECT_EQ(ListsRecords(id),
              Source(id).find("local function list_attempt(") != std::string::npos)
        << "script " << i;
  }
}

TEST(RedisScriptsTest, ArgListTakesTheDescribedNamesInOrder) {
  std::vector<std::string> args = ArgList(ArgNames(kSetPaused), {"", "1", "2", "3"})
                                      .Add("paused", "1")
                                      .Add("reason", "api")
                                      .Take();
  EXPECT_EQ(args, (std::vector<std::string>{"", "1", "2", "3", "1", "api"}));
  std::vector<std::string> batch =
      ArgList(ArgNames(kGetJobStates)).Add("jobs...", "a").Add("jobs...", "b").Take();
  EXPECT_EQ(batch, (std::vector<std::string>{"a", "b"}));
  EXPECT_DEATH(ArgList(ArgNames(kSetPaused)).Add("reason", "api"), "");
  EXPECT_DEATH(ArgList(ArgNames(kSetPaused)).Add("paused", "1").Take(), "");
}

}  // namespace
}  // namespace gnomon::coord::redis_scripts
