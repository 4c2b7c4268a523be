#include "grammar/compiled_grammar.h"

#include <mutex>

namespace deepinfer::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, TerminalMaskTable& terminals)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), table_(terminals.shared_from_this()) {
  terminal_masks_.reserve(grammar_.num_terminals());
  for (uint32_t t = 0; t < grammar_.num_terminals(); ++t) {
    terminal_masks_.push_back(terminals.terminal(grammar_.terminal_ptr(t), grammar_.counted(t)));
  }
}

const CoreMask& CompiledGrammar::core_mask(uint32_t core, uint32_t state, uint32_t count, EarleyChart& scratch,
                                           const TerminalStateMask* exits) const {
  const TerminalMasks& masks = terminal_masks(core);
  CoreKey key{core, state, masks.window(count)};
  {
    std::shared_lock lock(core_mutex_);
    auto it = core_masks_.find(key);
    if (it != core_masks_.end()) return *it->second;
  }
  const TerminalStateMask& tm = exits ? *exits : masks.state_mask(state, count);
  auto computed = std::make_unique<CoreMask>(compute_core_mask(core, tm, *vocab_, scratch));
  std::unique_lock lock(core_mutex_);
  auto [it, inserted] = core_masks_.emplace(key, std::move(computed));
  return *it->second;
}

size_t CompiledGrammar::UnionHash::operator()(const std::vector<TerminalState>& parts) const {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [masks, state] : parts) h = (h ^ reinterpret_cast<uintptr_t>(masks) ^ (uint64_t{state} << 40)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

std::shared_ptr<const TerminalMasks> CompiledGrammar::union_terminal(const std::vector<TerminalState>& parts) const {
  {
    std::shared_lock lock(union_mutex_);
    auto it = unions_.find(parts);
    if (it != unions_.end()) return it->second;
  }
  std::vector<Dfa::Residual> residuals;
  for (const auto& [masks, state] : parts) residuals.push_back({masks->dfa().get(), state});
  std::shared_ptr<const TerminalMasks> masks;
  if (auto dfa = Dfa::unite_residuals(residuals, kMaxUnionStates)) {
    masks = table_->terminal(std::make_shared<const Dfa>(std::move(dfa.value())), nullptr);
  }
  std::unique_lock lock(union_mutex_);
  if (unions_.size() >= kMaxUnions) unions_.clear();
  return unions_.emplace(parts, std::move(masks)).first->second;
}

std::shared_ptr<const TokenSet> CompiledGrammar::find_state_mask(const ChartSignature& sig) const {
  std::shared_lock lock(state_mutex_);
  auto it = state_masks_.find(sig);
  return it == state_masks_.end() ? nullptr : it->second;
}

void CompiledGrammar::store_state_mask(const ChartSignature& sig, std::shared_ptr<const TokenSet> mask) const {
  size_t bytes = mask->memory_bytes() + 64;
  std::unique_lock lock(state_mutex_);
  if (state_mask_bytes_ + bytes > kMaxStateMaskBytes) {
    state_masks_.clear();
    state_mask_bytes_ = 0;
  }
  if (state_masks_.emplace(sig, std::move(mask)).second) state_mask_bytes_ += bytes;
}

}  // namespace deepinfer::grammar
