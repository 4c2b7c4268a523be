#include "engine/completion.h"

namespace deepinfer {

Result<void> Completion::start(int32_t i, const std::vector<int32_t>& context, int32_t vocab, const SamplingParams& params,
                               const text::Tokenizer* tokenizer, const std::shared_ptr<const grammar::CompiledGrammar>& grammar) {
  index = i;
  DI_TRY(state, SequenceSamplingState::create(context, vocab));
  sampling = std::move(state);
  if (tokenizer) detok.emplace(*tokenizer, params.skip_special_tokens);
  if (!params.stop.empty()) stops.emplace(params.stop, params.include_stop_str_in_output);
  to_feed = context;
  if (grammar) matcher.emplace(grammar);
  return ok();
}

void Completion::advance(int32_t n) {
  processed.insert(processed.end(), to_feed.begin(), to_feed.begin() + n);
  to_feed.erase(to_feed.begin(), to_feed.begin() + n);
}

void Completion::preempt(SequenceTable& table) {
  close_state(table);
  processed.insert(processed.end(), to_feed.begin(), to_feed.end());
  to_feed = std::move(processed);
  processed.clear();
  decoding = false;
}

void Completion::close_state(SequenceTable& table) {
  if (seq >= 0) table.close(seq);
  seq = -1;
}

std::string Completion::flush_text() {
  std::string tail;
  if (detok) tail = detok->flush();
  if (stops) tail = stops->finish(tail);
  return tail;
}

}  // namespace deepinfer
