// A session: a context of token ids (or a chat transcript that encodes to one) whose model state
// the engine keeps between generations, and the stream of events of its current generation (the
// engine's step thread sees it as the EventSink of its generations). Methods are thread-safe (the
// C ABI still asks callers to use a session from one thread at a time, except cancel).
#pragma once

#include "engine/event.h"
#include "engine/event_queue.h"
#include "engine/event_sink.h"
#include "grammar/compiled_grammar.h"
#include "sample/sampling_params.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "util/result.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace deepinfer {

class Engine;

class Session : public EventSink, public std::enable_shared_from_this<Session> {
 public:
  Session(std::weak_ptr<Engine> engine, uint64_t id);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }

  Result<void> add_tokens(std::span<const int32_t> ids);
  Result<void> add_text(std::string_view text, text::EncodeMode mode);
  Result<void> add_message(std::string role, std::string content);
  Result<void> add_tool_call(std::string name, std::string arguments);
  // Tool definitions (an OpenAI-style JSON array) described to the model in a system block; empty
  // removes them. Makes the session a chat session.
  Result<void> set_tools(std::string_view tools_json);
  Result<std::vector<int32_t>> context() const;
  Result<void> reset();

  // `grammar` (optional) constrains every completion's output; it must come from this engine.
  Result<void> generate(const SamplingParams& params, std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr);
  void cancel();
  // The next event; nullopt when timeout_ms passed first (-1: wait for ever). kState when nothing
  // is generating and no event is left.
  Result<std::optional<Event>> poll(int timeout_ms);
  // Where events go instead of poll(): a callback, or a completion queue with a tag (each replaces
  // the other; nullptr restores polling). Not while generating.
  Result<void> set_callback(std::function<void(Event&&)> fn);
  Result<void> set_queue(std::shared_ptr<EventQueue> queue, uint64_t tag);
  // Whether completion 0's output of a cancelled generation joins the context.
  Result<void> set_keep_cancelled_output(bool keep);
  bool keep_cancelled_output() const override { return keep_cancelled_.load(); }
  // Cancels and lets the engine release the session's state (the handle is being freed).
  void close();
  // In a fork's child (the engine's threads are the parent's): every call fails with kClosed, and
  // the object must not be destroyed there (waiters of the parent may be recorded in it).
  bool forked() const;

 private:
  enum class Mode { kEmpty, kTokens, kChat };

  // The context a generation starts from (chat: with the assistant prompt). Caller holds mu_.
  Result<std::vector<int32_t>> context_locked(const Engine& engine, bool add_generation_prompt) const;
  // The engine, or kClosed once it was shut down (sessions do not keep it alive).
  Result<std::shared_ptr<Engine>> engine() const;
  // Waits until no call of the callback is in progress (returns at once on the thread making it).
  void wait_for_callback_locked(std::unique_lock<std::mutex>& lock);
  Result<void> check_idle_locked(const Engine& engine) const;

  // EventSink (the engine's step thread). Nothing is delivered once the process is exiting.
  void deliver(std::vector<Event>&& events, bool ended, const std::vector<int32_t>* output,
               const std::string* output_text) override;
  bool cancel_requested() const override { return cancel_.load(); }

  std::weak_ptr<Engine> engine_;
  const uint64_t id_;
  const uint64_t fork_generation_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Mode mode_ = Mode::kEmpty;
  std::vector<int32_t> tokens_;            // kTokens: the context
  std::vector<text::ChatMessage> transcript_;    // kChat: the messages
  std::optional<std::string> tools_prompt_;      // kChat: the system block describing the tools
  bool generating_ = false;
  std::atomic<bool> cancel_{false};
  std::deque<Event> events_;
  std::function<void(Event&&)> callback_;
  std::shared_ptr<EventQueue> queue_;
  uint64_t queue_tag_ = 0;
  std::atomic<bool> keep_cancelled_{false};
  std::thread::id callback_thread_;  // the thread running callback_ now (none: no call in progress)
};

}  // namespace deepinfer
