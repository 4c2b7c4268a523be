// di_engine_config and di_engine.
#include "handles.h"

using namespace deepinfer;
using namespace deepinfer::capi;

namespace {

Result<std::shared_ptr<EngineConfig>> config_of(const di_engine_config* cfg) {
  auto c = configs().get(cfg);
  if (!c) return invalid_handle("engine config");
  return c;
}

Result<std::shared_ptr<Engine>> engine_of(const di_engine* engine) {
  auto e = engines().get(engine);
  if (!e) return invalid_handle("engine");
  if (e->forked()) return Error{Code::kClosed, "the engine belongs to the parent of this fork"};
  return e;
}

template <class F>
di_error* with_config(di_engine_config* cfg, F&& f) {
  return guard([&]() -> Result<void> {
    DI_TRY(c, config_of(cfg));
    return f(*c);
  });
}

}  // namespace

extern "C" {

di_error* di_engine_config_create(di_engine_config** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = configs().add<di_engine_config>(std::make_shared<EngineConfig>());
    return ok();
  });
}

void di_engine_config_free(di_engine_config* cfg) { configs().remove(cfg); }

di_error* di_engine_config_set_model_path(di_engine_config* cfg, const char* path, size_t len) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    DI_TRYV(check_in(path, len, "path"));
    if (len == 0) return make_error(Code::kInvalidArgument, "the model path is empty");
    c.model_path.assign(path, len);
    return ok();
  });
}

di_error* di_engine_config_set_device(di_engine_config* cfg, di_device device) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (device != DI_DEVICE_AUTO && device != DI_DEVICE_CPU && device != DI_DEVICE_CUDA)
      return make_error(Code::kInvalidArgument, "device {} is not one of DI_DEVICE_*", device);
    c.device = device == DI_DEVICE_CPU ? Device::kCpu : device == DI_DEVICE_CUDA ? Device::kCuda : Device::kAuto;
    return ok();
  });
}

di_error* di_engine_config_set_threads(di_engine_config* cfg, int32_t n) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (n < 0 || n > 4096) return make_error(Code::kInvalidArgument, "threads={} is outside [0, 4096]", n);
    c.threads = n;
    return ok();
  });
}

di_error* di_engine_config_set_max_sequences(di_engine_config* cfg, int32_t n) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (n < 1 || n > 65536) return make_error(Code::kInvalidArgument, "max_sequences={} is outside [1, 65536]", n);
    c.max_sequences = n;
    return ok();
  });
}

di_error* di_engine_config_set_max_context(di_engine_config* cfg, int64_t tokens) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (tokens < 0) return make_error(Code::kInvalidArgument, "max_context={} must not be negative", tokens);
    c.max_context = tokens;
    return ok();
  });
}

di_error* di_engine_config_set_state_memory(di_engine_config* cfg, uint64_t bytes) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    c.state_memory = bytes;
    return ok();
  });
}

di_error* di_engine_config_set_state_memory_fraction(di_engine_config* cfg, double fraction) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (!(fraction > 0 && fraction <= 1)) return make_error(Code::kInvalidArgument, "state_memory_fraction={} is outside (0, 1]", fraction);
    c.state_memory_fraction = fraction;
    return ok();
  });
}

di_error* di_engine_config_set_max_batched_tokens(di_engine_config* cfg, int32_t n) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (n < 1) return make_error(Code::kInvalidArgument, "max_batched_tokens={} must be at least 1", n);
    c.max_batched_tokens = n;
    return ok();
  });
}

di_error* di_engine_config_set_seed(di_engine_config* cfg, uint64_t seed) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    c.seed = seed;
    return ok();
  });
}

di_error* di_engine_config_set_option(di_engine_config* cfg, const char* key, size_t key_len, const char* value, size_t value_len) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    DI_TRYV(check_in(key, key_len, "key"));
    DI_TRYV(check_in(value, value_len, "value"));
    return set_engine_option(c, std::string_view(key ? key : "", key_len), std::string_view(value ? value : "", value_len));
  });
}

di_error* di_engine_config_set_progress_callback(di_engine_config* cfg, di_progress_callback fn, void* user) {
  return with_config(cfg, [&](EngineConfig& c) -> Result<void> {
    if (!fn) {
      c.progress = nullptr;
      return ok();
    }
    c.progress = [fn, user](uint64_t done, uint64_t total) { return fn(user, done, total) == 0; };
    return ok();
  });
}

di_error* di_engine_create(const di_engine_config* cfg, di_engine** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(c, config_of(cfg));
    DI_TRY(engine, Engine::create(*c));
    *out = engines().add<di_engine>(std::move(engine));
    stop_engines_at_exit();
    return ok();
  });
}

void di_engine_free(di_engine* engine) {
  auto e = engines().remove(engine);
  if (!e) return;
  if (e->forked()) return keep_until_exit(std::move(e));
  e->shutdown();
}

di_error* di_engine_vocab_size(const di_engine* engine, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = e->vocab_size();
    return ok();
  });
}

di_error* di_engine_max_context(const di_engine* engine, int64_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = e->max_context();
    return ok();
  });
}

di_error* di_engine_capacity_tokens(const di_engine* engine, int64_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = e->capacity_tokens();
    return ok();
  });
}

