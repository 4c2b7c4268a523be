#include "sample/sequence_state.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer {
namespace {

TEST(SequenceSamplingState, CountsPromptAndOutputTokensSeparately) {
  const std::vector<int32_t> prompt = {5, 7, 5};
  auto created = SequenceSamplingState::create(prompt, 10);
  ASSERT_TRUE(created);
  SequenceSamplingState state = std::move(created).value();
  EXPECT_EQ(state.num_generated(), 0);
  EXPECT_EQ(state.occurrences().size(), 2u);
  EXPECT_TRUE(state.find(5)->in_prompt);
  EXPECT_EQ(state.find(5)->output_count, 0);

  ASSERT_TRUE(state.append_output(7));
  ASSERT_TRUE(state.append_output(2));
  ASSERT_TRUE(state.append_output(2));
  EXPECT_EQ(state.num_generated(), 3);
  EXPECT_EQ(state.find(7)->output_count, 1);
  EXPECT_TRUE(state.find(7)->in_prompt);
  EXPECT_EQ(state.find(2)->output_count, 2);
  EXPECT_FALSE(state.find(2)->in_prompt);
  EXPECT_EQ(state.find(3), nullptr);
  // Ascending ids: what the device sampler's edit lists merge without sorting.
  std::vector<int32_t> ids;
  for (const auto& [t, seen] : state.occurrences()) ids.push_back(t);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 5, 7}));
}

TEST(SequenceSamplingState, CopiesAreIndependentCompletions) {
  auto created = SequenceSamplingState::create(std::vector<int32_t>{1}, 4);
  ASSERT_TRUE(created);
  SequenceSamplingState first = created.value();
  SequenceSamplingState second = first;
  ASSERT_TRUE(first.append_output(3));
  EXPECT_EQ(first.num_generated(), 1);
  EXPECT_EQ(second.num_generated(), 0);
  EXPECT_EQ(second.find(3), nullptr);
  ASSERT_NE(first.find(3), nullptr);
  EXPECT_EQ(first.find(3)->output_count, 1);
}

TEST(SequenceSamplingState, RejectsIdsOutsideTheVocabulary) {
  auto bad_prompt = SequenceSamplingState::create(std::vector<int32_t>{1, 4}, 4);
  ASSERT_FALSE(bad_prompt);
  EXPECT_EQ(bad_prompt.error().code, Code::kInvalidArgument);
  EXPECT_NE(bad_prompt.error().message.find("prompt token 4 at position 1"), std::string::npos);

  auto state = SequenceSamplingState::create({}, 4).value();
  auto bad_output = state.append_output(-1);
  ASSERT_FALSE(bad_output);
  EXPECT_EQ(state.num_generated(), 0);
  EXPECT_FALSE(SequenceSamplingState::create({}, 0));
}

}  // namespace
}  // namespace deepinfer
