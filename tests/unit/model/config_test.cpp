// config.json parsing: HF's folding of legacy keys, the rope tables HF computes, and clear errors.
#include "golden_fixture.h"
#include "model/config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace deepinfer {
namespace {

using json = nlohmann::json;

json base_config() {
  return json{{"model_type", "deepseek_v4"}, {"vocab_size", 100},   {"hidden_size", 32},  {"num_hidden_layers", 4},
              {"num_attention_heads", 2},    {"head_dim", 16},      {"q_lora_rank", 8},   {"o_groups", 2},
              {"o_lora_rank", 8},            {"index_head_dim", 16}, {"n_routed_experts", 4},
              {"num_experts_per_tok", 2},    {"partial_rotary_factor", 0.5}};
}

Result<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump(), "config.json"); }

TEST(ModelConfig, DefaultsFollowHf) {
  auto c = parse(base_config());
  ASSERT_TRUE(c) << c.error().message;
  // 2x HCA then alternating (HCA, CSA, ...); 3 hash layers by default.
  EXPECT_EQ(c.value().attention_types,
            (std::vector<AttentionType>{AttentionType::kHca, AttentionType::kHca, AttentionType::kHca, AttentionType::kCsa}));
  EXPECT_EQ(c.value().moe_routing,
            (std::vector<MoeRouting>{MoeRouting::kHash, MoeRouting::kHash, MoeRouting::kHash, MoeRouting::kLearned}));
  EXPECT_EQ(c.value().csa_rate, 4);
  EXPECT_EQ(c.value().hca_rate, 128);
  EXPECT_EQ(c.value().rope_dim(), 8);
  EXPECT_EQ(c.value().rope_main.theta, 10000.0);
  EXPECT_EQ(c.value().rope_compress.theta, 160000.0);
  EXPECT_EQ(c.value().eos_token_ids, std::vector<int>{1});
}

TEST(ModelConfig, FoldsLegacyKeysLikeHf) {
  json j = base_config();
  j.erase("partial_rotary_factor");
  j["compress_ratios"] = {4, 128, 0, 4, 0};  // trailing entry: the MTP layer, dropped
  j["compress_rate_csa"] = 2;
  j["compress_rate_hca"] = 8;
  j["num_hash_layers"] = 1;
  j["qk_rope_head_dim"] = 4;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 1024}};
  j["eos_token_id"] = {1, 7};
  auto c = parse(j);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c.value().attention_types, (std::vector<AttentionType>{AttentionType::kCsa, AttentionType::kHca,
                                                                   AttentionType::kSliding, AttentionType::kCsa}));
  EXPECT_EQ(c.value().moe_routing[0], MoeRouting::kHash);
  EXPECT_EQ(c.value().moe_routing[1], MoeRouting::kLearned);
  EXPECT_EQ(c.value().csa_rate, 2);
  EXPECT_EQ(c.value().hca_rate, 8);
  EXPECT_EQ(c.value().rope_dim(), 4);
  EXPECT_EQ(c.value().rope_main.type, RopeConfig::Type::kDefault);  // yarn applies to compressed layers only
  EXPECT_EQ(c.value().rope_compress.type, RopeConfig::Type::kYarn);
  EXPECT_EQ(c.value().rope_compress.attention_factor, 1.0);         // forced to 1 by V4
  EXPECT_EQ(c.value().eos_token_ids, (std::vector<int>{1, 7}));
}

// The inverse frequencies equal those HF computed for each fixture (recorded in meta.json).
TEST(ModelConfig, RopeTablesMatchHf) {
  for (const auto& name : testing::golden_fixture_names()) {
    const std::string dir = std::string(DI_GOLDEN_DIR) + "/models/" + name;
    auto c = ModelConfig::from_file(dir + "/checkpoint/config.json");
    ASSERT_TRUE(c) << c.error().message;
    json meta = json::parse(std::ifstream(dir + "/meta.json"));
    for (const char* kind : {"main", "compress"}) {
      auto ours = std::string(kind) == "main" ? c.value().rope_main.inv_freq() : c.value().rope_compress.inv_freq();
      auto theirs = meta["inv_freq"][kind].get<std::vector<float>>();
      ASSERT_EQ(ours.size(), theirs.size()) << name << " " << kind;
      for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], theirs[i], 1e-6 * theirs[i]) << name << " " << kind << " " << i;
    }
  }
}

TEST(ModelConfig, RejectsBadInputWithClearErrors) {
  struct Case {
    std::function<void(json&)> edit;
    Code code;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](json& j) { j["model_type"] = "llama"; }, Code::kUnsupported, "model_type \"llama\""},
      {[](json& j) { j.erase("model_type"); }, Code::kUnsupported, "model_type \"\""},
      {[](json& j) { j["hidden_size"] = -5; }, Code::kModelFormat, "\"hidden_size\" = -5"},
      {[](json& j) { j["hidden_size"] = "big"; }, Code::kModelFormat, "\"hidden_size\" must be an integer"},
      {[](json& j) { j["num_experts_per_tok"] = 9; }, Code::kModelFormat, "exceeds n_routed_experts"},
      {[](json& j) { j["o_groups"] = 3; }, Code::kModelFormat, "\"o_groups\" = 3"},
      {[](json& j) { j["partial_rotary_factor"] = 0.2; }, Code::kModelFormat, "qk_rope_head_dim"},
      {[](json& j) { j["layer_types"] = {"sliding_attention"}; }, Code::kModelFormat, "1 layer types for 4 layers"},
      {[](json& j) { j["layer_types"] = {"x", "y", "z", "w"}; }, Code::kModelFormat, "unknown layer type \"x\""},
      {[](json& j) { j["compress_ratios"] = {0, 3, 0, 0}; }, Code::kModelFormat, "compress_ratios entry 3"},
      {[](json& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2}}; }, Code::kUnsupported, "rope type \"linear\""},
      {[](json& j) { j["num_key_value_heads"] = 8; }, Code::kUnsupported, "num_key_value_heads 8"},
      {[](json& j) { j["eos_token_id"] = 1000; }, Code::kModelFormat, "eos_token_id"},
      {[](json& j) { j["scoring_func"] = "relu"; }, Code::kUnsupported, "scoring_func \"relu\""},
  };
  for (const auto& tc : cases) {
    json j = base_config();
    tc.edit(j);
    auto c = parse(j);
    ASSERT_FALSE(c) << j.dump();
    EXPECT_EQ(c.error().code, tc.code) << c.error().message;
    EXPECT_NE(c.error().message.find(tc.message), std::string::npos) << c.error().message;
  }
  auto c = ModelConfig::from_json("{not json", "config.json");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, Code::kModelFormat);
}

}  // namespace
}  // namespace deepinfer
