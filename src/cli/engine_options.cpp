#include "cli/engine_options.h"

#include "cli/cli_util.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace deepinfer::cli {

void EngineOptions::add_to(CLI::App& cmd) {
  const char* env = std::getenv("DEEPINFER_MODEL");
  model = env ? env : DEEPINFER_DEFAULT_MODEL;
  cmd.add_option("--model", model, "Model directory (default: $DEEPINFER_MODEL, else the bundled demo model)")->capture_default_str();
  cmd.add_option("--device", device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd.add_option("--threads", threads, "CPU threads (0: one per core)")->check(CLI::NonNegativeNumber);
  cmd.add_flag("--dummy-weights", dummy_weights, "Random weights from the model's config alone (no checkpoint; output is noise)");
  cmd.add_option("--temperature", temperature, "Sampling temperature; 0 = greedy")->group("Sampling");
  cmd.add_option("--top-k", top_k, "Keep the k most likely tokens (0: off)")->group("Sampling");
  cmd.add_option("--top-p", top_p, "Nucleus sampling mass in (0, 1]")->group("Sampling");
  cmd.add_option("--min-p", min_p, "Drop tokens below min_p times the top probability")->group("Sampling");
  cmd.add_option("--repetition-penalty", repetition_penalty, "Penalty for tokens of the prompt and output (1: off)")->group("Sampling");
  cmd.add_option("--presence-penalty", presence_penalty, "Penalty for tokens already generated, in [-2, 2]")->group("Sampling");
  cmd.add_option("--frequency-penalty", frequency_penalty, "Penalty per occurrence in the output, in [-2, 2]")->group("Sampling");
  cmd.add_option("--max-tokens", max_tokens, "Most tokens to generate")->group("Sampling");
  cmd.add_option("--min-tokens", min_tokens, "Fewest tokens before EOS or a stop may end generation")->group("Sampling");
  cmd.add_option("--n", n, "Completions to generate")->group("Sampling");
  cmd.add_option("--seed", seed, "Seed (the same seed repeats the output exactly)")->group("Sampling");
  cmd.add_option("--stop", stop, "Stop string (repeatable)")->group("Sampling");
  cmd.add_option("--stop-token", stop_tokens, "Stop token id (repeatable)")->group("Sampling");
  cmd.add_flag("--ignore-eos", ignore_eos, "Do not stop at end-of-sequence tokens")->group("Sampling");
  cmd.add_option("--logprobs", logprobs, "Report the top-N logprobs of each token (with --json)")->group("Sampling");
  cmd.add_flag("--json", json, "Print one JSON object per event instead of text");
  auto* re = cmd.add_option("--regex", regex, "Constrain the output to match this regular expression")->group("Structured output");
  auto* js = cmd.add_option("--json-schema", json_schema_file, "Constrain the output to a JSON Schema (file)")
                 ->check(CLI::ExistingFile)->group("Structured output");
  auto* eb = cmd.add_option("--ebnf", ebnf_file, "Constrain the output to an EBNF/GBNF grammar (file, rule root)")
                 ->check(CLI::ExistingFile)->group("Structured output");
  re->excludes(js)->excludes(eb);
  js->excludes(eb);
  cmd.add_flag("--compact-json", compact_json, "With --json-schema: no whitespace between JSON tokens")->group("Structured output");
}

Result<std::shared_ptr<Engine>> EngineOptions::open_engine() const {
  EngineConfig cfg;
  cfg.model_path = model;
  cfg.device = device == "cpu" ? Device::kCpu : device == "cuda" ? Device::kCuda : Device::kAuto;
  cfg.threads = threads;
  cfg.dummy_weights = dummy_weights;
  std::fprintf(stderr, "loading %s ...", model.c_str());
  std::fflush(stderr);
  auto t0 = std::chrono::steady_clock::now();
  auto engine = Engine::create(cfg);
  if (!engine) {
    std::fprintf(stderr, " failed\n");
    return engine;
  }
  const auto& c = engine.value()->model_config();
  std::fprintf(stderr, " %d layers, hidden %d, vocab %d, %.2f s\n", c.num_layers, c.hidden_size, c.vocab_size,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return engine;
}

SamplingParams EngineOptions::sampling(const Engine& engine) const {
  SamplingParams p = engine.sampling_defaults();
  if (temperature) p.temperature = *temperature;
  if (top_k) p.top_k = *top_k;
  if (top_p) p.top_p = *top_p;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
  if (max_tokens) p.max_tokens = *max_tokens;
  if (min_tokens) p.min_tokens = *min_tokens;
  if (n) p.n = *n;
  if (seed) p.seed = *seed;
  if (logprobs) p.logprobs = *logprobs;
  p.stop = stop;
  p.stop_token_ids = stop_tokens;
  p.ignore_eos = ignore_eos;
  return p;
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> EngineOptions::grammar(Engine& engine) const {
  grammar::GrammarOptions options;
  if (compact_json) options.whitespace = grammar::Whitespace::kCompact;
  if (!regex.empty()) return engine.compile_grammar(grammar::GrammarKind::kRegex, regex, options);
  if (!json_schema_file.empty()) {
    DI_TRY(spec, read_input_file(json_schema_file));
    return engine.compile_grammar(grammar::GrammarKind::kJsonSchema, spec, options);
  }
  if (!ebnf_file.empty()) {
    DI_TRY(spec, read_input_file(ebnf_file));
    return engine.compile_grammar(grammar::GrammarKind::kEbnf, spec, options);
  }
  return std::shared_ptr<const grammar::CompiledGrammar>();
}

namespace {

const char* kind_name(Event::Kind k) {
  switch (k) {
    case Event::Kind::kTokens: return "tokens";
    case Event::Kind::kFinished: return "finished";
    case Event::Kind::kPromptLogprobs: return "prompt_logprobs";
  }
  return "?";
}

nlohmann::json to_json(const Event& e) {
  nlohmann::json j = {{"event", kind_name(e.kind)}, {"completion", e.completion}, {"tokens", e.tokens}, {"text", e.text}};
  if (e.has_logprobs) {
    nlohmann::json lps = nlohmann::json::array();
    for (const auto& lp : e.logprobs) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& t : lp.top) top.push_back({{"token", t.token}, {"logprob", t.logprob}});
      lps.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"rank", lp.rank}, {"top", top}});
    }
    j["logprobs"] = lps;
  }
  if (e.kind == Event::Kind::kFinished) {
    j["finish_reason"] = e.reason ? finish_reason_name(*e.reason) : "";
    j["usage"] = {{"prompt_tokens", e.prompt_tokens}, {"completion_tokens", e.completion_tokens}, {"cached_tokens", e.cached_tokens}};
    j["seed"] = e.seed;
    if (e.error) j["error"] = e.error->message;
  }
  return j;
}

}  // namespace

Result<void> stream_events(Session& session, bool json) {
  std::optional<Error> failure;
  int last_completion = 0;
  for (;;) {
    auto polled = session.poll(-1);
    if (!polled) {
      if (polled.error().code == Code::kState) break;  // the generation ended
      return polled.error();
    }
    const Event& e = *polled.value();
    if (json) {
      std::printf("%s\n", to_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (e.kind != Event::Kind::kPromptLogprobs) {
      if (e.completion != last_completion) {
        std::printf("\n--- completion %d ---\n", e.completion);
        last_completion = e.completion;
      }
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
    }
    std::fflush(stdout);
    if (e.error) failure = e.error;
  }
  if (!json) std::printf("\n");
  if (failure) return *failure;
  return ok();
}

}  // namespace deepinfer::cli
