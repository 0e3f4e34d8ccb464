#include "src/exec/output_tail.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace gnomon::exec_internal {
namespace {

using ::testing::ElementsAre;

TEST(OutputTailTest, KeepsEverythingBelowCapacity) {
  OutputTail tail(8);
  tail.Append("abc");
  tail.Append("de");
  EXPECT_EQ(tail.Contents(), "abcde");
  EXPECT_EQ(tail.total_bytes(), 5u);
}

TEST(OutputTailTest, KeepsTheLastBytes) {
  OutputTail tail(4);
  tail.Append("abc");
  tail.Append("def");
  EXPECT_EQ(tail.Contents(), "cdef");
  tail.Append("g");
  EXPECT_EQ(tail.Contents(), "defg");
  tail.Append("0123456789");
  EXPECT_EQ(tail.Contents(), "6789");
  EXPECT_EQ(tail.total_bytes(), 17u);
}

TEST(OutputTailTest, ZeroCapacityKeepsNothing) {
  OutputTail tail(0);
  tail.Append("abc");
  EXPECT_EQ(tail.Contents(), "");
}

TEST(OutputTailTest, MatchesAReferenceForRandomChunks) {
  std::mt19937 rng(7);
  for (size_t capacity : {1u, 5u, 64u, 1000u}) {
    OutputTail tail(capacity);
    std::string all;
    for (int i = 0; i < 500; ++i) {
      std::string chunk(rng() % (2 * capacity + 2), '\0');
      for (char& c : chunk) c = static_cast<char>('a' + rng() % 26);
      tail.Append(chunk);
      all += chunk;
      const std::string expected = all.size() > capacity ? all.substr(all.size() - capacity) : all;
      ASSERT_EQ(tail.Contents(), expected) << "capacity " << capacity << " step " << i;
    }
  }
}

std::vector<std::string> Split(LineSplitter& splitter, std::vector<std::string>& out,
                               const std::vector<std::string>& chunks) {
  for (const auto& c : chunks) splitter.Feed(c);
  splitter.Finish();
  return out;
}

TEST(LineSplitterTest, SplitsAcrossChunksAndStripsCr) {
  std::vector<std::string> lines;
  LineSplitter s(100, [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_THAT(Split(s, lines, {"ab", "c\nde\r\n", "\nf", "g"}), ElementsAre("abc", "de", "", "fg"));
}

TEST(LineSplitterTest, DropsOverlongLines) {
  std::vector<std::string> lines;
  LineSplitter s(4, [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_THAT(Split(s, lines, {"abcd\n", "abc", "de\nxy", "z", "zzzz", "\nok"}),
              ElementsAre("abcd", "ok"));
}

TEST(CheckpointLineTest, RecognisesTheMarkerAtTheStartOnly) {
  std::string_view value;
  ASSERT_TRUE(ParseCheckpointLine("::gnomon-checkpoint step 3", &value));
  EXPECT_EQ(value, "step 3");
  ASSERT_TRUE(ParseCheckpointLine("::gnomon-checkpoint ", &value));
  EXPECT_EQ(value, "");
  EXPECT_FALSE(ParseCheckpointLine(" ::gnomon-checkpoint x", &value));
  EXPECT_FALSE(ParseCheckpointLine("::gnomon-checkpoint", &value));
  EXPECT_FALSE(ParseCheckpointLine("::gnomon-checkpointx", &value));
}

}  // namespace
}  // namespace gnomon::exec_internal
