// The Engine: owns the backend, the model, the tokenizer and the model state, and runs the step
// loop on its own thread. Sessions submit generations; every step batches all live sequences —
// prefill chunks and decode tokens together — through the scheduler (src/sched), runs one forward,
// samples and streams events back to the sessions (EngineCore holds the stages of a step). The step
// thread knows its requesters only as EventSinks.
#pragma once

#include "engine/engine_config.h"
#include "engine/event.h"
#include "engine/event_sink.h"
#include "engine/generation_defaults.h"
#include "grammar/grammar_options.h"
#include "model/config.h"
#include "sample/sampling_params.h"
#include "text/tokenizer.h"
#include "util/result.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace deepinfer {

class Backend;
class DeepseekV4;
class EngineCore;
class ModelRunner;
class Session;
struct Generation;
struct StepReport;
namespace grammar {
class CompiledGrammar;
class GrammarCompiler;
}  // namespace grammar

// A snapshot of the engine's bookkeeping (for tests, benchmarks and monitoring).
struct EngineStats {
  size_t running_sequences = 0;  // completions holding model state
  size_t waiting_sequences = 0;  // completions not started (or preempted)
  uint64_t prompt_tokens = 0;    // context tokens processed (prefill, recomputation included)
  uint64_t generated_tokens = 0;
  int32_t total_slots = 0, free_slots = 0;
  int32_t total_blocks = 0, free_blocks = 0;
  int32_t block_tokens = 0;  // positions one block covers
  uint64_t block_bytes = 0;  // state memory one block takes
  size_t running_generations = 0;  // submitted and not yet finished
  size_t resident_sessions = 0;    // idle sessions whose state is kept
  uint64_t steps = 0;
  uint64_t preemptions = 0, evictions = 0;
  double step_seconds = 0;      // total time in steps
  double schedule_seconds = 0;  // of which planning (scheduler + bookkeeping before the forward)
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  static Result<std::shared_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  // Stops the step loop (finishing every generation as cancelled) and releases the model; later
  // calls return kClosed. Idempotent.
  void shutdown();
  // At process exit: stops the step loop without delivering anything (no callback may run) and
  // keeps the model (its memory goes with the process). In a fork's child: nothing.
  void stop_at_exit();

  // In a fork's child (made after this engine started): nothing of it may run there.
  bool forked() const;
  // The device the engine runs on (kCpu or kCuda).
  Device device() const { return device_; }
  bool has_tokenizer() const { return tokenizer_.has_value(); }
  // Weights of the model, and the bytes and type they take on the device.
  int64_t parameters() const { return parameters_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  const std::string& weight_dtype() const { return weight_dtype_; }
  const ModelConfig& model_config() const { return model_config_; }
  int32_t vocab_size() const { return model_config_.vocab_size; }
  int64_t max_context() const { return max_context_; }
  int64_t capacity_tokens() const { return capacity_tokens_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const SamplingParams& sampling_defaults() const { return defaults_.params; }
  // The model's tokenizer; kUnsupported when the model directory has no tokenizer.json.
  Result<const text::Tokenizer*> tokenizer() const;

  // A new session of this engine (defined with Session, in session.cpp).
  Result<std::shared_ptr<Session>> create_session();
  EngineStats stats() const;

  // A generation constraint compiled for this model's tokenizer; compiled grammars are cached by
  // (kind, spec, options) and shared. kGrammar for a bad spec or a feature that cannot be enforced
  // (the message names it).
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compile_grammar(grammar::GrammarKind kind, std::string_view spec,
                                                                          const grammar::GrammarOptions& options);

  // Shut down, or a fork's child (whose copy of the engine has no threads).
  bool closed() const;

  // What sessions ask of the engine (any thread). A generation of `context`, its events sent to
  // `sink` (kept alive until its DONE event is delivered); `owner` names whose resident state it
  // continues and keeps (a session's id).
  Result<void> submit(uint64_t owner, std::shared_ptr<EventSink> sink, std::vector<int32_t> context, SamplingParams params,
                      std::shared_ptr<const grammar::CompiledGrammar> grammar);
  // The owner's resident state is no longer wanted (freed at the next step).
  void release_state(uint64_t owner);
  // A sink's cancel_requested() turned true: the step loop looks again.
  void wake();

 private:
  explicit Engine(const EngineConfig& config);
  Result<void> start();
  Result<void> open_backend();
  Result<grammar::GrammarCompiler*> grammar_compiler();

  void loop();
  // Marks the engine closed and joins the step loop; false where it was closed already (or this is
  // a fork's child), and nothing was done.
  bool close_loop();
  // The step's statistics; the books of the sequences and the inbox. Before the step's delivery:
  // a DONE event is only seen once the statistics no longer count its generation.
  void update_stats(const StepReport& report);
  // Ends every generation still queued or running as cancelled (after the loop stopped).
  void cancel_all_generations();

  EngineConfig config_;
  const uint64_t fork_generation_;
  Device device_ = Device::kCpu;
  int64_t parameters_ = 0;
  uint64_t weight_bytes_ = 0;
  std::string weight_dtype_;
  ModelConfig model_config_;
  GenerationDefaults defaults_;
  std::vector<int32_t> eos_ids_;
  std::optional<text::Tokenizer> tokenizer_;
  int64_t max_context_ = 0;
  int64_t capacity_tokens_ = 0;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DeepseekV4> model_;
  std::unique_ptr<ModelRunner> runner_;
  std::mutex grammar_mu_;
  std::unique_ptr<grammar::GrammarCompiler> grammar_compiler_;  // made on first use

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool closed_ = false;
  uint64_t next_session_id_ = 1;
  uint64_t next_generation_ = 0;
  std::vector<std::unique_ptr<Generation>> inbox_;
  std::vector<uint64_t> releases_;
  EngineStats stats_;
  std::thread thread_;
  std::unique_ptr<EngineCore> core_;  // step-thread state
};

}  // namespace deepinfer
