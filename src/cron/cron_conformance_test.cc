// Every vector of tests/testdata/cron-vectors.jsonl (copied from the shared conformance suite):
// `expected` is a list of up to 5 instants, "error", or null (either answer is accepted).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

struct Vector {
  std::string id;
  std::string expr;
  std::string tz;
  std::string from;
  std::string rule;
  enum class Kind { kList, kError, kEither } kind;
  std::vector<std::string> expected;
};

// gtest prints a parameter with this; the id is what a reader needs.
void PrintTo(const Vector& v, std::ostream* os) { *os << v.id << " \"" << v.expr << "\""; }

std::vector<Vector> LoadVectors() {
  const char* dir = std::getenv("GNOMON_TESTDATA");
  const std::string path = std::string(dir ? dir : GNOMON_TESTDATA_DIR) + "/cron-vectors.jsonl";
  std::ifstream in(path);
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    Vector v;
    v.id = j.at("id").get<std::string>();
    v.expr = j.at("expr").get<std::string>();
    v.tz = j.at("tz").get<std::string>();
    v.from = j.at("from").get<std::string>();
    v.rule = j.at("rule").get<std::string>();
    const nlohmann::json& e = j.at("expected");
    if (e.is_null()) {
      v.kind = Vector::Kind::kEither;
    } else if (e.is_string()) {
      v.kind = Vector::Kind::kError;
    } else {
      v.kind = Vector::Kind::kList;
      for (const auto& s : e) v.expected.push_back(s.get<std::string>());
    }
    out.push_back(std::move(v));
  }
  return out;
}

const std::vector<Vector>& Vectors() {
  static const std::vector<Vector>* const vectors = new std::vector<Vector>(LoadVectors());
  return *vectors;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out + "]";
}

class CronConformanceTest : public ::testing::TestWithParam<Vector> {};

TEST(CronConformanceSuite, LoadsAllVectors) { EXPECT_GE(Vectors().size(), 300u); }

TEST_P(CronConformanceTest, MatchesExpected) {
  const Vector& v = GetParam();
  Result<TimeZone> zone = TimeZone::Load(v.tz);
  ASSERT_TRUE(zone.ok()) << v.id << ": " << zone.status().ToString();
  Result<CronExpr> expr = CronExpr::Parse(v.expr, CronOptions{*zone, "job"});
  if (v.kind == Vector::Kind::kError) {
    EXPECT_FALSE(expr.ok()) << v.id << " \"" << v.expr << "\": expected an error, parsed fine";
    return;
  }
  if (v.kind == Vector::Kind::kEither) return;
  ASSERT_TRUE(expr.ok()) << v.id << " \"" << v.expr << "\": " << expr.status().ToString();
  Result<Instant> from = Instant::ParseRfc3339(v.from);
  ASSERT_TRUE(from.ok()) << v.id;
  std::vector<std::string> actual;
  Instant t = *from;
  for (int i = 0; i < 5; ++i) {
    std::optional<Instant> next = expr->Next(t);
    if (!next) break;
    actual.push_back(next->ToRfc3339Seconds());
    t = *next;
  }
  EXPECT_EQ(actual, v.expected) << v.id << " \"" << v.expr << "\" tz=" << v.tz << " from=" << v.from
                                << " (rule " << v.rule << ")\n  expected " << Join(v.expected)
                                << "\n  actual   " << Join(actual);
}

std::string VectorName(const ::testing::TestParamInfo<Vector>& info) {
  std::string name = info.param.id;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Vectors, CronConformanceTest, ::testing::ValuesIn(Vectors()), VectorName);

}  // namespace
}  // namespace gnomon