di_error* di_engine_eos_tokens(const di_engine* engine, int32_t* buf, size_t cap, size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(e, engine_of(engine));
    return copy_out(e->eos_ids().data(), e->eos_ids().size(), buf, cap, out_len);
  });
}

di_error* di_engine_device(const di_engine* engine, di_device* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = e->device() == Device::kCuda ? DI_DEVICE_CUDA : DI_DEVICE_CPU;
    return ok();
  });
}

di_error* di_engine_has_tokenizer(const di_engine* engine, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = e->has_tokenizer() ? 1 : 0;
    return ok();
  });
}

di_error* di_engine_model_info(const di_engine* engine, di_model_info key, int64_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    const ModelConfig& c = e->model_config();
    switch (key) {
      case DI_MODEL_LAYERS: *out = c.num_layers; break;
      case DI_MODEL_HIDDEN_SIZE: *out = c.hidden_size; break;
      case DI_MODEL_ATTENTION_HEADS: *out = c.num_heads; break;
      case DI_MODEL_ROUTED_EXPERTS: *out = c.num_experts; break;
      case DI_MODEL_EXPERTS_PER_TOKEN: *out = c.experts_per_token; break;
      case DI_MODEL_VOCAB_SIZE: *out = c.vocab_size; break;
      case DI_MODEL_MAX_POSITION: *out = c.max_position_embeddings; break;
      case DI_MODEL_PARAMETERS: *out = e->parameters(); break;
      case DI_MODEL_WEIGHT_BYTES: *out = static_cast<int64_t>(e->weight_bytes()); break;
      default: return make_error(Code::kInvalidArgument, "model info key {} is not one of DI_MODEL_*", key);
    }
    return ok();
  });
}

di_error* di_engine_weight_dtype(const di_engine* engine, char* buf, size_t cap, size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(e, engine_of(engine));
    const std::string& d = e->weight_dtype();
    return copy_out(d.data(), d.size(), buf, cap, out_len);
  });
}

di_error* di_engine_stats(const di_engine* engine, di_stats** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(e, engine_of(engine));
    *out = stats_snapshots().add<di_stats>(std::make_shared<const EngineStats>(e->stats()));
    return ok();
  });
}

di_error* di_stats_get(const di_stats* stats, di_stat key, uint64_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto s = stats_snapshots().get(stats);
    if (!s) return invalid_handle("stats");
    const uint64_t block_bytes = s->block_bytes;
    switch (key) {
      case DI_STAT_RUNNING_SEQUENCES: *out = s->running_sequences; break;
      case DI_STAT_WAITING_SEQUENCES: *out = s->waiting_sequences; break;
      case DI_STAT_RUNNING_GENERATIONS: *out = s->running_generations; break;
      case DI_STAT_RESIDENT_SESSIONS: *out = s->resident_sessions; break;
      case DI_STAT_STATE_BYTES_USED: *out = static_cast<uint64_t>(s->total_blocks - s->free_blocks) * block_bytes; break;
      case DI_STAT_STATE_BYTES_TOTAL: *out = static_cast<uint64_t>(s->total_blocks) * block_bytes; break;
      case DI_STAT_PROMPT_TOKENS: *out = s->prompt_tokens; break;
      case DI_STAT_GENERATED_TOKENS: *out = s->generated_tokens; break;
      case DI_STAT_STEPS: *out = s->steps; break;
      case DI_STAT_PREEMPTIONS: *out = s->preemptions; break;
      case DI_STAT_STEP_MICROSECONDS: *out = static_cast<uint64_t>(s->step_seconds * 1e6); break;
      default: return make_error(Code::kInvalidArgument, "stat key {} is not one of DI_STAT_*", key);
    }
    return ok();
  });
}

void di_stats_free(di_stats* stats) { stats_snapshots().remove(stats); }

di_error* di_engine_tokenize(const di_engine* engine, const char* text, size_t len, di_text_flags flags, int32_t* buf, size_t cap,
                             size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(e, engine_of(engine));
    DI_TRYV(check_in(text, len, "text"));
    if (flags & ~uint32_t{DI_TEXT_SPECIAL}) return make_error(Code::kInvalidArgument, "unknown text flags {:#x}", flags);
    DI_TRY(tok, e->tokenizer());
    auto mode = (flags & DI_TEXT_SPECIAL) ? text::EncodeMode::kRecognizeAddedTokens : text::EncodeMode::kPlainText;
    DI_TRY(ids, tok->encode(std::string_view(text ? text : "", len), mode));
    return copy_out(ids.data(), ids.size(), buf, cap, out_len);
  });
}

di_error* di_engine_detokenize(const di_engine* engine, const int32_t* ids, size_t n, di_detok_flags flags, char* buf, size_t cap,
                               size_t* out_len) {
  return guard([&]() -> Result<void> {
    DI_TRY(e, engine_of(engine));
    DI_TRYV(check_in(ids, n, "ids"));
    if (flags & ~uint32_t{DI_DETOK_SKIP_SPECIAL}) return make_error(Code::kInvalidArgument, "unknown detokenize flags {:#x}", flags);
    DI_TRY(tok, e->tokenizer());
    DI_TRY(textout, tok->decode(std::span<const int32_t>(ids, n), (flags & DI_DETOK_SKIP_SPECIAL) != 0));
    return copy_out(textout.data(), textout.size(), buf, cap, out_len);
  });
}

}  // extern "C"
