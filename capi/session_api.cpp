// di_session and di_event.
#include "handles.h"

using namespace deepinfer;
using namespace deepinfer::capi;

namespace {

template <class F>
di_error* with_session(const di_session* s, F&& f) {
  return guard([&]() -> Result<void> {
    auto session = sessions().get(s);
    if (!session) return invalid_handle("session");
    return f(*session);
  });
}

template <class F>
di_error* with_event(const di_event* ev, F&& f) {
  return guard([&]() -> Result<void> {
    auto e = events().get(ev);
    if (!e) return invalid_handle("event");
    return f(e->event);
  });
}

template <class F>
di_error* with_event_data(const di_event* ev, F&& f) {
  return guard([&]() -> Result<void> {
    auto e = events().get(ev);
    if (!e) return invalid_handle("event");
    return f(*e);
  });
}

// Views never return NULL: an empty one points here.
template <class T>
const T* view_of(const std::vector<T>& v) {
  static const T kEmpty{};
  return v.empty() ? &kEmpty : v.data();
}

const char* role_name(di_role role) {
  switch (role) {
    case DI_ROLE_SYSTEM: return "system";
    case DI_ROLE_USER: return "user";
    case DI_ROLE_ASSISTANT: return "assistant";
    case DI_ROLE_TOOL: return "tool";
    default: return nullptr;
  }
}

}  // namespace

extern "C" {

di_error* di_session_create(const di_engine* engine, di_session** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto e = engines().get(engine);
    if (!e) return invalid_handle("engine");
    DI_TRY(session, e->create_session());  // kClosed in a fork's child
    *out = sessions().add<di_session>(std::move(session));
    return ok();
  });
}

void di_session_free(di_session* session) {
  auto s = sessions().remove(session);
  if (!s) return;
  if (s->forked()) return keep_until_exit(std::move(s));
  s->close();
}

di_error* di_session_add_tokens(di_session* session, const int32_t* ids, size_t n) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(ids, n, "ids"));
    return s.add_tokens(std::span<const int32_t>(ids, n));
  });
}

di_error* di_session_add_text(di_session* session, const char* text, size_t len, di_text_flags flags) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(text, len, "text"));
    if (flags & ~uint32_t{DI_TEXT_SPECIAL}) return make_error(Code::kInvalidArgument, "unknown text flags {:#x}", flags);
    return s.add_text(std::string_view(text ? text : "", len),
                      (flags & DI_TEXT_SPECIAL) ? text::EncodeMode::kRecognizeAddedTokens : text::EncodeMode::kPlainText);
  });
}

di_error* di_session_add_message(di_session* session, di_role role, const char* content, size_t len) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(content, len, "content"));
    const char* name = role_name(role);
    if (!name) return make_error(Code::kInvalidArgument, "role {} is not one of DI_ROLE_*", role);
    return s.add_message(name, std::string(content ? content : "", len));
  });
}

di_error* di_session_add_tool_call(di_session* session, const char* name, size_t name_len, const char* arguments,
                                   size_t arguments_len) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(name, name_len, "name"));
    DI_TRYV(check_in(arguments, arguments_len, "arguments"));
    return s.add_tool_call(std::string(name ? name : "", name_len), std::string(arguments ? arguments : "", arguments_len));
  });
}

di_error* di_session_set_tools(di_session* session, const char* tools_json, size_t len) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(tools_json, len, "tools_json"));
    return s.set_tools(std::string_view(tools_json ? tools_json : "", len));
  });
}

di_error* di_session_context_length(const di_session* session, int64_t* out) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(ids, s.context());
    *out = static_cast<int64_t>(ids.size());
    return ok();
  });
}

di_error* di_session_context_tokens(const di_session* session, int32_t* buf, size_t cap, size_t* out_len) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRY(ids, s.context());
    return copy_out(ids.data(), ids.size(), buf, cap, out_len);
  });
}

