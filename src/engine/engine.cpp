#include "engine/engine.h"

#include "backend/backend.h"
#include "engine/engine_core.h"
#include "engine/generation.h"
#include "engine/grammar_vocabulary.h"
#include "engine/model_runner.h"
#include "grammar/grammar_compiler.h"
#include "model/deepseek_v4.h"
#include "model/model_cost.h"
#include "sample/sampling_rng.h"
#include "util/log.h"
#include "util/process.h"

#include <algorithm>
#include <exception>
#include <filesystem>

namespace deepinfer {

Engine::Engine(const EngineConfig& config) : config_(config), fork_generation_(fork_generation()) {}

Engine::~Engine() {
  if (forked()) {
    // The step thread is the parent's: a joinable std::thread must not be destroyed, nor joined here.
    if (thread_.joinable()) thread_.detach();
    return;
  }
  shutdown();
}

Result<std::shared_ptr<Engine>> Engine::create(const EngineConfig& config) {
  if (config.model_path.empty()) return make_error(Code::kInvalidArgument, "no model path was given");
  if (config.max_sequences <= 0 || config.max_sequences > 65536)
    return make_error(Code::kInvalidArgument, "max_sequences={} is outside [1, 65536]", config.max_sequences);
  if (config.max_batched_tokens <= 0) return make_error(Code::kInvalidArgument, "max_batched_tokens={} must be positive", config.max_batched_tokens);
  if (config.max_context < 0) return make_error(Code::kInvalidArgument, "max_context={} must not be negative", config.max_context);
  if (config.threads < 0) return make_error(Code::kInvalidArgument, "threads={} must not be negative", config.threads);
  if (!(config.state_memory_fraction > 0 && config.state_memory_fraction <= 1))
    return make_error(Code::kInvalidArgument, "state_memory_fraction={} is outside (0, 1]", config.state_memory_fraction);
  std::shared_ptr<Engine> engine(new Engine(config));
  DI_TRYV(engine->start());
  return engine;
}

Result<void> Engine::open_backend() {
  if (config_.device != Device::kCpu) {
    auto cuda = make_cuda_backend(config_.backend, config_.cuda_module);
    if (cuda) {
      backend_ = std::move(cuda).value();
      device_ = Device::kCuda;
      return ok();
    }
    if (config_.device == Device::kCuda) return cuda.error();
    log(LogLevel::kInfo, "no CUDA backend ({}); running on the CPU", cuda.error().message);
  }
  DI_TRY(cpu, make_cpu_backend(config_.threads));
  backend_ = std::move(cpu);
  device_ = Device::kCpu;
  return ok();
}

Result<void> Engine::start() {
  namespace fs = std::filesystem;
  const fs::path dir(config_.model_path);
  DI_TRYV(open_backend());
  log(LogLevel::kInfo, "loading model {} on {}", config_.model_path, backend_->name());
  if (config_.dummy_weights) {
    DI_TRY(mc, DeepseekV4::read_config(config_.model_path));
    DI_TRY(model, DeepseekV4::random(mc, *backend_, 0));
    model_ = std::move(model);
  } else {
    DI_TRY(model, DeepseekV4::load(config_.model_path, *backend_, config_.progress));
    model_ = std::move(model);
  }
  model_config_ = model_->config();
  parameters_ = model_->parameters();
  weight_dtype_ = backend_->weight_dtype();
  const WeightStorage storage = weight_dtype_ == "native" ? WeightStorage::kNative : WeightStorage::kBf16;
  weight_bytes_ = backend_->weight_bytes() >= 0 ? static_cast<uint64_t>(backend_->weight_bytes())
                  : weight_dtype_ == "f32"      ? static_cast<uint64_t>(parameters_) * 4
                                                : static_cast<uint64_t>(ModelCost(model_config_, storage).stored_weight_bytes());

  DI_TRY(tok, text::Tokenizer::from_model_dir(dir));
  if (tok) {
    tokenizer_ = std::move(*tok);
  } else {
    log(LogLevel::kInfo, "{} has no tokenizer.json: token ids in, token ids out", config_.model_path);
  }
  DI_TRY(defaults, load_generation_defaults(config_.model_path));
  defaults_ = std::move(defaults);
  eos_ids_ = defaults_.eos_ids.empty() ? std::vector<int32_t>(model_config_.eos_token_ids.begin(), model_config_.eos_token_ids.end())
                                       : defaults_.eos_ids;
  for (int32_t e : eos_ids_)
    if (e < 0 || e >= model_config_.vocab_size)
      return make_error(Code::kModelFormat, "end-of-sequence id {} is outside the vocabulary", e);

  max_context_ = model_config_.max_position_embeddings;
  if (config_.max_context > 0) max_context_ = std::min<int64_t>(max_context_, config_.max_context);
  RunnerOptions ro;
  ro.max_sequences = config_.max_sequences;
  ro.state_bytes = static_cast<int64_t>(config_.state_memory);
  ro.max_context = std::min<int64_t>(max_context_, 4096);
  if (config_.state_memory == 0 && backend_->free_memory_bytes() > 0) {
    // A GPU: the block pool holds every sequence's whole context, as far as free memory allows.
    ro.max_context = max_context_;
    ro.free_memory_fraction = config_.state_memory_fraction;
  }
  DI_TRY(runner, ModelRunner::create(*model_, *backend_, ro));
  runner_ = std::move(runner);
  capacity_tokens_ = runner_->capacity_tokens();
  log(LogLevel::kInfo, "model state: {} sequences, {} tokens of context in {} blocks", config_.max_sequences, capacity_tokens_,
      runner_->pool().n_blocks());

  stats_.total_slots = stats_.free_slots = runner_->pool().n_slots();
  stats_.total_blocks = stats_.free_blocks = runner_->pool().n_blocks();
  stats_.block_tokens = runner_->layout().block_tokens;
  stats_.block_bytes = runner_->layout().block_floats * sizeof(float);
  EngineCoreOptions co;
  co.planner.max_batched_tokens = config_.max_batched_tokens;
  co.planner.vocab = model_config_.vocab_size;
  co.planner.tokenizer = tokenizer_ ? &*tokenizer_ : nullptr;
  co.planner.eos_ids = &eos_ids_;
  co.max_context = max_context_;
  co.sample_threads = static_cast<size_t>(config_.threads);
  co.sample_on_backend = !config_.host_sampling;
  co.mask_threads = std::max<size_t>(1, std::thread::hardware_concurrency() / 4);
  DI_TRY(core, EngineCore::create(*runner_, co));
  core_ = std::move(core);
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::exception& e) {  // no thread to be had: an error, as for the pools
    return make_error(Code::kOutOfMemory, "cannot start the engine thread: {}", e.what());
  }
  return ok();
}

