#include "grammar/compiled_grammar.h"

#include <mutex>

namespace deepinfer::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, TerminalMaskTable& terminals)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  terminal_masks_.reserve(grammar_.num_terminals());
  for (uint32_t t = 0; t < grammar_.num_terminals(); ++t) {
    terminal_masks_.push_back(terminals.terminal(grammar_.terminal_ptr(t), grammar_.counted(t)));
  }
}

const CoreMask& CompiledGrammar::core_mask(uint32_t core, uint32_t state, uint32_t count, EarleyChart& scratch) const {
  const TerminalMasks& masks = *terminal_masks_[grammar_.core_symbol(core)];
  CoreKey key{core, state, masks.window(count)};
  {
    std::shared_lock lock(core_mutex_);
    auto it = core_masks_.find(key);
    if (it != core_masks_.end()) return *it->second;
  }
  const TerminalStateMask& tm = masks.state_mask(state, count);
  auto computed = std::make_unique<CoreMask>(compute_core_mask(core, tm, *vocab_, scratch));
  std::unique_lock lock(core_mutex_);
  auto [it, inserted] = core_masks_.emplace(key, std::move(computed));
  return *it->second;
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