di_error* di_session_reset(di_session* session) {
  return with_session(session, [&](Session& s) { return s.reset(); });
}

di_error* di_session_set_keep_cancelled_output(di_session* session, int32_t keep) {
  return with_session(session, [&](Session& s) { return s.set_keep_cancelled_output(keep != 0); });
}

di_error* di_session_generate(di_session* session, const di_sampling* params) {
  return with_session(session, [&](Session& s) -> Result<void> {
    auto p = samplings().get(params);
    if (!p) return invalid_handle("sampling");
    return s.generate(p->params, p->grammar);
  });
}

di_error* di_session_cancel(di_session* session) {
  return with_session(session, [&](Session& s) -> Result<void> {
    s.cancel();
    return ok();
  });
}

di_error* di_session_poll(di_session* session, int32_t timeout_ms, di_event** out) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(event, s.poll(timeout_ms));
    *out = event ? event_handle(std::move(*event)) : nullptr;
    return ok();
  });
}

di_error* di_session_set_callback(di_session* session, di_event_callback fn, void* user) {
  return with_session(session, [&](Session& s) -> Result<void> {
    if (!fn) return s.set_callback(nullptr);
    return s.set_callback([fn, user](Event&& e) { fn(user, event_handle(std::move(e))); });
  });
}

di_error* di_queue_create(di_queue** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRY(q, EventQueue::create());
    *out = queues().add<di_queue>(std::move(q));
    return ok();
  });
}

void di_queue_free(di_queue* queue) {
  auto q = queues().remove(queue);
  if (!q) return;
  if (q->forked()) return keep_until_exit(std::move(q));
  q->close();
}

di_error* di_session_set_queue(di_session* session, di_queue* queue, uint64_t tag) {
  return with_session(session, [&](Session& s) -> Result<void> {
    if (!queue) return s.set_queue(nullptr, 0);
    auto q = queues().get(queue);
    if (!q) return invalid_handle("queue");
    return s.set_queue(std::move(q), tag);
  });
}

di_error* di_queue_poll(di_queue* queue, int32_t timeout_ms, di_event** out, uint64_t* tag) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    DI_TRYV(check_out(tag, "tag"));
    auto q = queues().get(queue);
    if (!q) return invalid_handle("queue");
    DI_TRY(item, q->poll(timeout_ms));
    if (!item) {
      *out = nullptr;
      return ok();
    }
    *tag = item->first;
    *out = event_handle(std::move(item->second));
    return ok();
  });
}

di_error* di_queue_fd(const di_queue* queue, int32_t* out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto q = queues().get(queue);
    if (!q) return invalid_handle("queue");
    *out = q->fd();
    return ok();
  });
}

void di_event_free(di_event* event) { events().remove(event); }

di_error* di_event_kind(const di_event* event, di_event_type* out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    switch (e.kind) {
      case Event::Kind::kTokens: *out = DI_EVENT_TOKENS; break;
      case Event::Kind::kFinished: *out = DI_EVENT_FINISHED; break;
      case Event::Kind::kPromptLogprobs: *out = DI_EVENT_PROMPT_LOGPROBS; break;
      case Event::Kind::kDone: *out = DI_EVENT_DONE; break;
    }
    return ok();
  });
}

di_error* di_event_completion(const di_event* event, int32_t* out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = e.completion;
    return ok();
  });
}

di_error* di_event_tokens(const di_event* event, int32_t* buf, size_t cap, size_t* out_len) {
  return with_event(event, [&](const Event& e) { return copy_out(e.tokens.data(), e.tokens.size(), buf, cap, out_len); });
}

di_error* di_event_text(const di_event* event, char* buf, size_t cap, size_t* out_len) {
  return with_event(event, [&](const Event& e) { return copy_out(e.text.data(), e.text.size(), buf, cap, out_len); });
}

di_error* di_event_tokens_view(const di_event* event, const int32_t** data, size_t* len) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(data, "data"));
    DI_TRYV(check_out(len, "len"));
    *data = view_of(e.tokens);
    *len = e.tokens.size();
    return ok();
  });
}

