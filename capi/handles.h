// The handle tables of each ABI type (process-wide), and what lives in them.
#pragma once

#include "capi_internal.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/event.h"
#include "engine/event_queue.h"
#include "engine/session.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "sample/sampling_params.h"
#include "text/tokenizer.h"

namespace deepinfer::capi {

// di_sampling: the parameters and the (optional) grammar that constrains the output.
struct SamplingSpec {
  SamplingParams params;
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

// di_event: an event, with its logprobs also laid out flat for di_event_logprobs_view.
struct EventData {
  explicit EventData(Event&& e);
  Event event;
  size_t top_k = 0;  // stride of top_ids / top_logprobs
  std::vector<float> logprobs, top_logprobs;
  std::vector<int32_t> ranks, top_ids;
};

using ConfigTable = HandleTable<EngineConfig, 1>;
using EngineTable = HandleTable<Engine, 2>;
using SamplingTable = HandleTable<SamplingSpec, 3>;
using SessionTable = HandleTable<Session, 4>;
using EventTable = HandleTable<const EventData, 5>;
using GrammarTable = HandleTable<const grammar::CompiledGrammar, 6>;
using TokenizerTable = HandleTable<const text::Tokenizer, 7>;
using MatcherTable = HandleTable<grammar::Matcher, 8>;
using QueueTable = HandleTable<EventQueue, 9>;
using StatsTable = HandleTable<const EngineStats, 10>;

ConfigTable& configs();
EngineTable& engines();
SamplingTable& samplings();
SessionTable& sessions();
EventTable& events();
GrammarTable& grammars();
TokenizerTable& tokenizers();
MatcherTable& matchers();
QueueTable& queues();
StatsTable& stats_snapshots();

// A new di_event handle for an event.
di_event* event_handle(Event&& e);

// In a fork's child, objects whose threads or waiters were the parent's must not be destroyed
// (their destructors would join or wait for ever): the child keeps them until it exits.
void keep_until_exit(std::shared_ptr<const void> object);

// Called once an engine exists: arranges for open engines to stop at process exit (before the
// library's data and the CUDA runtime are torn down) without calling callbacks.
void stop_engines_at_exit();

}  // namespace deepinfer::capi
