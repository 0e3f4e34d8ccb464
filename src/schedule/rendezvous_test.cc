// Rendezvous ranking: agreement, balance, and minimal movement when nodes join or leave
// (issue: within 5% of the 1/N optimum).
#include "src/schedule/rendezvous.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace gnomon::internal {
namespace {

std::vector<std::string> Nodes(int n, const std::string& prefix = "node-") {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

std::string JobId(int i) { return "job-" + std::to_string(i); }

constexpr int kJobs = 20000;

TEST(RendezvousTest, EveryNodeAgreesOnOneOwnerAndAnOrder) {
  const std::vector<std::string> nodes = Nodes(5);
  for (int j = 0; j < 500; ++j) {
    std::set<int> ranks;
    for (const std::string& n : nodes) ranks.insert(RendezvousRank(nodes, n, JobId(j), 0));
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3, 4})) << JobId(j);
    const std::string& owner = RendezvousOwner(nodes, JobId(j), 0);
    EXPECT_EQ(RendezvousRank(nodes, owner, JobId(j), 0), 0);
  }
  // `self` counts even when absent from the list; duplicates do not.
  EXPECT_LE(RendezvousRank({"a", "a", "b"}, "c", "j", 0), 2);
  EXPECT_EQ(RendezvousRank({}, "c", "j", 0), 0);
}

TEST(RendezvousTest, OwnershipIsBalanced) {
  for (int n : {2, 3, 5, 10}) {
    const std::vector<std::string> nodes = Nodes(n);
    std::map<std::string, int> owned;
    for (int j = 0; j < kJobs; ++j) ++owned[RendezvousOwner(nodes, JobId(j), 0)];
    const double fair = static_cast<double>(kJobs) / n;
    for (const auto& [node, count] : owned) {
      EXPECT_NEAR(count, fair, fair * 0.1) << n << " nodes, " << node;
    }
  }
}

// Shards of one job are spread too (broadcast shards land on different nodes).
TEST(RendezvousTest, ShardsOfOneJobSpread) {
  const std::vector<std::string> nodes = Nodes(4);
  std::map<std::string, int> owned;
  for (int s = 0; s < 4000; ++s) ++owned[RendezvousOwner(nodes, "one-job", s)];
  for (const auto& [node, count] : owned) EXPECT_NEAR(count, 1000, 100) << node;
}

// A joining or leaving node moves only its share: the fraction of job owners that change is
// within 5% (relative) of the 1/N optimum, and every move involves that node.
TEST(RendezvousTest, MembershipChangesMoveOnlyTheirShare) {
  for (int n : {3, 4, 8}) {
    const std::vector<std::string> before = Nodes(n);
    std::vector<std::string> joined = before;
    joined.push_back("newcomer");
    std::vector<std::string> left(before.begin() + 1, before.end());
    int moved_join = 0, moved_leave = 0;
    for (int j = 0; j < kJobs; ++j) {
      const std::string& old_owner = RendezvousOwner(before, JobId(j), 0);
      const std::string& join_owner = RendezvousOwner(joined, JobId(j), 0);
      const std::string& leave_owner = RendezvousOwner(left, JobId(j), 0);
      if (join_owner != old_owner) {
        ++moved_join;
        EXPECT_EQ(join_owner, "newcomer");
      }
      if (leave_owner != old_owner) {
        ++moved_leave;
        EXPECT_EQ(old_owner, before[0]);
      }
    }
    const double join_optimum = static_cast<double>(kJobs) / (n + 1);
    const double leave_optimum = static_cast<double>(kJobs) / n;
    EXPECT_NEAR(moved_join, join_optimum, join_optimum * 0.05) << n << " nodes + 1";
    EXPECT_NEAR(moved_leave, leave_optimum, leave_optimum * 0.05) << n << " nodes - 1";
  }
}

}  // namespace
}  // namespace gnomon::internal
