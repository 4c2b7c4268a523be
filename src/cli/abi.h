// The command line's user-facing commands (generate, chat, tokenize, detokenize) are clients of the C
// ABI, like any program embedding the library: these RAII holders and the error bridge are all they
// share with it.
#pragma once

#include "deepinfer.h"
#include "util/result.h"

#include <memory>
#include <string>

namespace deepinfer::cli::abi {

// A di_error* as a Result (freeing the error).
inline Result<void> check(di_error* err) {
  if (!err) return ok();
  Error e{static_cast<Code>(di_error_code(err)), di_error_message(err)};
  di_error_free(err);
  return e;
}

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Config = std::unique_ptr<di_engine_config, Deleter<di_engine_config, di_engine_config_free>>;
using Engine = std::unique_ptr<di_engine, Deleter<di_engine, di_engine_free>>;
using Session = std::unique_ptr<di_session, Deleter<di_session, di_session_free>>;
using Sampling = std::unique_ptr<di_sampling, Deleter<di_sampling, di_sampling_free>>;
using Grammar = std::unique_ptr<di_grammar, Deleter<di_grammar, di_grammar_free>>;
using Event = std::unique_ptr<di_event, Deleter<di_event, di_event_free>>;
using Tokenizer = std::unique_ptr<di_tokenizer, Deleter<di_tokenizer, di_tokenizer_free>>;

}  // namespace deepinfer::cli::abi