bool Engine::close_loop() {
  if (forked()) return false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    closed_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return true;
}

void Engine::shutdown() {
  if (!close_loop()) return;
  cancel_all_generations();
  core_.reset();
  runner_.reset();
  model_.reset();
  backend_.reset();
}

void Engine::stop_at_exit() { close_loop(); }

void Engine::cancel_all_generations() {
  std::vector<std::unique_ptr<Generation>> left = std::move(inbox_);
  if (core_)
    for (auto& g : core_->take_active()) left.push_back(std::move(g));
  for (auto& g : left) OutputProcessor::deliver_cancelled(*g);
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Engine::forked() const { return fork_generation() != fork_generation_; }

bool Engine::closed() const {
  if (forked()) return true;
  std::lock_guard lock(mu_);
  return closed_;
}

Result<const text::Tokenizer*> Engine::tokenizer() const {
  if (!tokenizer_) return make_error(Code::kUnsupported, "the model directory {} has no tokenizer.json", config_.model_path);
  return &*tokenizer_;
}

Result<grammar::GrammarCompiler*> Engine::grammar_compiler() {
  std::lock_guard lock(grammar_mu_);
  if (!grammar_compiler_) {
    DI_TRY(tok, tokenizer());
    DI_TRY(vocab, grammar_vocabulary(*tok, model_config_.vocab_size, eos_ids_));
    grammar_compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(vocab));
  }
  return grammar_compiler_.get();
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> Engine::compile_grammar(grammar::GrammarKind kind, std::string_view spec,
                                                                                const grammar::GrammarOptions& options) {
  if (closed()) return make_error(Code::kClosed, "the engine was shut down");
  DI_TRY(compiler, grammar_compiler());
  return compiler->compile(kind, spec, options);
}

Result<void> Engine::submit(uint64_t owner, std::shared_ptr<EventSink> sink, std::vector<int32_t> context, SamplingParams params,
                            std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  if (forked()) return make_error(Code::kClosed, "the engine belongs to the parent of this fork");
  DI_TRYV(validate(params, model_config_.vocab_size));
  if (grammar) {
    DI_TRY(compiler, grammar_compiler());
    if (grammar->vocabulary().fingerprint() != compiler->vocabulary()->fingerprint())
      return make_error(Code::kInvalidArgument, "the grammar was compiled for another tokenizer or vocabulary");
  }
  // Stop strings match detokenized text: without a tokenizer they could never fire.
  if (!tokenizer_ && !params.stop.empty())
    return make_error(Code::kUnsupported, "stop strings need a tokenizer; the model directory {} has no tokenizer.json",
                      config_.model_path);
  if (context.empty()) return make_error(Code::kInvalidArgument, "the context is empty: add tokens, text or a message first");
  if (static_cast<int64_t>(context.size()) >= max_context_)
    return make_error(Code::kCapacity, "the context of {} tokens reaches the limit of {} tokens", context.size(), max_context_);
  if (static_cast<int64_t>(context.size()) + 1 > capacity_tokens_)
    return make_error(Code::kCapacity, "the context of {} tokens does not fit the state memory ({} tokens)", context.size(), capacity_tokens_);
  auto g = std::make_unique<Generation>();
  g->sink = std::move(sink);
  g->owner = owner;
  g->context = std::move(context);
  if (params.seed) {
    g->seed = *params.seed;
  } else if (!config_.seed) {
    DI_TRY(seed, fresh_seed());
    g->seed = seed;
  }
  g->params = std::move(params);
  g->grammar = std::move(grammar);
  std::lock_guard lock(mu_);
  if (closed_) return make_error(Code::kClosed, "the engine was shut down");
  g->arrival = next_generation_++;
  // Derived from the arrival number in the same critical section: concurrent submissions never
  // share a seed.
  if (!g->params.seed && config_.seed) g->seed = derive_seed(*config_.seed, g->arrival);
  inbox_.push_back(std::move(g));
  cv_.notify_all();
  return ok();
}

void Engine::release_state(uint64_t owner) {
  std::lock_guard lock(mu_);
  releases_.push_back(owner);
  cv_.notify_all();
}

void Engine::wake() { cv_.notify_all(); }

// ------------------------------------------------------------------------------------------------
// The step loop: the stages of a step are EngineCore's.

void Engine::loop() {
  std::vector<std::unique_ptr<Generation>> arrivals;
  std::vector<uint64_t> releases;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || !releases_.empty() || core_->has_work(); });
      if (stop_) {
        core_->stop();
        return;
      }
      arrivals.swap(inbox_);
      releases.swap(releases_);
    }
    const StepReport report = core_->step(arrivals, releases);
    releases.clear();
    core_->retire();
    update_stats(report);
    core_->deliver();
  }
}

void Engine::update_stats(const StepReport& report) {
  const StatePool& pool = runner_->pool();
  std::lock_guard lock(mu_);
  if (report.counted) {
    stats_.steps = report.step;
    stats_.prompt_tokens += report.prompt_tokens;
    stats_.generated_tokens += report.generated_tokens;
    stats_.preemptions += report.preemptions;
    stats_.evictions += report.evictions;
    stats_.step_seconds += report.step_seconds;
    stats_.schedule_seconds += report.schedule_seconds;
  }
  stats_.total_slots = pool.n_slots();
  stats_.free_slots = pool.free_slots();
  stats_.total_blocks = pool.n_blocks();
  stats_.free_blocks = pool.free_blocks();
  const CoreBooks books = core_->books();
  stats_.running_generations = books.generations + inbox_.size();
  stats_.resident_sessions = books.residents;
  stats_.running_sequences = books.running_sequences;
  stats_.waiting_sequences = books.waiting_sequences;
  for (const auto& g : inbox_) stats_.waiting_sequences += static_cast<size_t>(g->params.n);
}

}  // namespace deepinfer
