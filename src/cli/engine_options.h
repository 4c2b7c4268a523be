// Command-line flags shared by the commands that run the engine (generate, chat): the model, the
// device and every sampling parameter, and the event printers. Everything goes through the C ABI.
#pragma once

#include "cli/abi.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct EngineOptions {
  std::string model;
  std::string device = "auto";
  int threads = 0;
  bool dummy_weights = false;
  bool batch_invariant = false;      // --batch-invariant: the option batch_invariant=1
  std::vector<std::string> options;  // --option key=value (after $DEEPINFER_OPTIONS)
  // Sampling; unset flags keep the model's generation_config.json defaults.
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int> top_k, max_tokens, min_tokens, n, logprobs, first_completion;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_tokens;
  bool ignore_eos = false;
  bool json = false;
  // Structured output: one of a regular expression, a JSON Schema file or an EBNF (GBNF) file.
  std::string regex, json_schema_file, ebnf_file;
  bool compact_json = false;

  void add_to(CLI::App& cmd);
  Result<abi::Engine> open_engine() const;  // with a progress line on stderr
  Result<abi::Sampling> sampling(const di_engine* engine) const;
  // The grammar the flags ask for (null when none), compiled for the engine.
  Result<abi::Grammar> grammar(const di_engine* engine) const;
};

// Prints a session's events until its generation's DONE event: text to stdout as it comes (several
// completions are labelled), or one JSON object per event with --json. Returns the error of a
// completion that failed.
Result<void> stream_events(di_session* session, bool json);

}  // namespace deepinfer::cli
