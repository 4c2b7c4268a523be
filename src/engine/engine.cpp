#include "engine/engine.h"

#include "backend/backend.h"
#include "engine/generation.h"
#include "engine/grammar_vocabulary.h"
#include "engine/mask_worker.h"
#include "engine/model_runner.h"
#include "engine/session.h"
#include "grammar/grammar_compiler.h"
#include "model/deepseek_v4.h"
#include "sample/sampler.h"
#include "sample/sampling_rng.h"
#include "sample/stop_condition.h"
#include "sched/scheduler.h"
#include "model/model_cost.h"
#include "util/log.h"
#include "util/process.h"
#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <unordered_map>

namespace deepinfer {

// A session's model state kept between its generations (engine thread only).
struct Resident {
  int32_t seq = -1;
  std::vector<int32_t> processed;
  uint64_t last_used = 0;
};

struct EngineLoopState {
  std::vector<std::unique_ptr<Generation>> active;
  std::unordered_map<uint64_t, Resident> residents;  // by session id
  uint64_t step = 0;
};

namespace {

// Scheduler keys: running completions and idle residents share one key space.
int64_t completion_key(size_t generation, int32_t completion) {
  return static_cast<int64_t>(generation) << 20 | completion;
}
int64_t resident_key(uint64_t session) { return -static_cast<int64_t>(session); }

}  // namespace

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
  weight_bytes_ = weight_dtype_ == "f32" ? static_cast<uint64_t>(parameters_) * 4
                                         : static_cast<uint64_t>(ModelCost(model_config_).stored_weight_bytes());

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
  DI_TRY(masks, MaskWorker::create(std::max<size_t>(1, std::thread::hardware_concurrency() / 4)));
  masks_ = std::move(masks);
  DI_TRY(sample_pool, ThreadPool::create(static_cast<size_t>(config_.threads)));
  sample_pool_ = std::move(sample_pool);
  loop_ = std::make_unique<EngineLoopState>();
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::exception& e) {  // no thread to be had: an error, as for the pools
    return make_error(Code::kOutOfMemory, "cannot start the engine thread: {}", e.what());
  }
  return ok();
}

void Engine::shutdown() {
  if (forked()) return;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  cancel_all_generations();
  loop_.reset();
  runner_.reset();
  model_.reset();
  backend_.reset();
}

