#include "cli/engine_options.h"

#include "cli/cli_util.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace deepinfer::cli {

using abi::check;

void EngineOptions::add_to(CLI::App& cmd) {
  const char* env = std::getenv("DEEPINFER_MODEL");
  model = env ? env : DEEPINFER_DEFAULT_MODEL;
  cmd.add_option("--model", model, "Model directory (default: $DEEPINFER_MODEL, else the bundled demo model)")->capture_default_str();
  cmd.add_option("--device", device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  cmd.add_option("--threads", threads, "CPU threads (0: one per core)")->check(CLI::Range(0, 4096));
  cmd.add_flag("--dummy-weights", dummy_weights, "Random weights from the model's config alone (no checkpoint; output is noise)");
  cmd.add_flag("--batch-invariant", batch_invariant,
               "Each sequence's output the same whatever else runs beside it (option batch_invariant; CUDA: slower kernels)");
  cmd.add_option("--option", options, "Engine option key=value (repeatable; `deepinfer options` lists them; also $DEEPINFER_OPTIONS)");
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
  cmd.add_option("--first-completion", first_completion, "Random stream of the first completion (replays completion i of an earlier run)")
      ->group("Sampling");
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

namespace {

struct LoadLine {
  bool tty = isatty(STDERR_FILENO) != 0;
  int last_percent = -1;
};

int32_t show_progress(void* user, uint64_t done, uint64_t total) {
  auto* line = static_cast<LoadLine*>(user);
  if (!line->tty || total == 0) return 0;
  const int percent = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
  if (percent != line->last_percent) {
    std::fprintf(stderr, "\rloading %3d%% (%.2f of %.2f GB)", percent, done / 1e9, total / 1e9);
    std::fflush(stderr);
    line->last_percent = percent;
  }
  return 0;
}

Result<void> set_option(di_engine_config* cfg, const std::string& key, const std::string& value) {
  return check(di_engine_config_set_option(cfg, key.data(), key.size(), value.data(), value.size()));
}

}  // namespace

Result<abi::Engine> EngineOptions::open_engine() const {
  di_engine_config* raw = nullptr;
  DI_TRYV(check(di_engine_config_create(&raw)));
  abi::Config cfg(raw);
  DI_TRYV(check(di_engine_config_set_model_path(raw, model.data(), model.size())));
  DI_TRYV(check(di_engine_config_set_device(raw, device == "cpu" ? DI_DEVICE_CPU : device == "cuda" ? DI_DEVICE_CUDA : DI_DEVICE_AUTO)));
  DI_TRYV(check(di_engine_config_set_threads(raw, threads)));
  for (const auto& [key, value] : options_from_env()) {
    DI_TRYV(set_option(raw, key, value));
  }
  for (const std::string& kv : options) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return make_error(Code::kInvalidArgument, "--option {}: expected key=value", kv);
    DI_TRYV(set_option(raw, kv.substr(0, eq), kv.substr(eq + 1)));
  }
  if (dummy_weights) {
    DI_TRYV(set_option(raw, "dummy_weights", "1"));
  }
  if (batch_invariant) {
    DI_TRYV(set_option(raw, "batch_invariant", "1"));
  }
  LoadLine line;
  DI_TRYV(check(di_engine_config_set_progress_callback(raw, show_progress, &line)));
  std::fprintf(stderr, "loading %s ...", model.c_str());
  std::fflush(stderr);
  const auto t0 = std::chrono::steady_clock::now();
  di_engine* engine = nullptr;
  auto created = check(di_engine_create(raw, &engine));
  if (line.tty && line.last_percent >= 0) std::fprintf(stderr, "\rloading %s ...", model.c_str());
  if (!created) {
    std::fprintf(stderr, " failed\n");
    return created.error();
  }
  abi::Engine held(engine);
  int64_t layers = 0, hidden = 0;
  int32_t vocab = 0;
  di_device dev = DI_DEVICE_CPU;
  DI_TRYV(check(di_engine_model_info(engine, DI_MODEL_LAYERS, &layers)));
  DI_TRYV(check(di_engine_model_info(engine, DI_MODEL_HIDDEN_SIZE, &hidden)));
  DI_TRYV(check(di_engine_vocab_size(engine, &vocab)));
  DI_TRYV(check(di_engine_device(engine, &dev)));
  std::fprintf(stderr, " %lld layers, hidden %lld, vocab %d on %s, %.2f s\n", static_cast<long long>(layers),
               static_cast<long long>(hidden), vocab, dev == DI_DEVICE_CUDA ? "cuda" : "cpu",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return held;
}

Result<abi::Sampling> EngineOptions::sampling(const di_engine* engine) const {
  di_sampling* raw = nullptr;
  DI_TRYV(check(di_engine_sampling_defaults(engine, &raw)));
  abi::Sampling sp(raw);
  if (temperature) {
    DI_TRYV(check(di_sampling_set_temperature(raw, *temperature)));
  }
  if (top_k) {
    DI_TRYV(check(di_sampling_set_top_k(raw, *top_k)));
  }
  if (top_p) {
    DI_TRYV(check(di_sampling_set_top_p(raw, *top_p)));
  }
  if (min_p) {
    DI_TRYV(check(di_sampling_set_min_p(raw, *min_p)));
  }
  if (repetition_penalty) {
    DI_TRYV(check(di_sampling_set_repetition_penalty(raw, *repetition_penalty)));
  }
  if (presence_penalty) {
    DI_TRYV(check(di_sampling_set_presence_penalty(raw, *presence_penalty)));
  }
  if (frequency_penalty) {
    DI_TRYV(check(di_sampling_set_frequency_penalty(raw, *frequency_penalty)));
  }
  if (max_tokens) {
    DI_TRYV(check(di_sampling_set_max_tokens(raw, *max_tokens)));
  }
  if (min_tokens) {
    DI_TRYV(check(di_sampling_set_min_tokens(raw, *min_tokens)));
  }
  if (n) {
    DI_TRYV(check(di_sampling_set_n(raw, *n)));
  }
  if (first_completion) {
    DI_TRYV(check(di_sampling_set_first_completion(raw, *first_completion)));
  }
  if (seed) {
    DI_TRYV(check(di_sampling_set_seed(raw, *seed)));
  }
  if (logprobs) {
    DI_TRYV(check(di_sampling_set_logprobs(raw, *logprobs)));
  }
  for (const std::string& s : stop) {
    DI_TRYV(check(di_sampling_add_stop_string(raw, s.data(), s.size())));
  }
  DI_TRYV(check(di_sampling_set_stop_tokens(raw, stop_tokens.data(), stop_tokens.size())));
  DI_TRYV(check(di_sampling_set_ignore_eos(raw, ignore_eos ? 1 : 0)));
  return sp;
}

Result<abi::Grammar> EngineOptions::grammar(const di_engine* engine) const {
  di_grammar_kind kind = 0;
  std::string spec;
  if (!regex.empty()) {
    kind = DI_GRAMMAR_REGEX;
    spec = regex;
  } else if (!json_schema_file.empty() || !ebnf_file.empty()) {
    kind = json_schema_file.empty() ? DI_GRAMMAR_EBNF : DI_GRAMMAR_JSON_SCHEMA;
    DI_TRY(text, read_input_file(json_schema_file.empty() ? ebnf_file : json_schema_file));
    spec = std::move(text);
  } else {
    return abi::Grammar();
  }
  di_grammar* g = nullptr;
  DI_TRYV(check(di_grammar_compile_options(engine, kind, spec.data(), spec.size(), compact_json ? DI_GRAMMAR_COMPACT_WHITESPACE : 0, 0, &g)));
  return abi::Grammar(g);
}

namespace {

const char* kind_name(di_event_type k) {
  switch (k) {
    case DI_EVENT_TOKENS: return "tokens";
    case DI_EVENT_FINISHED: return "finished";
    case DI_EVENT_PROMPT_LOGPROBS: return "prompt_logprobs";
    case DI_EVENT_DONE: return "done";
    default: return "unknown";
  }
}

const char* finish_name(di_finish_reason r) {
  switch (r) {
    case DI_FINISH_STOP: return "stop";
    case DI_FINISH_LENGTH: return "length";
    case DI_FINISH_CANCELLED: return "cancelled";
    case DI_FINISH_ERROR: return "error";
    default: return "";
  }
}

// One event as JSON, read through the ABI's views.
Result<nlohmann::json> to_json(const di_event* ev, di_event_type kind) {
  int32_t completion = 0;
  const int32_t* ids = nullptr;
  const char* text = nullptr;
  size_t n_ids = 0, n_text = 0;
  DI_TRYV(check(di_event_completion(ev, &completion)));
  DI_TRYV(check(di_event_tokens_view(ev, &ids, &n_ids)));
  DI_TRYV(check(di_event_text_view(ev, &text, &n_text)));
  nlohmann::json j = {{"event", kind_name(kind)},
                      {"completion", completion},
                      {"tokens", std::vector<int32_t>(ids, ids + n_ids)},
                      {"text", std::string(text, n_text)}};
  const float *lp = nullptr, *top_lp = nullptr;
  const int32_t *ranks = nullptr, *top_ids = nullptr;
  size_t n = 0, k = 0;
  di_error* err = di_event_logprobs_view(ev, &lp, &ranks, &top_ids, &top_lp, &n, &k);
  if (!err) {
    nlohmann::json lps = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      nlohmann::json top = nlohmann::json::array();
      for (size_t t = 0; t < k && top_ids[i * k + t] >= 0; ++t) top.push_back({{"token", top_ids[i * k + t]}, {"logprob", top_lp[i * k + t]}});
      lps.push_back({{"token", i < n_ids ? ids[i] : -1}, {"logprob", lp[i]}, {"rank", ranks[i]}, {"top", top}});
    }
    j["logprobs"] = lps;
  } else if (di_error_code(err) != DI_ERR_STATE) {
    return check(err).error();
  } else {
    di_error_free(err);
  }
  if (kind == DI_EVENT_FINISHED) {
    di_finish_reason reason = DI_FINISH_NONE;
    uint64_t prompt = 0, generated = 0, cached = 0, seed = 0;
    DI_TRYV(check(di_event_finish_reason(ev, &reason)));
    DI_TRYV(check(di_event_usage(ev, &prompt, &generated, &cached)));
    DI_TRYV(check(di_event_seed(ev, &seed)));
    j["finish_reason"] = finish_name(reason);
    j["usage"] = {{"prompt_tokens", prompt}, {"completion_tokens", generated}, {"cached_tokens", cached}};
    j["seed"] = seed;
    di_error* failure = nullptr;
    DI_TRYV(check(di_event_error(ev, &failure)));
    if (failure) {
      j["error"] = di_error_message(failure);
      di_error_free(failure);
    }
  }
  return j;
}

}  // namespace

Result<void> stream_events(di_session* session, bool json) {
  std::optional<Error> failure;
  int32_t last_completion = 0;
  for (;;) {
    di_event* raw = nullptr;
    DI_TRYV(check(di_session_poll(session, -1, &raw)));
    abi::Event ev(raw);
    di_event_type kind = 0;
    DI_TRYV(check(di_event_kind(raw, &kind)));
    if (kind == DI_EVENT_DONE) break;
    if (json) {
      DI_TRY(j, to_json(raw, kind));
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (kind == DI_EVENT_TOKENS) {
      int32_t completion = 0;
      const char* text = nullptr;
      size_t n = 0;
      DI_TRYV(check(di_event_completion(raw, &completion)));
      DI_TRYV(check(di_event_text_view(raw, &text, &n)));
      if (completion != last_completion) {
        std::printf("\n--- completion %d ---\n", completion);
        last_completion = completion;
      }
      std::fwrite(text, 1, n, stdout);
    }
    std::fflush(stdout);
    if (kind == DI_EVENT_FINISHED) {
      di_error* e = nullptr;
      DI_TRYV(check(di_event_error(raw, &e)));
      if (e) failure = check(e).error();
    }
  }
  if (!json) std::printf("\n");
  if (failure) return *failure;
  return ok();
}

}  // namespace deepinfer::cli
