/* Helpers of the Go package: a few ABI calls folded into one cgo call where a Go caller would
 * otherwise cross into C once per field (reading an event, draining a completion queue), and
 * the trampolines of the callbacks. Everything goes through deepinfer.h. */
#ifndef DEEPINFER_GO_HELPERS_H
#define DEEPINFER_GO_HELPERS_H

#include <deepinfer.h>
#include <stdint.h>

#if DI_VERSION_MAJOR != 0 || DI_VERSION_MINOR < 2
#error "the Go package needs deepinfer.h 0.2 or later within ABI 0"
#endif

/* One event read in place: the views stay valid until digo_events_free. */
typedef struct {
  uint64_t tag;
  di_event *event;
  di_event_type kind;
  int32_t completion;
  const int32_t *tokens;
  size_t n_tokens;
  const char *text;
  size_t text_len;
  int32_t has_logprobs;
  const float *logprobs;
  const int32_t *ranks;
  const int32_t *top_ids;
  const float *top_logprobs;
  size_t logprobs_n, logprobs_k;
  di_finish_reason finish;
  uint64_t prompt_tokens, completion_tokens, cached_tokens, seed;
  di_error *event_error; /* FINISHED with DI_FINISH_ERROR: its error (freed by digo_events_free) */
  di_error *read_error;  /* reading the event failed (freed by digo_events_free) */
} digo_event;

/* Takes up to cap events from the queue without waiting; returns how many. A failing poll stops
 * the drain and leaves its error in *err (the caller frees it). */
size_t digo_queue_drain(di_queue *queue, digo_event *out, size_t cap, di_error **err);
/* Frees the events (and their errors) of a drain. */
void digo_events_free(digo_event *events, size_t n);

/* Callbacks into Go: `user` carries a runtime/cgo.Handle, converted here rather than in Go. */
di_error *digo_set_progress(di_engine_config *cfg, uintptr_t handle);
void digo_set_log_callback(int enable);

#endif
