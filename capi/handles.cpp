#include "handles.h"

namespace deepinfer::capi {

// Function-local statics: constructed on first use, so handles work from static initialisers too.
ConfigTable& configs() { static ConfigTable t; return t; }
EngineTable& engines() { static EngineTable t; return t; }
SamplingTable& samplings() { static SamplingTable t; return t; }
SessionTable& sessions() { static SessionTable t; return t; }
EventTable& events() { static EventTable t; return t; }
GrammarTable& grammars() { static GrammarTable t; return t; }
TokenizerTable& tokenizers() { static TokenizerTable t; return t; }
MatcherTable& matchers() { static MatcherTable t; return t; }

}  // namespace deepinfer::capi
