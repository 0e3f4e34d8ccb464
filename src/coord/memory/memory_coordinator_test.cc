#include "gnomon/testing/memory_coordinator.h"

#include <gtest/gtest.h>

#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing {
namespace {

CoordinatorFactory MemoryFactory() {
  return {"Memory", [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
            return std::make_unique<MemoryCoordinator>(*clock);
          }};
}

GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE(Backend, MemoryFactory());

// The backend clock is the one given, whatever else the process does.
TEST(MemoryCoordinatorTest, UsesTheGivenClock) {
  FakeClock clock(Instant::FromUnixSeconds(1000));
  MemoryCoordinator coord(clock);
  EXPECT_EQ(*coord.Now(), Instant::FromUnixSeconds(1000));
}

}  // namespace
}  // namespace gnomon::testing