di_error* di_event_text_view(const di_event* event, const char** data, size_t* len) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(data, "data"));
    DI_TRYV(check_out(len, "len"));
    *data = e.text.c_str();  // never NULL, even when empty
    *len = e.text.size();
    return ok();
  });
}

di_error* di_event_logprobs_view(const di_event* event, const float** logprobs, const int32_t** ranks, const int32_t** top_ids,
                                 const float** top_logprobs, size_t* n, size_t* k) {
  return with_event_data(event, [&](const EventData& d) -> Result<void> {
    for (const void* p : {static_cast<const void*>(logprobs), static_cast<const void*>(ranks), static_cast<const void*>(top_ids),
                          static_cast<const void*>(top_logprobs), static_cast<const void*>(n), static_cast<const void*>(k)}) {
      DI_TRYV(check_out(p, "every out-parameter"));
    }
    if (!d.event.has_logprobs) return make_error(Code::kState, "the generation did not request logprobs");
    *logprobs = view_of(d.logprobs);
    *ranks = view_of(d.ranks);
    *top_ids = view_of(d.top_ids);
    *top_logprobs = view_of(d.top_logprobs);
    *n = d.logprobs.size();
    *k = d.top_k;
    return ok();
  });
}

di_error* di_event_logprobs(const di_event* event, size_t i, float* logprob, int32_t* top_ids, float* top_logprobs, size_t cap,
                            size_t* out_len) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    if (!e.has_logprobs) return make_error(Code::kState, "the generation did not request logprobs");
    if (i >= e.logprobs.size()) return make_error(Code::kInvalidArgument, "token {} of an event with {}", i, e.logprobs.size());
    const Logprobs& lp = e.logprobs[i];
    DI_TRYV(check_out(logprob, "logprob"));
    DI_TRYV(check_out(out_len, "out_len"));
    *out_len = lp.top.size();
    if (lp.top.size() > cap) return make_error(Code::kBufferTooSmall, "{} alternatives need a buffer of {}, got {}", lp.top.size(), lp.top.size(), cap);
    if (!lp.top.empty() && (!top_ids || !top_logprobs)) return make_error(Code::kInvalidArgument, "top_ids and top_logprobs must not be NULL");
    for (size_t k = 0; k < lp.top.size(); ++k) {
      top_ids[k] = lp.top[k].token;
      top_logprobs[k] = lp.top[k].logprob;
    }
    *logprob = lp.logprob;
    return ok();
  });
}

di_error* di_event_finish_reason(const di_event* event, di_finish_reason* out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    if (!e.reason) {
      *out = DI_FINISH_NONE;
      return ok();
    }
    switch (*e.reason) {
      case FinishReason::kStop: *out = DI_FINISH_STOP; break;
      case FinishReason::kLength: *out = DI_FINISH_LENGTH; break;
      case FinishReason::kCancelled: *out = DI_FINISH_CANCELLED; break;
      case FinishReason::kError: *out = DI_FINISH_ERROR; break;
    }
    return ok();
  });
}

di_error* di_event_usage(const di_event* event, uint64_t* prompt_tokens, uint64_t* completion_tokens, uint64_t* cached_tokens) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(prompt_tokens, "prompt_tokens"));
    DI_TRYV(check_out(completion_tokens, "completion_tokens"));
    DI_TRYV(check_out(cached_tokens, "cached_tokens"));
    *prompt_tokens = e.prompt_tokens;
    *completion_tokens = e.completion_tokens;
    *cached_tokens = e.cached_tokens;
    return ok();
  });
}

di_error* di_event_seed(const di_event* event, uint64_t* out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = e.seed;
    return ok();
  });
}

di_error* di_event_error(const di_event* event, di_error** out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = e.error ? to_c(*e.error) : nullptr;
    return ok();
  });
}

}  // extern "C"
