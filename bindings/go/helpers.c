#include "helpers.h"

#include <string.h>

/* Defined in Go (callbacks.go). */
extern int32_t digoProgress(uintptr_t handle, uint64_t done, uint64_t total);
extern void digoLog(int32_t level, char *message, size_t len);

static di_error *read_event(di_event *ev, digo_event *o) {
  di_error *err;
  if ((err = di_event_kind(ev, &o->kind))) return err;
  if ((err = di_event_completion(ev, &o->completion))) return err;
  if ((err = di_event_tokens_view(ev, &o->tokens, &o->n_tokens))) return err;
  if ((err = di_event_text_view(ev, &o->text, &o->text_len))) return err;
  err = di_event_logprobs_view(ev, &o->logprobs, &o->ranks, &o->top_ids, &o->top_logprobs, &o->logprobs_n,
                               &o->logprobs_k);
  if (err && di_error_code(err) != DI_ERR_STATE) return err;
  o->has_logprobs = err == NULL;
  di_error_free(err);
  if ((err = di_event_finish_reason(ev, &o->finish))) return err;
  if ((err = di_event_usage(ev, &o->prompt_tokens, &o->completion_tokens, &o->cached_tokens))) return err;
  if ((err = di_event_seed(ev, &o->seed))) return err;
  return di_event_error(ev, &o->event_error);
}

size_t digo_queue_drain(di_queue *queue, digo_event *out, size_t cap, di_error **err) {
  size_t n = 0;
  *err = NULL;
  while (n < cap) {
    di_event *ev = NULL;
    uint64_t tag = 0;
    di_error *e = di_queue_poll(queue, 0, &ev, &tag);
    if (e) {
      *err = e;
      break;
    }
    if (!ev) break;
    digo_event *o = &out[n++];
    memset(o, 0, sizeof *o);
    o->tag = tag;
    o->event = ev;
    o->read_error = read_event(ev, o);
  }
  return n;
}

void digo_events_free(digo_event *events, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    di_error_free(events[i].event_error);
    di_error_free(events[i].read_error);
    di_event_free(events[i].event);
    memset(&events[i], 0, sizeof events[i]);
  }
}

static int32_t progress_trampoline(void *user, uint64_t done, uint64_t total) {
  return digoProgress((uintptr_t)user, done, total);
}

di_error *digo_set_progress(di_engine_config *cfg, uintptr_t handle) {
  return di_engine_config_set_progress_callback(cfg, handle ? progress_trampoline : NULL, (void *)handle);
}

static void log_trampoline(void *user, di_log_level level, const char *message, size_t len) {
  (void)user;
  digoLog(level, (char *)message, len);
}

void digo_set_log_callback(int enable) { di_set_log_callback(enable ? log_trampoline : NULL, NULL); }
