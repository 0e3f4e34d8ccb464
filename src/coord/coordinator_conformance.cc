#include "src/coord/coordinator_conformance.h"

namespace gnomon::testing {

void CoordinatorConformanceTest::SetUp() {
  coord_ = GetParam().make(&clock_);
  ASSERT_NE(coord_, nullptr) << "factory " << GetParam().name << " returned no backend";
}

void CoordinatorConformanceTest::TearDown() { coord_.reset(); }

std::string CoordinatorFactoryName(const ::testing::TestParamInfo<CoordinatorFactory>& info) {
  return info.param.name;
}

}  // namespace gnomon::testing
