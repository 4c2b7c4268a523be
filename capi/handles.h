// The handle tables of each ABI type (process-wide).
#pragma once

#include "capi_internal.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/event.h"
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

using ConfigTable = HandleTable<EngineConfig, 1>;
using EngineTable = HandleTable<Engine, 2>;
using SamplingTable = HandleTable<SamplingSpec, 3>;
using SessionTable = HandleTable<Session, 4>;
using EventTable = HandleTable<Event, 5>;
using GrammarTable = HandleTable<const grammar::CompiledGrammar, 6>;
using TokenizerTable = HandleTable<const text::Tokenizer, 7>;
using MatcherTable = HandleTable<grammar::Matcher, 8>;

ConfigTable& configs();
EngineTable& engines();
SamplingTable& samplings();
SessionTable& sessions();
EventTable& events();
GrammarTable& grammars();
TokenizerTable& tokenizers();
MatcherTable& matchers();

}  // namespace deepinfer::capi
