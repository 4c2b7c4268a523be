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
    return f(*e);
  });
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

di_error* di_session_create(di_engine* engine, di_session** out) {
  return guard([&]() -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    auto e = engines().get(engine);
    if (!e) return invalid_handle("engine");
    DI_TRY(session, e->create_session());
    *out = sessions().add<di_session>(std::move(session));
    return ok();
  });
}

void di_session_free(di_session* session) {
  if (auto s = sessions().remove(session)) s->close();
}

di_error* di_session_add_tokens(di_session* session, const int32_t* ids, size_t n) {
  return with_session(session, [&](Session& s) -> Result<void> {
    DI_TRYV(check_in(ids, n, "ids"));
    return s.add_tokens(std::span<const int32_t>(ids, n));
  });
}

di_error* di_session_add_text(di_session* session, const char* text, size_t len, uint32_t flags) {
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
    *out = event ? events().add<di_event>(std::make_shared<Event>(std::move(*event))) : nullptr;
    return ok();
  });
}

di_error* di_session_set_callback(di_session* session, di_event_callback fn, void* user) {
  return with_session(session, [&](Session& s) -> Result<void> {
    if (!fn) return s.set_callback(nullptr);
    return s.set_callback([fn, user](Event&& e) { fn(user, events().add<di_event>(std::make_shared<Event>(std::move(e)))); });
  });
}

void di_event_free(di_event* event) { events().remove(event); }

di_error* di_event_kind(const di_event* event, di_event_type* out) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    DI_TRYV(check_out(out, "out"));
    *out = e.kind == Event::Kind::kTokens ? DI_EVENT_TOKENS : e.kind == Event::Kind::kFinished ? DI_EVENT_FINISHED : DI_EVENT_PROMPT_LOGPROBS;
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

di_error* di_event_logprobs(const di_event* event, size_t i, float* logprob, int32_t* top_ids, float* top_logprobs, size_t cap,
                            size_t* out_len) {
  return with_event(event, [&](const Event& e) -> Result<void> {
    if (!e.has_logprobs) return make_error(Code::kState, "the generation did not request logprobs");
    if (i >= e.logprobs.size()) return make_error(Code::kInvalidArgument, "token {} of an event with {}", i, e.logprobs.size());
    const Logprobs& lp = e.logprobs[i];
    DI_TRYV(check_out(out_len, "out_len"));
    *out_len = lp.top.size();
    if (lp.top.size() > cap) return make_error(Code::kBufferTooSmall, "{} alternatives need a buffer of {}, got {}", lp.top.size(), lp.top.size(), cap);
    if (!lp.top.empty() && (!top_ids || !top_logprobs)) return make_error(Code::kInvalidArgument, "top_ids and top_logprobs must not be NULL");
    for (size_t k = 0; k < lp.top.size(); ++k) {
      top_ids[k] = lp.top[k].token;
      top_logprobs[k] = lp.top[k].logprob;
    }
    if (logprob) *logprob = lp.logprob;
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
    if (prompt_tokens) *prompt_tokens = e.prompt_tokens;
    if (completion_tokens) *completion_tokens = e.completion_tokens;
    if (cached_tokens) *cached_tokens = e.cached_tokens;
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
