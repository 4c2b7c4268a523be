#include "engine/session.h"

#include "engine/engine.h"
#include "text/chat_tools.h"
#include "text/utf8.h"
#include "util/process.h"

#include <chrono>

namespace deepinfer {

namespace {

Result<void> check_utf8(const char* what, std::string_view s) {
  if (const size_t at = text::find_invalid_utf8(s); at != std::string_view::npos)
    return make_error(Code::kInvalidArgument, "{} is not valid UTF-8 (byte offset {})", what, at);
  return ok();
}

}  // namespace

Result<std::shared_ptr<Session>> Engine::create_session() {
  if (forked()) return make_error(Code::kClosed, "the engine belongs to the parent of this fork");
  std::lock_guard lock(mu_);
  if (closed_) return make_error(Code::kClosed, "the engine was shut down");
  return std::make_shared<Session>(weak_from_this(), next_session_id_++);
}

Session::Session(std::weak_ptr<Engine> engine, uint64_t id)
    : engine_(std::move(engine)), id_(id), fork_generation_(fork_generation()) {}

Session::~Session() { close(); }

bool Session::forked() const { return fork_generation() != fork_generation_; }

void Session::close() {
  // In a fork's child the lock may have been held by a thread that no longer exists: touch nothing.
  if (forked()) return;
  cancel();
  {
    // No callback runs once the handle is freed: the caller may release the callback's data.
    std::unique_lock lock(mu_);
    callback_ = nullptr;
    wait_for_callback_locked(lock);
  }
  if (auto e = engine_.lock()) e->release_state(id_);
}

void Session::wait_for_callback_locked(std::unique_lock<std::mutex>& lock) {
  // From within the callback itself (the engine thread) there is nothing to wait for.
  if (callback_thread_ == std::this_thread::get_id()) return;
  cv_.wait(lock, [&] { return callback_thread_ == std::thread::id(); });
}

Result<std::shared_ptr<Engine>> Session::engine() const {
  if (forked()) return make_error(Code::kClosed, "the engine belongs to the parent of this fork");
  auto e = engine_.lock();
  if (!e || e->closed()) return make_error(Code::kClosed, "the engine was shut down");
  return e;
}

Result<void> Session::check_idle_locked(const Engine& engine) const {
  if (engine.closed()) return make_error(Code::kClosed, "the engine was shut down");
  if (generating_) return make_error(Code::kState, "the session is generating");
  return ok();
}

Result<void> Session::add_tokens(std::span<const int32_t> ids) {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  if (mode_ == Mode::kChat) return make_error(Code::kState, "a chat session takes messages, not tokens");
  const int32_t vocab = engine->vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return make_error(Code::kInvalidArgument, "token id {} (at {}) is outside the vocabulary [0, {})", ids[i], i, vocab);
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  if (!ids.empty()) mode_ = Mode::kTokens;
  return ok();
}

Result<void> Session::add_text(std::string_view text, text::EncodeMode mode) {
  DI_TRY(engine, this->engine());
  DI_TRY(tok, engine->tokenizer());
  DI_TRY(ids, tok->encode(text, mode));
  return add_tokens(ids);
}

Result<void> Session::add_message(std::string role, std::string content) {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  if (mode_ == Mode::kTokens) return make_error(Code::kState, "a session of raw tokens takes no chat messages");
  DI_TRYV(engine->tokenizer());
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    return make_error(Code::kInvalidArgument, "unknown chat role \"{}\"", role);
  // Checked now: the transcript is encoded at every generation, so a bad message would stay.
  DI_TRYV(check_utf8("message content", content));
  text::ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  transcript_.push_back(std::move(m));
  mode_ = Mode::kChat;
  return ok();
}

Result<void> Session::add_tool_call(std::string name, std::string arguments) {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  if (mode_ == Mode::kTokens) return make_error(Code::kState, "a session of raw tokens takes no chat messages");
  DI_TRYV(engine->tokenizer());
  if (name.empty()) return make_error(Code::kInvalidArgument, "a tool call needs a function name");
  DI_TRYV(check_utf8("tool call name", name));
  DI_TRYV(check_utf8("tool call arguments", arguments));
  if (transcript_.empty() || transcript_.back().role != "assistant" || transcript_.back().content) {
    text::ChatMessage m;
    m.role = "assistant";
    transcript_.push_back(std::move(m));
  }
  text::ToolCall call;
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  transcript_.back().tool_calls.push_back(std::move(call));
  mode_ = Mode::kChat;
  return ok();
}

Result<void> Session::set_tools(std::string_view tools_json) {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  if (mode_ == Mode::kTokens) return make_error(Code::kState, "a session of raw tokens takes no tool definitions");
  DI_TRYV(engine->tokenizer());
  if (tools_json.empty()) {
    tools_prompt_.reset();
    return ok();
  }
  DI_TRY(prompt, text::tools_system_prompt(tools_json));
  tools_prompt_ = std::move(prompt);
  mode_ = Mode::kChat;
  return ok();
}

Result<std::vector<int32_t>> Session::context_locked(const Engine& engine, bool add_generation_prompt) const {
  if (mode_ != Mode::kChat) return tokens_;
  DI_TRY(tok, engine.tokenizer());
  if (!tools_prompt_) return text::encode_chat(*tok, transcript_, add_generation_prompt);
  // System messages are joined first wherever they stand: the tools follow the caller's.
  std::vector<text::ChatMessage> messages = transcript_;
  text::ChatMessage tools;
  tools.role = "system";
  tools.content = *tools_prompt_;
  messages.push_back(std::move(tools));
  return text::encode_chat(*tok, messages, add_generation_prompt);
}

Result<std::vector<int32_t>> Session::context() const {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  return context_locked(*engine, false);
}

Result<void> Session::reset() {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  tokens_.clear();
  transcript_.clear();
  tools_prompt_.reset();
  mode_ = Mode::kEmpty;
  events_.clear();
  engine->release_state(id_);
  return ok();
}

Result<void> Session::generate(const SamplingParams& params, std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  DI_TRY(engine, this->engine());
  std::lock_guard lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  DI_TRY(context, context_locked(*engine, true));
  events_.clear();
  cancel_ = false;
  // The engine holds the session until the generation ends.
  DI_TRYV(engine->submit(id_, shared_from_this(), std::move(context), params, std::move(grammar)));
  generating_ = true;
  return ok();
}

void Session::cancel() {
  if (forked()) return;
  cancel_ = true;
  if (auto e = engine_.lock()) e->wake();
}

Result<std::optional<Event>> Session::poll(int timeout_ms) {
  if (forked()) return make_error(Code::kClosed, "the engine belongs to the parent of this fork");
  std::unique_lock lock(mu_);
  if (callback_) return make_error(Code::kState, "the session delivers its events to a callback");
  if (queue_ && !queue_->closed()) return make_error(Code::kState, "the session delivers its events to a completion queue");
  auto ready = [&] { return !events_.empty() || !generating_; };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return std::optional<Event>();
  }
  if (events_.empty()) {
    auto e = engine_.lock();
    if (!e || e->closed()) return make_error(Code::kClosed, "the engine was shut down");
    return make_error(Code::kState, "nothing is generating and no event is left");
  }
  Event e = std::move(events_.front());
  events_.pop_front();
  return std::optional<Event>(std::move(e));
}