void Engine::stop_at_exit() {
  if (forked()) return;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::cancel_all_generations() {
  std::vector<std::unique_ptr<Generation>> left = std::move(inbox_);
  if (loop_)
    for (auto& g : loop_->active) left.push_back(std::move(g));
  for (auto& g : left) {
    std::vector<Event> events;
    auto cancelled = [&](int32_t index, size_t generated) {
      Event e;
      e.kind = Event::Kind::kFinished;
      e.completion = index;
      e.reason = FinishReason::kCancelled;
      e.seed = g->seed;
      e.prompt_tokens = g->context.size();
      e.completion_tokens = generated;
      events.push_back(std::move(e));
    };
    // A generation not admitted yet has no completions: each of its n still ends with an event.
    if (!g->admitted)
      for (int32_t i = 0; i < g->params.n; ++i) cancelled(i, 0);
    for (auto& c : g->completions)
      if (!c.done) cancelled(c.index, c.output.size());
    Event done;
    done.kind = Event::Kind::kDone;
    done.seed = g->seed;
    events.push_back(std::move(done));
    g->session->deliver(std::move(events), true, nullptr, nullptr);
  }
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

Result<std::shared_ptr<Session>> Engine::create_session() {
  if (forked()) return make_error(Code::kClosed, "the engine belongs to the parent of this fork");
  std::lock_guard lock(mu_);
  if (closed_) return make_error(Code::kClosed, "the engine was shut down");
  return std::make_shared<Session>(weak_from_this(), next_session_id_++);
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

Result<void> Engine::submit(std::shared_ptr<Session> session, std::vector<int32_t> context, SamplingParams params,
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
  g->session = std::move(session);
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

void Engine::release_state(uint64_t session_id) {
  std::lock_guard lock(mu_);
  releases_.push_back(session_id);
  cv_.notify_all();
}

void Engine::wake() { cv_.notify_all(); }

// ------------------------------------------------------------------------------------------------
// The step loop

namespace {

// Whether completion 0's output joins the session's context (and its state stays with the session).
bool joins_context(const Generation& g, FinishReason reason) {
  if (reason == FinishReason::kError) return false;
  return reason != FinishReason::kCancelled || g.session->keep_cancelled_output();
}

Event finished_event(const Generation& g, const Completion& c) {
  Event e;
  e.kind = Event::Kind::kFinished;
  e.completion = c.index;
  e.reason = c.reason;
  e.error = c.error;
  e.seed = g.seed;
  e.prompt_tokens = g.context.size();
  e.completion_tokens = c.output.size();
  e.cached_tokens = c.index == 0 ? g.cached_tokens : 0;
  return e;
}

}  // namespace

void Engine::loop() {
  EngineLoopState& st = *loop_;
  ModelRunner& runner = *runner_;
  const int32_t vocab = model_config_.vocab_size;

  auto close_seq = [&](Completion& c) {
    if (c.seq >= 0) runner.close_sequence(c.seq);
    c.seq = -1;
  };
  auto finish = [&](Generation& g, Completion& c, FinishReason reason, std::optional<Error> error = std::nullopt) {
    if (c.done) return;
    c.done = true;
    c.reason = reason;
    c.error = std::move(error);
    // Text held back (an incomplete character, a possible stop string) is released at the end.
    std::string tail;
    if (c.detok) tail = c.detok->flush();
    if (c.stops) tail = c.stops->finish(tail);
    if (!tail.empty()) {
      c.text += tail;
      Event e;
      e.completion = c.index;
      e.text = std::move(tail);
      g.pending.push_back(std::move(e));
    }
    g.pending.push_back(finished_event(g, c));
    if (c.index != 0 || !joins_context(g, reason)) {
      close_seq(c);
    } else if (c.seq >= 0) {
      // Completion 0's state stays with the session for its next turn. It becomes an idle resident
      // now, not when the whole generation retires: other completions may still run, and the
      // scheduler must be able to evict it for them (a finished sequence it cannot see would hold
      // its blocks until they finish, and they might never get the blocks to do so).
      st.residents[g.session->id()] = Resident{c.seq, std::move(c.processed), st.step};
      c.seq = -1;
    }
  };

  // Sets up a new generation: validates its token ids and decides what completion 0 reuses.
  auto admit = [&](Generation& g) {
    g.admitted = true;
    const auto& p = g.params;
    for (int32_t i = 0; i < p.n; ++i) {
      Completion c;
      c.index = i;
      auto sampling = SequenceSamplingState::create(g.context, vocab);
      if (!sampling) {
        c.done = true;
        c.reason = FinishReason::kError;
        c.error = sampling.error();
        g.pending.push_back(finished_event(g, c));
        g.completions.push_back(std::move(c));
        continue;
      }
      c.sampling = std::move(sampling).value();
      if (tokenizer_) c.detok.emplace(*tokenizer_, p.skip_special_tokens);
      if (!p.stop.empty()) c.stops.emplace(p.stop, p.include_stop_str_in_output);
      c.to_feed = g.context;
      if (g.grammar) c.matcher.emplace(g.grammar);
      g.completions.push_back(std::move(c));
    }
    // Completion 0 continues from the session's kept state when that state is a strict prefix of
    // the context (prompt logprobs need every prompt row, so they recompute).
    auto it = st.residents.find(g.session->id());
    if (it == st.residents.end()) return;
    Resident r = std::move(it->second);
    st.residents.erase(it);
    Completion& c0 = g.completions[0];
    const bool prefix = r.processed.size() < g.context.size() &&
                        std::equal(r.processed.begin(), r.processed.end(), g.context.begin());
    if (prefix && !p.prompt_logprobs && !c0.done) {
      c0.seq = r.seq;
      c0.to_feed.assign(g.context.begin() + static_cast<std::ptrdiff_t>(r.processed.size()), g.context.end());
      c0.processed = std::move(r.processed);
      g.cached_tokens = c0.processed.size();
    } else {
      runner.close_sequence(r.seq);
    }
  };

  // Constrained completions whose next mask is being computed (by the mask worker, while the
  // next forward runs).
  std::vector<std::pair<Completion*, MaskWorker::Job>> mask_jobs, masks_in_flight;
  auto collect_masks = [&] {
    masks_->wait();
    for (auto& [c, job] : masks_in_flight) c->mask_ready = true;
    masks_in_flight.clear();
  };

  // A completion whose next token is drawn from `row` this step. Draws touch only their own
  // completion (and read its generation), so the rows of a step are sampled on the sample pool.
  struct Draw {
    Generation* g;
    Completion* c;
    std::span<float> row;
    Result<SampleResult> result = SampleResult{};
  };
  auto draw = [&](Draw& d) {
    Completion& c = *d.c;
    SampleKey key{d.g->seed, static_cast<uint32_t>(d.g->params.first_completion + c.index), static_cast<uint32_t>(c.output.size())};
    if (c.matcher && !c.mask_ready) {  // the first mask of a completion is computed here
      c.mask.resize(c.matcher->compiled().vocabulary().mask_words());
      c.matcher->fill_mask(c.mask.data());
      c.mask_ready = true;
    }
    d.result = sample_row(d.row, d.g->params, *c.sampling, eos_ids_,
                          c.matcher ? std::span<const uint32_t>(c.mask) : std::span<const uint32_t>(), key);
  };

  // Takes a drawn token into the completion and emits its event; finishes c when it ends.
  auto take = [&](Draw& d) {
    Generation& g = *d.g;
    Completion& c = *d.c;
    const auto& p = g.params;
    Result<SampleResult>& r = d.result;
    if (!r) return finish(g, c, FinishReason::kError, r.error());
    const int32_t token = r.value().token;
    c.output.push_back(token);
    if (auto a = c.sampling->append_output(token); !a) return finish(g, c, FinishReason::kError, a.error());
    c.to_feed = {token};
    c.decoding = true;
    if (c.matcher) {
      if (auto a = c.matcher->advance(token); !a) return finish(g, c, FinishReason::kError, a.error());
      c.mask_ready = false;
    }

    Event e;
    e.completion = c.index;
    e.tokens = {token};
    if (r.value().logprobs) {
      e.has_logprobs = true;
      e.logprobs.push_back(std::move(*r.value().logprobs));
    }
    bool stopped_by_string = false;
    if (c.detok) {
      auto piece = c.detok->push(token);
      std::string text = piece ? std::move(piece).value() : std::string();
      if (c.stops) {
        auto fed = c.stops->feed(text, stop_strings_armed(p, c.sampling->num_generated()));
        text = std::move(fed.text);
        stopped_by_string = fed.match.has_value();
      }
      c.text += text;
      e.text = std::move(text);
    }
    g.pending.push_back(std::move(e));
    if (stopped_by_string) return finish(g, c, FinishReason::kStop);
    if (auto stop = check_token_stop(p, eos_ids_, token, c.sampling->num_generated())) return finish(g, c, stop->reason);
    if (c.matcher && c.matcher->is_terminated()) return finish(g, c, FinishReason::kStop);  // even with ignore_eos
    if (static_cast<int64_t>(c.processed.size()) + 1 >= max_context_) return finish(g, c, FinishReason::kLength);
    if (c.matcher) mask_jobs.push_back({&c, MaskWorker::Job{&*c.matcher, &c.mask}});
  };

  // Ends a generation: completion 0's state stays with the session, the output joins its context.
  // Events of a step, handed to the sessions once the engine's books (stats) show the step's end.
  struct Delivery {
    std::shared_ptr<Session> session;
    std::vector<Event> events;
    bool ended = false;
    bool joins = false;  // completion 0's output joins the context
    std::vector<int32_t> output;
    std::string text;
  };
  auto retire = [&](Generation& g) {
    Completion& c0 = g.completions[0];
    const bool keep = joins_context(g, c0.reason);
    if (keep && c0.seq >= 0) {
      st.residents[g.session->id()] = Resident{c0.seq, std::move(c0.processed), st.step};
      c0.seq = -1;
    }
    close_seq(c0);
    Event done;
    done.kind = Event::Kind::kDone;
    done.seed = g.seed;
    g.pending.push_back(std::move(done));
    return Delivery{g.session, std::move(g.pending), true, keep, std::move(c0.output), std::move(c0.text)};
  };

  // A prompt row whose logprobs this step computes (on the sample pool, with the draws).
  struct PromptScore {
    Generation* g;
    size_t index;  // into g->prompt_logprobs
    std::span<const float> row;
    int32_t token;
    Result<Logprobs> result = Logprobs{};
  };
  // Fails every unfinished completion (after a step threw): their state may be half-written.
  auto fail_all = [&](const Error& err) {
    masks_->wait();
    masks_in_flight.clear();
    mask_jobs.clear();
    for (auto& g : st.active)
      for (auto& c : g->completions)
        if (!c.done) {
          c.detok.reset();  // no text flush: it may be what threw
          c.stops.reset();
          finish(*g, c, FinishReason::kError, err);
        }
  };

  std::vector<Draw> draws;
  std::vector<PromptScore> scores;
  for (;;) {
    std::vector<uint64_t> releases;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        if (stop_ || !inbox_.empty() || !releases_.empty()) return true;
        for (const auto& g : st.active)
          if (!g->done() || g->session->cancel_requested()) return true;
        return false;
      });
      if (stop_) {
        collect_masks();
        return;
      }
      for (auto& g : inbox_) st.active.push_back(std::move(g));
      inbox_.clear();
      releases.swap(releases_);
    }
    ++st.step;
    const auto t_start = std::chrono::steady_clock::now();
    // Anything thrown inside a step (an allocation failing, a bug) fails the generations it was
    // running, never the process: the engine goes on serving the others.
    try {
      for (uint64_t id : releases) {
        auto it = st.residents.find(id);
        if (it == st.residents.end()) continue;
        runner.close_sequence(it->second.seq);
        st.residents.erase(it);
      }
      for (auto& g : st.active) {
        if (!g->admitted) admit(*g);
        if (g->session->cancel_requested())
          for (auto& c : g->completions) finish(*g, c, FinishReason::kCancelled);
      }

      // Plan the step.
      std::vector<SchedSequence> seqs;
      std::map<int64_t, std::pair<Generation*, Completion*>> by_key;
      for (size_t gi = 0; gi < st.active.size(); ++gi) {
        Generation& g = *st.active[gi];
        for (auto& c : g.completions) {
          if (c.done) continue;
          const int64_t key = completion_key(gi, c.index);
          by_key[key] = {&g, &c};
          seqs.push_back({key, static_cast<int32_t>(c.to_feed.size()), static_cast<int32_t>(c.processed.size()),
                          c.seq >= 0 ? runner.blocks_held(c.seq) : 0, c.seq >= 0, c.decoding,
                          g.arrival * 4096 + static_cast<uint64_t>(c.index)});
        }
      }
      for (const auto& [id, r] : st.residents)
        seqs.push_back({resident_key(id), 0, static_cast<int32_t>(r.processed.size()), runner.blocks_held(r.seq), true, false, r.last_used});
      SchedLimits limits{config_.max_batched_tokens, runner.layout().block_tokens, runner.pool().free_blocks(),
                         runner.pool().free_slots(), runner.pool().n_blocks()};
      SchedDecision plan = schedule_step(seqs, limits);

      for (int64_t key : plan.evict) {
        const uint64_t id = static_cast<uint64_t>(-key);
        runner.close_sequence(st.residents[id].seq);
        st.residents.erase(id);
      }
      for (int64_t key : plan.preempt) {  // give the state up; recompute it later from the ids
        Completion& c = *by_key[key].second;
        close_seq(c);
        c.processed.insert(c.processed.end(), c.to_feed.begin(), c.to_feed.end());
        c.to_feed = std::move(c.processed);
        c.processed.clear();
        c.decoding = false;
      }
      for (int64_t key : plan.over_capacity) finish(*by_key[key].first, *by_key[key].second, FinishReason::kLength);

      const auto t_planned = std::chrono::steady_clock::now();
      uint64_t step_prompt = 0, step_generated = 0;
      std::vector<ModelRunner::Feed> feeds;
      std::vector<std::pair<Completion*, int32_t>> fed;  // completion, tokens fed
      for (const SchedFeed& f : plan.feeds) {
        auto [g, c] = by_key[f.key];
        if (c->seq < 0) {
          auto seq = runner.open_sequence();
          if (!seq) {
            finish(*g, *c, FinishReason::kError, seq.error());
            continue;
          }
          c->seq = seq.value();
        }
        const bool last = f.n == static_cast<int32_t>(c->to_feed.size());
        const bool prompt_rows = g->params.prompt_logprobs && c->index == 0 && !c->decoding && c->output.empty();
        auto mode = prompt_rows ? ForwardBatch::Logits::kAll : last ? ForwardBatch::Logits::kLast : ForwardBatch::Logits::kNone;
        feeds.push_back({c->seq, c->to_feed.data(), f.n, mode});
        fed.push_back({c, f.n});
        if (!c->decoding) step_prompt += static_cast<uint64_t>(f.n);
      }
      // When every row the step samples is plain greedy, only each row's best token leaves the backend.
      bool greedy = true;
      for (size_t i = 0; i < feeds.size() && greedy; ++i) {
        const Completion& c = *fed[i].first;
        const Generation& g = *by_key[plan.feeds[i].key].first;
        if (feeds[i].logits == ForwardBatch::Logits::kAll) greedy = false;
        if (feeds[i].logits == ForwardBatch::Logits::kLast)
          greedy = picks_argmax(g.params, *c.sampling, eos_ids_, c.matcher.has_value());
      }
      if (!feeds.empty()) {
        std::span<float> logits;
        std::span<const int32_t> best;
        std::optional<Error> failure;
        if (greedy) {
          auto stepped = runner.step_greedy(feeds);
          if (stepped) best = stepped.value();
          else failure = stepped.error();
        } else {
          auto stepped = runner.step(feeds);
          if (stepped) logits = stepped.value();
          else failure = stepped.error();
        }
        if (failure) {
          log(LogLevel::kError, "engine step failed: {}", failure->message);
          for (const SchedFeed& f : plan.feeds) finish(*by_key[f.key].first, *by_key[f.key].second, FinishReason::kError, failure);
        } else {
          collect_masks();
          draws.clear();
          scores.clear();
          size_t row = 0;
          for (size_t i = 0; i < feeds.size(); ++i) {
            auto [c, n] = fed[i];
            Generation& g = *by_key[plan.feeds[i].key].first;
            const size_t rows = feeds[i].logits == ForwardBatch::Logits::kAll ? n : feeds[i].logits == ForwardBatch::Logits::kLast ? 1 : 0;
            float* first = greedy ? nullptr : logits.data() + row * vocab;
            row += rows;
            if (feeds[i].logits == ForwardBatch::Logits::kAll) {  // prompt logprobs: row j predicts token p+j+1
              // Only rows not scored yet: a prefill preempted half-way is recomputed from its start.
              const size_t p = c->processed.size();
              for (int32_t j = 0; j < n; ++j)
                if (p + j + 1 < g.context.size() && p + j == g.prompt_logprobs.size()) {
                  scores.push_back({&g, g.prompt_logprobs.size(), {first + j * vocab, static_cast<size_t>(vocab)}, g.context[p + j + 1]});
                  g.prompt_logprobs.emplace_back();  // filled below
                }
            }
            c->processed.insert(c->processed.end(), c->to_feed.begin(), c->to_feed.begin() + n);
            c->to_feed.erase(c->to_feed.begin(), c->to_feed.begin() + n);
            if (!c->to_feed.empty() || c->done) continue;
            if (greedy) {
              draws.push_back({&g, c, {}, argmax_result(best[row - 1], *c->sampling)});
            } else {
              draws.push_back({&g, c, {first + (rows - 1) * vocab, static_cast<size_t>(vocab)}});
            }
          }
          sample_pool_->parallel_for(scores.size() + draws.size(), 1, [&](size_t begin, size_t end) {
            for (size_t i = begin; i < end; ++i) {
              if (i < scores.size()) {
                PromptScore& ps = scores[i];
                ps.result = compute_logprobs(ps.row, ps.token, *ps.g->params.prompt_logprobs);
              } else if (!draws[i - scores.size()].row.empty()) {
                draw(draws[i - scores.size()]);
              }
            }
          });
          for (PromptScore& ps : scores) {  // a row that fails ends its prompt's logprobs there
            auto& all = ps.g->prompt_logprobs;
            if (ps.index >= all.size()) continue;
            if (ps.result) all[ps.index] = std::move(ps.result).value();
            else all.resize(ps.index);
          }
          step_generated += draws.size();
          for (Draw& d : draws) {  // in feed order: events and finishes as with one thread
            Generation& g = *d.g;
            if (g.params.prompt_logprobs && d.c->index == 0 && d.c->output.empty()) {
              Event e;
              e.kind = Event::Kind::kPromptLogprobs;
              e.tokens.assign(g.context.begin() + 1, g.context.end());
              e.logprobs = std::move(g.prompt_logprobs);
              e.has_logprobs = true;
              g.pending.push_back(std::move(e));
            }
            take(d);
          }
        }
      }

      const auto t_end = std::chrono::steady_clock::now();
      {
        std::lock_guard lock(mu_);
        stats_.steps = st.step;
        stats_.prompt_tokens += step_prompt;
        stats_.generated_tokens += step_generated;
        stats_.preemptions += plan.preempt.size();
        stats_.evictions += plan.evict.size();
        stats_.step_seconds += std::chrono::duration<double>(t_end - t_start).count();
        stats_.schedule_seconds += std::chrono::duration<double>(t_planned - t_start).count();
      }

      // Next masks: computed while the following step plans and runs its forward.
      collect_masks();
      if (!mask_jobs.empty()) {
        std::vector<MaskWorker::Job> jobs;
        for (auto& [c, job] : mask_jobs) jobs.push_back(job);
        masks_->start(std::move(jobs));
        masks_in_flight.swap(mask_jobs);
        mask_jobs.clear();
      }

    } catch (const std::exception& ex) {
      const bool oom = dynamic_cast<const std::bad_alloc*>(&ex) != nullptr;
      const Error err{oom ? Code::kOutOfMemory : Code::kInternal, std::string("the engine step failed: ") + ex.what()};
      log(LogLevel::kError, "{}", err.message);
      fail_all(err);
    }

    // Retire finished generations, update the books, then deliver: a DONE event is only seen once
    // the statistics no longer count its generation.
    std::vector<Delivery> deliveries;
    for (auto it = st.active.begin(); it != st.active.end();) {
      Generation& g = **it;
      if (g.done()) {
        deliveries.push_back(retire(g));
        it = st.active.erase(it);
      } else {
        if (!g.pending.empty()) deliveries.push_back(Delivery{g.session, std::move(g.pending)});
        g.pending.clear();
        ++it;
      }
    }
    {
      std::lock_guard lock(mu_);
      stats_.total_slots = runner.pool().n_slots();
      stats_.free_slots = runner.pool().free_slots();
      stats_.total_blocks = runner.pool().n_blocks();
      stats_.free_blocks = runner.pool().free_blocks();
      stats_.running_generations = st.active.size() + inbox_.size();
      stats_.resident_sessions = st.residents.size();
      stats_.running_sequences = stats_.waiting_sequences = 0;
      for (const auto& g : st.active)
        for (const auto& c : g->completions)
          if (!c.done) ++(c.seq >= 0 ? stats_.running_sequences : stats_.waiting_sequences);
      for (const auto& g : inbox_) stats_.waiting_sequences += static_cast<size_t>(g->params.n);
    }
    for (Delivery& d : deliveries)
      d.session->deliver(std::move(d.events), d.ended, d.joins ? &d.output : nullptr, d.joins ? &d.text : nullptr);
  }
}

}  // namespace deepinfer
