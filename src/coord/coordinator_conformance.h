// The Coordinator conformance suite: backend-independent GoogleTest tests of every contract of
// the role interfaces in gnomon/coordinator.h, one file per role (claim_store_conformance.cc and
// claim_store_recovery_conformance.cc, run_history_, definition_store_, audit_store_ and
// node_registry_conformance.cc, sharing conformance_helpers.h). A backend is done when it passes
// them all (docs/architecture.md rule 5).
//
// Usage, in a backend's test file (linking the CMake target gnomon_coord_conformance):
//
//   CoordinatorFactory MemoryFactory() {
//     return {"memory", [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
//               return std::make_unique<MemoryCoordinator>(*clock);
//             }};
//   }
//   GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE(Memory, MemoryFactory());
//
// Each test gets a fresh backend from the factory and a FakeClock that is the backend's clock:
// the suite moves lease expiry, the early-fire guard, heartbeat expiry and max_age pruning by
// advancing it, never by sleeping. The fixture outlives the backend (the clock is destroyed
// after it). Some tests call the backend from many threads at once.
#ifndef GNOMON_SRC_COORD_COORDINATOR_CONFORMANCE_H_
#define GNOMON_SRC_COORD_COORDINATOR_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "gnomon/coordinator.h"
#include "gnomon/testing/fake_clock.h"

namespace gnomon::testing {

// Creates fresh, empty backends for the suite.
struct CoordinatorFactory {
  // The instantiation's name in test names: [A-Za-z0-9_]+.
  std::string name;
  // Returns a new, empty backend whose clock is `clock` (never null; outlives the backend), or
  // nullptr when the backend cannot be created (the test then fails).
  std::function<std::unique_ptr<Coordinator>(FakeClock* clock)> make;
  // Whether PruneHistory drops closed fire markers with their history (every backend today): then
  // a claim before its cutoff is kTooOld. False for a backend whose markers expire on their own.
  bool markers_go_with_history = true;
};

// The parameterised fixture: `clock_` is the backend clock, `coord_` the backend under test.
class CoordinatorConformanceTest : public ::testing::TestWithParam<CoordinatorFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  FakeClock clock_;
  std::unique_ptr<Coordinator> coord_;
};

// Test-name generator for INSTANTIATE_TEST_SUITE_P: the factory's name.
std::string CoordinatorFactoryName(const ::testing::TestParamInfo<CoordinatorFactory>& info);

}  // namespace gnomon::testing

// Instantiates the conformance suite for one or more factories (comma-separated expressions of
// type CoordinatorFactory). `prefix` is an identifier naming the instantiation. GoogleTest needs
// the suite name unqualified: use it inside namespace gnomon::testing, or after
// `using gnomon::testing::CoordinatorConformanceTest;`.
#define GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE(prefix, ...)                                \
  INSTANTIATE_TEST_SUITE_P(prefix, CoordinatorConformanceTest, ::testing::Values(__VA_ARGS__), \
                           ::gnomon::testing::CoordinatorFactoryName)

#endif  // GNOMON_SRC_COORD_COORDINATOR_CONFORMANCE_H_
