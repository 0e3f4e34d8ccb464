// The conformance suite of NodeRegistry (gnomon/node_registry.h): heartbeats and their expiry.
// Instantiated for every backend with the other roles' suites (coordinator_conformance.h).
#include <vector>

#include "src/coord/conformance_helpers.h"
#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing::conformance {
namespace {

// --- Nodes -----------------------------------------------------------------------------------

TEST_P(CoordinatorConformanceTest, HeartbeatsExpire) {
  const Instant t0 = clock_.Now();
  EXPECT_TRUE(coord_->ListNodes()->empty());
  NodeInfo a{.node_id = "node-a",
             .host = "host-1",
             .version = "0.1.0",
             .started_at = t0 - hours(1),
             .last_heartbeat = Instant(),
             .running = 3,
             .clock_skew = milliseconds(-250)};
  NodeInfo b = a;
  b.node_id = "node-b";
  b.host = "host-2";
  b.running = 0;
  b.clock_skew = milliseconds(40);
  ASSERT_OK(coord_->Heartbeat(b, seconds(30)));
  ASSERT_OK(coord_->Heartbeat(a, seconds(10)));
  Result<std::vector<NodeInfo>> nodes = coord_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  const NodeInfo& got = (*nodes)[0];
  EXPECT_EQ(got.node_id, "node-a");
  EXPECT_EQ(got.host, "host-1");
  EXPECT_EQ(got.version, "0.1.0");
  EXPECT_EQ(got.started_at, t0 - hours(1));
  EXPECT_EQ(got.last_heartbeat, t0);
  EXPECT_EQ(got.running, 3);
  EXPECT_EQ(got.clock_skew, milliseconds(-250));
  EXPECT_EQ((*nodes)[1].node_id, "node-b");
  EXPECT_EQ((*nodes)[1].clock_skew, milliseconds(40));

  clock_.Advance(seconds(10));  // a's heartbeat ran out exactly now
  nodes = coord_->ListNodes();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].node_id, "node-b");
  a.running = 1;
  ASSERT_OK(coord_->Heartbeat(a, seconds(60)));
  clock_.Advance(seconds(25));
  nodes = coord_->ListNodes();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].node_id, "node-a");
  EXPECT_EQ((*nodes)[0].running, 1);
  EXPECT_EQ((*nodes)[0].last_heartbeat, t0 + seconds(10));
  EXPECT_CODE(coord_->Heartbeat(a, Duration(0)), StatusCode::kInvalidArgument);
  NodeInfo anonymous;
  EXPECT_CODE(coord_->Heartbeat(anonymous, seconds(1)), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gnomon::testing::conformance