Result<void> Session::set_callback(std::function<void(Event&&)> fn) {
  DI_TRY(engine, this->engine());
  std::unique_lock lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  // The last events of a generation may still be on their way to the old callback.
  wait_for_callback_locked(lock);
  callback_ = std::move(fn);
  queue_.reset();
  return ok();
}

Result<void> Session::set_queue(std::shared_ptr<EventQueue> queue, uint64_t tag) {
  DI_TRY(engine, this->engine());
  std::unique_lock lock(mu_);
  DI_TRYV(check_idle_locked(*engine));
  wait_for_callback_locked(lock);
  callback_ = nullptr;
  queue_ = std::move(queue);
  queue_tag_ = tag;
  return ok();
}

Result<void> Session::set_keep_cancelled_output(bool keep) {
  DI_TRYV(engine());
  keep_cancelled_ = keep;
  return ok();
}

void Session::deliver(std::vector<Event>&& events, bool ended, const std::vector<int32_t>* output,
                      const std::string* output_text) {
  if (process_exiting()) return;
  std::function<void(Event&&)> callback;
  {
    std::lock_guard lock(mu_);
    if (ended) {
      if (output && mode_ == Mode::kTokens) tokens_.insert(tokens_.end(), output->begin(), output->end());
      if (output_text && mode_ == Mode::kChat) {
        text::ChatMessage reply;
        reply.role = "assistant";
        reply.content = *output_text;
        transcript_.push_back(std::move(reply));
      }
      generating_ = false;
    }
    callback = callback_;
    if (callback) {
      callback_thread_ = std::this_thread::get_id();
    } else if (!queue_ || !queue_->push(queue_tag_, events)) {  // a freed queue: back to polling
      for (auto& e : events) events_.push_back(std::move(e));
    }
  }
  if (callback) {
    for (auto& e : events) callback(std::move(e));
    std::lock_guard lock(mu_);
    callback_thread_ = std::thread::id();
  }
  cv_.notify_all();
}

}  // namespace deepinfer
