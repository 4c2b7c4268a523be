/*
 * abi_c99: a C99 program that calls every function of deepinfer.h against a model with a tokenizer
 * (argv[1], the demo model) and checks the results. Compiled with -std=c99 -Wall -Wextra -Werror
 * -pedantic. Exit status 0 when every check passed.
 *
 * check_abi_symbols.cmake compares the di_* functions called here with capi/exported_symbols.txt
 * and with the header: a function added to deepinfer.h must be exercised here.
 */
#define _POSIX_C_SOURCE 200809L

#include "deepinfer.h"

#include <math.h>
#include <pthread.h>
#include <sys/select.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                              \
    }                                                                            \
  } while (0)

/* The call must succeed; evaluates to 1 when it did. */
#define OK(call) ok_((call), #call, __LINE__)
static int ok_(di_error *err, const char *what, int line) {
  if (!err) return 1;
  fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, line, what, di_code_name(di_error_code(err)),
          di_error_message(err));
  di_error_free(err);
  ++g_failures;
  return 0;
}

/* The call must fail with `code`. */
#define FAILS(call, code) fails_((call), (code), #call, __LINE__)
static void fails_(di_error *err, di_code code, const char *what, int line) {
  if (!err) {
    fprintf(stderr, "%s:%d: %s succeeded, expected %s\n", __FILE__, line, what, di_code_name(code));
    ++g_failures;
    return;
  }
  if (di_error_code(err) != code) {
    fprintf(stderr, "%s:%d: %s: got %s (%s), expected %s\n", __FILE__, line, what,
            di_code_name(di_error_code(err)), di_error_message(err), di_code_name(code));
    ++g_failures;
  }
  CHECK(di_error_message(err) != NULL && di_error_message(err)[0] != '\0');
  di_error_free(err);
}

/* ---------------------------------------------------------------------------------------------- */
/* Logging                                                                                        */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_log_messages = 0;

static void on_log(void *user, di_log_level level, const char *message, size_t len) {
  int *tag = (int *)user;
  pthread_mutex_lock(&g_log_mu);
  if (*tag == 42 && level >= DI_LOG_DEBUG && level <= DI_LOG_ERROR && message && strlen(message) == len)
    ++g_log_messages;
  pthread_mutex_unlock(&g_log_mu);
}

/* ---------------------------------------------------------------------------------------------- */
/* Collecting a generation by polling                                                             */

#define MAX_N 4
#define MAX_OUT 256
#define TEXT_CAP 4096

typedef struct {
  int finished;
  int32_t tokens[MAX_OUT];
  size_t n_tokens;
  char text[TEXT_CAP];
  size_t text_len;
  di_finish_reason reason;
  uint64_t prompt_tokens, completion_tokens, cached_tokens, seed;
  int logprob_events;
} completion_out;

typedef struct {
  completion_out c[MAX_N];
  int prompt_logprob_events;
  size_t prompt_logprob_tokens;
  int done; /* the DONE event arrived */
} generation_out;

/* Reads every getter of one event into `out`. */
static void read_event(di_event *ev, generation_out *out, int with_logprobs) {
  di_event_type kind = 0;
  int32_t idx = -1;
  int32_t ids[MAX_OUT];
  size_t n = 0, len = 0;
  completion_out *c;
  di_finish_reason reason = -1;
  uint64_t seed = 0;
  di_error *err = NULL;
  char text[TEXT_CAP];

  if (!OK(di_event_kind(ev, &kind)) || !OK(di_event_completion(ev, &idx))) return;
  CHECK(!out->done); /* nothing after DONE */
  {
    /* The borrowed views agree with the copies read below. */
    const int32_t *view_ids = NULL;
    const char *view_text = NULL;
    size_t n_view = 0, n_view_text = 0;
    if (OK(di_event_tokens_view(ev, &view_ids, &n_view)) && OK(di_event_text_view(ev, &view_text, &n_view_text))) {
      CHECK(view_ids != NULL && view_text != NULL);
      n = 0;
      OK(di_event_text(ev, text, sizeof text, &len));
      CHECK(len == n_view_text && memcmp(text, view_text, len) == 0);
    }
  }
  if (kind == DI_EVENT_DONE) {
    int i;
    for (i = 0; i < MAX_N; ++i) CHECK(out->c[i].finished || out->c[i].n_tokens == 0);
    out->done = 1;
    return;
  }
  CHECK(idx >= 0 && idx < MAX_N);
  if (idx < 0 || idx >= MAX_N) return;
  c = &out->c[idx];
  CHECK(!c->finished); /* nothing after a completion's FINISHED event */

  /* The size query (cap 0): succeeds for no tokens, else reports the size needed. */
  {
    di_error *e = di_event_tokens(ev, NULL, 0, &n);
    if (e) {
      CHECK(di_error_code(e) == DI_ERR_BUFFER_TOO_SMALL && n > 0);
      di_error_free(e);
    } else {
      CHECK(n == 0);
    }
  }
  CHECK(n <= MAX_OUT);
  if (n > MAX_OUT) return;
  OK(di_event_tokens(ev, ids, MAX_OUT, &n));
  OK(di_event_text(ev, text, sizeof text, &len));
  OK(di_event_finish_reason(ev, &reason));

  if (kind == DI_EVENT_PROMPT_LOGPROBS) {
    size_t i;
    CHECK(idx == 0);
    CHECK(out->c[0].n_tokens == 0);
    ++out->prompt_logprob_events;
    out->prompt_logprob_tokens += n;
    for (i = 0; i < n; ++i) {
      float lp = 1.0f, top_lp[4];
      int32_t top_ids[4];
      size_t n_top = 0;
      if (OK(di_event_logprobs(ev, i, &lp, top_ids, top_lp, 4, &n_top))) {
        CHECK(lp <= 0.0f);
        CHECK(n_top == 2);
      }
    }
    return;
  }
  if (kind == DI_EVENT_TOKENS) {
    size_t i;
    CHECK(reason == DI_FINISH_NONE);
    CHECK(c->n_tokens + n <= MAX_OUT && c->text_len + len <= TEXT_CAP);
    if (c->n_tokens + n > MAX_OUT || c->text_len + len > TEXT_CAP) return;
    memcpy(c->tokens + c->n_tokens, ids, n * sizeof ids[0]);
    c->n_tokens += n;
    memcpy(c->text + c->text_len, text, len);
    c->text_len += len;
    for (i = 0; i < n; ++i) {
      float lp = 1.0f, top_lp[3];
      int32_t top_ids[3];
      size_t n_top = 0;
      di_error *e = di_event_logprobs(ev, i, &lp, top_ids, top_lp, 3, &n_top);
      if (with_logprobs) {
        if (OK(e)) {
          CHECK(lp <= 0.0f && n_top == 3);
          CHECK(top_lp[0] >= top_lp[1] && top_lp[1] >= top_lp[2]);
          ++c->logprob_events;
        }
      } else {
        FAILS(e, DI_ERR_STATE);
      }
    }
    {
      /* All of the event's logprobs in one call. */
      const float *lps = NULL, *top = NULL;
      const int32_t *ranks = NULL, *top_ids = NULL;
      size_t n_lp = 0, k = 0;
      di_error *e = di_event_logprobs_view(ev, &lps, &ranks, &top_ids, &top, &n_lp, &k);
      if (with_logprobs) {
        if (OK(e)) CHECK(n_lp == n && k == 3 && (n == 0 || (ranks[0] >= 1 && lps[0] <= 0.0f && top[0] >= top[1])));
      } else {
        FAILS(e, DI_ERR_STATE);
      }
    }
    return;
  }
  CHECK(kind == DI_EVENT_FINISHED);
  CHECK(n == 0);
  c->finished = 1;
  c->reason = reason;
  CHECK(reason != DI_FINISH_NONE);
  OK(di_event_usage(ev, &c->prompt_tokens, &c->completion_tokens, &c->cached_tokens));
  FAILS(di_event_usage(ev, NULL, NULL, NULL), DI_ERR_INVALID_ARGUMENT); /* every out-pointer is required */
  if (OK(di_event_seed(ev, &seed))) c->seed = seed;
  if (OK(di_event_error(ev, &err))) {
    CHECK((err != NULL) == (reason == DI_FINISH_ERROR));
    if (err) {
      fprintf(stderr, "completion %d failed: %s\n", (int)idx, di_error_message(err));
      di_error_free(err);
    }
  }
}

/* Generates with `sp` (n completions) and polls until every completion finished. */
static int generate(di_session *s, const di_sampling *sp, int n, generation_out *out, int with_logprobs) {
  int finished = 0, i;
  memset(out, 0, sizeof *out);
  if (!OK(di_session_generate(s, sp))) return 0;
  while (!out->done) {
    di_event *ev = NULL;
    di_event_type kind = 0;
    if (!OK(di_session_poll(s, 60000, &ev))) return 0;
    if (!ev) {
      fprintf(stderr, "no event for 60 s\n");
      ++g_failures;
      return 0;
    }
    read_event(ev, out, with_logprobs);
    if (OK(di_event_kind(ev, &kind)) && kind == DI_EVENT_FINISHED) ++finished;
    di_event_free(ev);
  }
  CHECK(finished == n);
  /* Nothing is left: the session is idle. */
  {
    di_event *ev = NULL;
    FAILS(di_session_poll(s, 0, &ev), DI_ERR_STATE);
    CHECK(ev == NULL);
  }
  for (i = 0; i < n; ++i) {
    CHECK(out->c[i].finished);
    CHECK(out->c[i].completion_tokens == out->c[i].n_tokens);
  }
  return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* Collecting a generation through a callback                                                     */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int finished;
  int done;
  int events;
  size_t tokens;
} callback_state;

static void on_event(void *user, di_event *ev) {
  callback_state *st = (callback_state *)user;
  di_event_type kind = 0;
  size_t n = 0;
  int32_t ids[MAX_OUT];
  if (OK(di_event_kind(ev, &kind)) && OK(di_event_tokens(ev, ids, MAX_OUT, &n))) {
    pthread_mutex_lock(&st->mu);
    ++st->events;
    st->tokens += kind == DI_EVENT_TOKENS ? n : 0;
    if (kind == DI_EVENT_FINISHED) ++st->finished;
    if (kind == DI_EVENT_DONE) ++st->done;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
  }
  di_event_free(ev);
}

/* ---------------------------------------------------------------------------------------------- */

static int same_tokens(const completion_out *a, const completion_out *b) {
  return a->n_tokens == b->n_tokens && memcmp(a->tokens, b->tokens, a->n_tokens * sizeof a->tokens[0]) == 0 &&
         a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Structured outputs: grammars on the engine, tokenizers and matchers without one                */

static const char kSchema[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 6},"
    " \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 120}},"
    " \"required\": [\"name\", \"age\"], \"additionalProperties\": false}";

static void structured_outputs(di_engine *engine, const char *model_dir) {
  di_grammar *g = NULL, *compact = NULL, *tg = NULL;
  di_sampling *sp = NULL;
  di_session *s = NULL;
  di_tokenizer *tok = NULL, *etok = NULL;
  di_matcher *m = NULL;
  static generation_out out;
  int32_t vocab = 0, ids[64], flag = -1, eos = 1;
  uint32_t mask[(4096 + 31) / 32];
  size_t n = 0, len = 0;
  char text[256];

  /* Validation without compiling; errors name what is wrong. */
  OK(di_grammar_validate(DI_GRAMMAR_REGEX, "[a-z]+", 6, 0, 0));
  FAILS(di_grammar_validate(DI_GRAMMAR_REGEX, "[a-z", 4, 0, 0), DI_ERR_GRAMMAR);
  FAILS(di_grammar_validate(DI_GRAMMAR_EBNF, "root ::= missing", 16, 0, 0), DI_ERR_GRAMMAR);
  FAILS(di_grammar_validate(9, "x", 1, 0, 0), DI_ERR_INVALID_ARGUMENT);

  /* A JSON Schema constrains a generation: the output is a complete match. */
  if (!OK(di_grammar_compile(engine, DI_GRAMMAR_JSON_SCHEMA, kSchema, strlen(kSchema), &g))) return;
  OK(di_grammar_compile_options(engine, DI_GRAMMAR_JSON_SCHEMA, kSchema, strlen(kSchema), DI_GRAMMAR_COMPACT_WHITESPACE, 0,
                                &compact));
  FAILS(di_grammar_compile(engine, DI_GRAMMAR_JSON_SCHEMA, "{\"type\": 5}", 11, &tg), DI_ERR_GRAMMAR);
  OK(di_sampling_create(&sp));
  OK(di_sampling_set_seed(sp, 3));
  OK(di_sampling_set_max_tokens(sp, 64));
  OK(di_sampling_set_grammar(sp, compact));
  {
    di_grammar *attached = NULL;
    OK(di_sampling_get_grammar(sp, &attached));
    CHECK(attached != NULL && attached != compact); /* a new handle to the same grammar */
    di_grammar_free(attached);
  }
  OK(di_session_create(engine, &s));
  OK(di_session_add_text(s, "Person: ", 8, DI_TEXT_PLAIN));
  if (generate(s, sp, 1, &out, 0)) {
    CHECK(out.c[0].reason == DI_FINISH_STOP);
    CHECK(out.c[0].text_len > 0 && out.c[0].text[0] == '{' && out.c[0].text[out.c[0].text_len - 1] == '}');
    CHECK(memchr(out.c[0].text, ' ', out.c[0].text_len) == NULL || memchr(out.c[0].text, '"', out.c[0].text_len) != NULL);
    /* A matcher agrees that the text is a complete instance. */
    OK(di_matcher_create(compact, &m));
    OK(di_matcher_accept_string(m, out.c[0].text, out.c[0].text_len));
    OK(di_matcher_can_end(m, &flag));
    CHECK(flag == 1);
    di_matcher_free(m);
  }
  OK(di_sampling_set_grammar(sp, NULL));
  di_grammar_free(compact);

  /* Tokenizers: the engine's, and one loaded on its own. */
  OK(di_engine_tokenizer(engine, &etok));
  OK(di_tokenizer_create(model_dir, strlen(model_dir), &tok));
  OK(di_tokenizer_vocab_size(tok, &vocab));
  CHECK(vocab == 4096);
  OK(di_tokenizer_encode(tok, "{\"name\"", 7, DI_TEXT_PLAIN, ids, 64, &n));
  CHECK(n > 0);
  OK(di_tokenizer_decode(etok, ids, n, 0, text, sizeof text, &len));
  CHECK(len == 7 && memcmp(text, "{\"name\"", 7) == 0);

  /* A matcher without a model: masks, tokens, rollback, termination. */
  OK(di_grammar_compile_for_tokenizer(tok, 0, &eos, 1, DI_GRAMMAR_REGEX, "ab|abc", 6, 0, 0, &tg));
  OK(di_matcher_create(tg, &m));
  FAILS(di_matcher_fill_mask(m, mask, 1, &n), DI_ERR_BUFFER_TOO_SMALL);
  CHECK(n == (4096 + 31) / 32);
  OK(di_matcher_fill_mask(m, mask, n, &n));
  CHECK((mask[1 / 32] & (1u << 1)) == 0); /* EOS: nothing matched yet */
  OK(di_matcher_accept_string(m, "ab", 2));
  OK(di_matcher_can_end(m, &flag));
  CHECK(flag == 1);
  OK(di_matcher_fill_mask(m, mask, n, &n));
  CHECK((mask[1 / 32] & (1u << 1)) != 0); /* EOS allowed after "ab" */
  FAILS(di_matcher_accept_string(m, "x", 1), DI_ERR_INVALID_ARGUMENT);
  OK(di_matcher_rollback(m, 1));
  OK(di_matcher_can_end(m, &flag));
  CHECK(flag == 0);
  OK(di_matcher_accept_string(m, "ab", 2));
  OK(di_matcher_accept_token(m, eos));
  OK(di_matcher_is_terminated(m, &flag));
  CHECK(flag == 1);
  OK(di_matcher_reset(m));
  OK(di_matcher_is_terminated(m, &flag));
  CHECK(flag == 0);
  FAILS(di_matcher_accept_token(m, 5000), DI_ERR_INVALID_ARGUMENT);
  di_matcher_free(m);
  di_matcher_free(m);
  FAILS(di_matcher_reset(m), DI_ERR_INVALID_HANDLE);

  di_grammar_free(tg);
  di_grammar_free(g);
  di_tokenizer_free(tok);
  di_tokenizer_free(etok);
  di_session_free(s);
  di_sampling_free(sp);
}

/* ---------------------------------------------------------------------------------------------- */
/* Additions of 0.2: engine facts, statistics, sampling getters, replay, queues                   */

static int32_t on_progress(void *user, uint64_t done, uint64_t total) {
  int *calls = (int *)user;
  CHECK(done <= total);
  ++*calls;
  return 0;
}

static void engine_facts(di_engine *engine) {
  static const di_model_info keys[] = {DI_MODEL_LAYERS, DI_MODEL_HIDDEN_SIZE, DI_MODEL_ATTENTION_HEADS,
                                       DI_MODEL_ROUTED_EXPERTS, DI_MODEL_EXPERTS_PER_TOKEN, DI_MODEL_VOCAB_SIZE,
                                       DI_MODEL_MAX_POSITION, DI_MODEL_PARAMETERS, DI_MODEL_WEIGHT_BYTES};
  static const di_stat stats_keys[] = {DI_STAT_RUNNING_SEQUENCES, DI_STAT_WAITING_SEQUENCES, DI_STAT_RUNNING_GENERATIONS,
                                       DI_STAT_RESIDENT_SESSIONS, DI_STAT_STATE_BYTES_USED, DI_STAT_STATE_BYTES_TOTAL,
                                       DI_STAT_PROMPT_TOKENS, DI_STAT_GENERATED_TOKENS, DI_STAT_STEPS,
                                       DI_STAT_PREEMPTIONS, DI_STAT_STEP_MICROSECONDS};
  di_device device = -1;
  int32_t has = -1;
  int64_t v = 0;
  uint64_t u = 0;
  size_t i, len = 0;
  char dtype[16];
  di_stats *st = NULL;

  OK(di_engine_device(engine, &device));
  CHECK(device == DI_DEVICE_CPU);
  OK(di_engine_has_tokenizer(engine, &has));
  CHECK(has == 1);
  for (i = 0; i < sizeof keys / sizeof keys[0]; ++i) {
    v = -1;
    OK(di_engine_model_info(engine, keys[i], &v));
    CHECK(v > 0);
  }
  OK(di_engine_model_info(engine, DI_MODEL_VOCAB_SIZE, &v));
  CHECK(v == 4096);
  FAILS(di_engine_model_info(engine, 999, &v), DI_ERR_INVALID_ARGUMENT);
  OK(di_engine_weight_dtype(engine, dtype, sizeof dtype, &len));
  CHECK(len == 3 && memcmp(dtype, "f32", 3) == 0);
  if (OK(di_engine_stats(engine, &st))) {
    for (i = 0; i < sizeof stats_keys / sizeof stats_keys[0]; ++i) OK(di_stats_get(st, stats_keys[i], &u));
    OK(di_stats_get(st, DI_STAT_STATE_BYTES_TOTAL, &u));
    CHECK(u > 0);
    FAILS(di_stats_get(st, 0, &u), DI_ERR_INVALID_ARGUMENT);
    di_stats_free(st);
    FAILS(di_stats_get(st, DI_STAT_STEPS, &u), DI_ERR_INVALID_HANDLE);
  }
}

/* Every getter returns what its setter set. */
static void sampling_getters(void) {
  di_sampling *sp = NULL;
  float f = 0;
  int32_t i = 0, has = -1, ids[4], stops[2] = {8, 9}, bias_ids[2] = {6, 5};
  float bias[2] = {1.5f, -2.0f}, bias_out[4];
  uint64_t seed = 0;
  size_t n = 0, len = 0;
  char text[16];
  di_grammar *g = (di_grammar *)1;

  if (!OK(di_sampling_create(&sp))) return;
  OK(di_sampling_get_seed(sp, &seed, &has));
  CHECK(has == 0 && seed == 0);
  OK(di_sampling_get_logprobs(sp, &i));
  CHECK(i == -1);
  OK(di_sampling_set_temperature(sp, 0.5f));
  OK(di_sampling_get_temperature(sp, &f));
  CHECK(f == 0.5f);
  OK(di_sampling_set_top_k(sp, -1)); /* -1 and 0 both mean off, everywhere */
  OK(di_sampling_get_top_k(sp, &i));
  CHECK(i == -1);
  OK(di_sampling_set_top_p(sp, 0.25f));
  OK(di_sampling_get_top_p(sp, &f));
  CHECK(f == 0.25f);
  OK(di_sampling_set_min_p(sp, 0.125f));
  OK(di_sampling_get_min_p(sp, &f));
  CHECK(f == 0.125f);
  OK(di_sampling_set_repetition_penalty(sp, 1.5f));
  OK(di_sampling_get_repetition_penalty(sp, &f));
  CHECK(f == 1.5f);
  OK(di_sampling_set_presence_penalty(sp, -0.5f));
  OK(di_sampling_get_presence_penalty(sp, &f));
  CHECK(f == -0.5f);
  OK(di_sampling_set_frequency_penalty(sp, 0.75f));
  OK(di_sampling_get_frequency_penalty(sp, &f));
  CHECK(f == 0.75f);
  OK(di_sampling_set_max_tokens(sp, 33));
  OK(di_sampling_get_max_tokens(sp, &i));
  CHECK(i == 33);
  OK(di_sampling_set_min_tokens(sp, 3));
  OK(di_sampling_get_min_tokens(sp, &i));
  CHECK(i == 3);
  OK(di_sampling_set_n(sp, 4));
  OK(di_sampling_get_n(sp, &i));
  CHECK(i == 4);
  OK(di_sampling_set_first_completion(sp, 7));
  OK(di_sampling_get_first_completion(sp, &i));
  CHECK(i == 7);
  FAILS(di_sampling_set_first_completion(sp, -1), DI_ERR_INVALID_ARGUMENT);
  OK(di_sampling_set_seed(sp, 99));
  OK(di_sampling_get_seed(sp, &seed, &has));
  CHECK(has == 1 && seed == 99);
  OK(di_sampling_set_ignore_eos(sp, 1));
  OK(di_sampling_get_ignore_eos(sp, &i));
  CHECK(i == 1);
  OK(di_sampling_set_logprobs(sp, 4));
  OK(di_sampling_get_logprobs(sp, &i));
  CHECK(i == 4);
  OK(di_sampling_set_prompt_logprobs(sp, 0));
  OK(di_sampling_get_prompt_logprobs(sp, &i));
  CHECK(i == 0);
  OK(di_sampling_set_logit_bias(sp, bias_ids, bias, 2));
  FAILS(di_sampling_get_logit_bias(sp, ids, bias_out, 1, &n), DI_ERR_BUFFER_TOO_SMALL);
  CHECK(n == 2);
  OK(di_sampling_get_logit_bias(sp, ids, bias_out, 4, &n));
  CHECK(n == 2 && ids[0] == 5 && bias_out[0] == -2.0f && ids[1] == 6 && bias_out[1] == 1.5f); /* in id order */
  OK(di_sampling_set_allowed_tokens(sp, stops, 2));
  OK(di_sampling_get_allowed_tokens(sp, ids, 4, &n));
  CHECK(n == 2 && ids[0] == 8 && ids[1] == 9);
  OK(di_sampling_set_stop_tokens(sp, stops, 1));
  OK(di_sampling_get_stop_tokens(sp, ids, 4, &n));
  CHECK(n == 1 && ids[0] == 8);
  OK(di_sampling_add_stop_string(sp, "END", 3));
  OK(di_sampling_add_stop_string(sp, "\n\n", 2));
  OK(di_sampling_stop_string_count(sp, &n));
  CHECK(n == 2);
  OK(di_sampling_get_stop_string(sp, 0, text, sizeof text, &len));
  CHECK(len == 3 && memcmp(text, "END", 3) == 0);
  FAILS(di_sampling_get_stop_string(sp, 2, text, sizeof text, &len), DI_ERR_INVALID_ARGUMENT);
  OK(di_sampling_set_include_stop_string(sp, 1));
  OK(di_sampling_get_include_stop_string(sp, &i));
  CHECK(i == 1);
  OK(di_sampling_set_skip_special_tokens(sp, 0));
  OK(di_sampling_get_skip_special_tokens(sp, &i));
  CHECK(i == 0);
  OK(di_sampling_get_grammar(sp, &g));
  CHECK(g == NULL);
  di_sampling_free(sp);
}

/* n completions, then completion 1 alone from the same seed: the same tokens. */
static void replay_one_completion(di_engine *engine, const int32_t *ids, size_t n_ids) {
  static generation_out both, alone;
  di_sampling *sp = NULL;
  di_session *s = NULL;
  if (!OK(di_sampling_create(&sp))) return;
  OK(di_sampling_set_seed(sp, 2024));
  OK(di_sampling_set_max_tokens(sp, 8));
  OK(di_sampling_set_ignore_eos(sp, 1));
  OK(di_sampling_set_n(sp, 2));
  OK(di_session_create(engine, &s));
  OK(di_session_add_tokens(s, ids, n_ids));
  if (generate(s, sp, 2, &both, 0)) {
    di_session_free(s);
    s = NULL;
    OK(di_session_create(engine, &s));
    OK(di_session_add_tokens(s, ids, n_ids));
    OK(di_sampling_set_n(sp, 1));
    OK(di_sampling_set_first_completion(sp, 1));
    if (generate(s, sp, 1, &alone, 0)) {
      CHECK(same_tokens(&alone.c[0], &both.c[1]));
      CHECK(!same_tokens(&alone.c[0], &both.c[0]));
    }
  }
  di_session_free(s);
  di_sampling_free(sp);
}

/* A cancelled reply stays in the context when the session asks for it. */
static void keep_cancelled(di_engine *engine, const int32_t *ids, size_t n_ids) {
  di_sampling *sp = NULL;
  di_session *s = NULL;
  di_event *ev = NULL;
  di_event_type kind = 0;
  int64_t before = 0, after = 0;
  if (!OK(di_sampling_create(&sp))) return;
  OK(di_sampling_set_max_tokens(sp, 1000));
  OK(di_sampling_set_ignore_eos(sp, 1));
  OK(di_session_create(engine, &s));
  OK(di_session_set_keep_cancelled_output(s, 1));
  OK(di_session_add_tokens(s, ids, n_ids));
  OK(di_session_context_length(s, &before));
  if (OK(di_session_generate(s, sp))) {
    size_t generated = 0;
    for (;;) {
      const int32_t *t = NULL;
      size_t n = 0;
      if (!OK(di_session_poll(s, 60000, &ev)) || !ev) break;
      OK(di_event_kind(ev, &kind));
      OK(di_event_tokens_view(ev, &t, &n));
      generated += kind == DI_EVENT_TOKENS ? n : 0;
      di_event_free(ev);
      if (generated >= 3) OK(di_session_cancel(s));
      if (kind == DI_EVENT_DONE) break;
    }
    OK(di_session_context_length(s, &after));
    CHECK(kind == DI_EVENT_DONE && after == before + (int64_t)generated);
  }
  di_session_free(s);
  di_sampling_free(sp);
}

/* Two sessions on one completion queue, waited for through its file descriptor. */
static void completion_queue(di_engine *engine, const int32_t *ids, size_t n_ids) {
  di_queue *q = NULL;
  di_session *a = NULL, *b = NULL;
  di_sampling *sp = NULL;
  int32_t fd = -1;
  int done_a = 0, done_b = 0, events = 0;
  if (!OK(di_queue_create(&q))) return;
  OK(di_queue_fd(q, &fd));
  CHECK(fd >= 0);
  OK(di_sampling_create(&sp));
  OK(di_sampling_set_max_tokens(sp, 5));
  OK(di_session_create(engine, &a));
  OK(di_session_create(engine, &b));
  OK(di_session_set_queue(a, q, 1));
  OK(di_session_set_queue(b, q, 2));
  OK(di_session_add_tokens(a, ids, n_ids));
  OK(di_session_add_tokens(b, ids, n_ids / 2 + 1));
  OK(di_session_generate(a, sp));
  OK(di_session_generate(b, sp));
  {
    di_event *ev = NULL;
    FAILS(di_session_poll(a, 0, &ev), DI_ERR_STATE); /* events go to the queue */
  }
  while (!(done_a && done_b) && events < 1000) {
    fd_set readable;
    struct timeval tv = {60, 0};
    FD_ZERO(&readable);
    FD_SET(fd, &readable);
    if (select(fd + 1, &readable, NULL, NULL, &tv) != 1) {
      CHECK(0 && "the queue's fd did not become readable");
      break;
    }
    for (;;) {
      di_event *ev = NULL;
      uint64_t tag = 0;
      di_event_type kind = 0;
      if (!OK(di_queue_poll(q, 0, &ev, &tag)) || !ev) break;
      ++events;
      CHECK(tag == 1 || tag == 2);
      OK(di_event_kind(ev, &kind));
      if (kind == DI_EVENT_DONE) *(tag == 1 ? &done_a : &done_b) += 1;
      di_event_free(ev);
    }
  }
  CHECK(done_a == 1 && done_b == 1);
  {
    /* Empty again: the descriptor is not readable. */
    fd_set readable;
    struct timeval tv = {0, 0};
    FD_ZERO(&readable);
    FD_SET(fd, &readable);
    CHECK(select(fd + 1, &readable, NULL, NULL, &tv) == 0);
  }
  OK(di_session_set_queue(a, NULL, 0));
  di_session_free(a);
  di_session_free(b);
  di_queue_free(q);
  di_queue_free(q);
  {
    di_event *ev = NULL;
    uint64_t tag = 0;
    FAILS(di_queue_poll(q, 0, &ev, &tag), DI_ERR_INVALID_HANDLE);
  }
  di_sampling_free(sp);
}

int main(int argc, char **argv) {
  static const char kPrompt[] = "Once upon a time, there was a little";
  di_engine_config *cfg = NULL;
  di_engine *engine = NULL;
  di_sampling *sp = NULL, *defaults = NULL, *copy = NULL;
  di_session *s = NULL, *chat = NULL, *cb = NULL;
  int32_t vocab = 0, eos[8], ids[128], ctx[1024];
  int64_t max_context = 0, capacity = 0, ctx_len = 0, ctx_len2 = 0;
  size_t n = 0, n_ids = 0, len = 0;
  char text[1024], version[64];
  int log_tag = 42, progress_calls = 0;
  generation_out g1, g2;
  static generation_out g3; /* large: keep off the stack */
  callback_state cbs;

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }

  /* Versions and errors. */
  sprintf(version, "%d.%d.%d", DI_VERSION_MAJOR, DI_VERSION_MINOR, DI_VERSION_PATCH);
  CHECK(strcmp(di_version(), version) == 0);
  CHECK(di_abi_version() == DI_ABI_VERSION);
  CHECK(di_version_number() == ((uint32_t)DI_VERSION_MAJOR << 16 | (uint32_t)DI_VERSION_MINOR << 8 | (uint32_t)DI_VERSION_PATCH));
  CHECK(di_error_code(NULL) == DI_OK);
  CHECK(strcmp(di_error_message(NULL), "") == 0);
  di_error_free(NULL);
  CHECK(strcmp(di_code_name(DI_OK), "ok") == 0);
  CHECK(strlen(di_code_name(DI_ERR_BUFFER_TOO_SMALL)) > 0);

  /* Logging: the engine logs its loading at INFO. */
  FAILS(di_set_log_level(DI_LOG_OFF + 1), DI_ERR_INVALID_ARGUMENT);
  OK(di_set_log_level(DI_LOG_INFO));
  di_set_log_callback(on_log, &log_tag);

  /* Configuration. */
  FAILS(di_engine_config_create(NULL), DI_ERR_INVALID_ARGUMENT);
  if (!OK(di_engine_config_create(&cfg))) return 1;
  FAILS(di_engine_create(cfg, &engine), DI_ERR_INVALID_ARGUMENT); /* no model path */
  OK(di_engine_config_set_model_path(cfg, argv[1], strlen(argv[1])));
  OK(di_engine_config_set_device(cfg, DI_DEVICE_CPU));
  FAILS(di_engine_config_set_device(cfg, 7), DI_ERR_INVALID_ARGUMENT);
  OK(di_engine_config_set_threads(cfg, 2));
  OK(di_engine_config_set_max_sequences(cfg, 16));
  OK(di_engine_config_set_max_context(cfg, 1024));
  OK(di_engine_config_set_state_memory(cfg, 0));
  OK(di_engine_config_set_state_memory_fraction(cfg, 0.5));
  FAILS(di_engine_config_set_state_memory_fraction(cfg, 1.5), DI_ERR_INVALID_ARGUMENT);
  OK(di_engine_config_set_max_batched_tokens(cfg, 512));
  OK(di_engine_config_set_seed(cfg, 1234));
  OK(di_engine_config_set_option(cfg, "graphs", 6, "on", 2));
  FAILS(di_engine_config_set_option(cfg, "no_such_option", 14, "1", 1), DI_ERR_INVALID_ARGUMENT);
  FAILS(di_engine_config_set_option(cfg, "pdl", 3, "maybe", 5), DI_ERR_INVALID_ARGUMENT);
  OK(di_engine_config_set_progress_callback(cfg, on_progress, &progress_calls));
  if (!OK(di_engine_create(cfg, &engine))) return 1;
  CHECK(progress_calls > 0);
  di_engine_config_free(cfg); /* the engine copied it */
  di_engine_config_free(cfg); /* freeing twice does nothing */
  FAILS(di_engine_config_set_threads(cfg, 1), DI_ERR_INVALID_HANDLE);

  pthread_mutex_lock(&g_log_mu);
  CHECK(g_log_messages > 0);
  pthread_mutex_unlock(&g_log_mu);
  di_set_log_callback(NULL, NULL);
  OK(di_set_log_level(DI_LOG_WARN));

  /* Engine getters. */
  OK(di_engine_vocab_size(engine, &vocab));
  CHECK(vocab == 4096);
  OK(di_engine_max_context(engine, &max_context));
  CHECK(max_context == 1024);
  OK(di_engine_capacity_tokens(engine, &capacity));
  CHECK(capacity >= 1024);
  FAILS(di_engine_eos_tokens(engine, NULL, 0, &n), DI_ERR_BUFFER_TOO_SMALL);
  CHECK(n == 1);
  OK(di_engine_eos_tokens(engine, eos, 8, &n));
  CHECK(n == 1 && eos[0] == 1);

  engine_facts(engine);
  sampling_getters();

  /* Tokenizer: size query, then the ids; the text round-trips. */
  FAILS(di_engine_tokenize(engine, kPrompt, strlen(kPrompt), DI_TEXT_PLAIN, NULL, 0, &n_ids), DI_ERR_BUFFER_TOO_SMALL);
  CHECK(n_ids > 0 && n_ids < 64);
  OK(di_engine_tokenize(engine, kPrompt, strlen(kPrompt), DI_TEXT_PLAIN, ids, 128, &n));
  CHECK(n == n_ids);
  FAILS(di_engine_detokenize(engine, ids, n_ids, 0, NULL, 0, &len), DI_ERR_BUFFER_TOO_SMALL);
  CHECK(len == strlen(kPrompt));
  OK(di_engine_detokenize(engine, ids, n_ids, 0, text, sizeof text, &len));
  CHECK(len == strlen(kPrompt) && memcmp(text, kPrompt, len) == 0);
  {
    /* A control token: recognised with DI_TEXT_SPECIAL, plain text otherwise; skipped on request. */
    static const char kBos[] = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    int32_t special[64];
    OK(di_engine_tokenize(engine, kBos, strlen(kBos), DI_TEXT_SPECIAL, special, 64, &n));
    CHECK(n == 1);
    OK(di_engine_tokenize(engine, kBos, strlen(kBos), DI_TEXT_PLAIN, special + 1, 63, &n));
    CHECK(n > 1);
    OK(di_engine_detokenize(engine, special, 1, 0, text, sizeof text, &len));
    CHECK(len == strlen(kBos) && memcmp(text, kBos, len) == 0);
    OK(di_engine_detokenize(engine, special, 1, DI_DETOK_SKIP_SPECIAL, text, sizeof text, &len));
    CHECK(len == 0);
  }

  /* Sampling parameters: every setter. */
  OK(di_sampling_create(&sp));
  OK(di_engine_sampling_defaults(engine, &defaults));
  OK(di_sampling_set_temperature(sp, 0.8f));
  FAILS(di_sampling_set_temperature(sp, -1.0f), DI_ERR_INVALID_ARGUMENT);
  OK(di_sampling_set_top_k(sp, 50));
  OK(di_sampling_set_top_p(sp, 0.95f));
  FAILS(di_sampling_set_top_p(sp, 2.0f), DI_ERR_INVALID_ARGUMENT);
  OK(di_sampling_set_min_p(sp, 0.01f));
  OK(di_sampling_set_repetition_penalty(sp, 1.05f));
  OK(di_sampling_set_presence_penalty(sp, 0.1f));
  OK(di_sampling_set_frequency_penalty(sp, 0.1f));
  OK(di_sampling_set_max_tokens(sp, 12));
  OK(di_sampling_set_min_tokens(sp, 2));
  OK(di_sampling_set_n(sp, 2));
  OK(di_sampling_set_seed(sp, 7));
  OK(di_sampling_clear_seed(sp));
  OK(di_sampling_set_seed(sp, 42));
  OK(di_sampling_set_ignore_eos(sp, 0));
  OK(di_sampling_set_logprobs(sp, 3));
  OK(di_sampling_set_prompt_logprobs(sp, 2));
  {
    int32_t bias_ids[2] = {5, 6};
    float bias[2] = {-100.0f, -100.0f};
    int32_t allowed[1] = {7};
    int32_t stops[1] = {8};
    OK(di_sampling_set_logit_bias(sp, bias_ids, bias, 2));
    OK(di_sampling_set_allowed_tokens(sp, allowed, 1));
    OK(di_sampling_set_allowed_tokens(sp, NULL, 0)); /* no restriction */
    OK(di_sampling_set_stop_tokens(sp, stops, 1));
  }
  OK(di_sampling_add_stop_string(sp, "zzzz", 4));
  OK(di_sampling_clear_stop_strings(sp));
  OK(di_sampling_add_stop_string(sp, "\xe2\x88\x9e\xe2\x88\x9e", 6)); /* never produced */
  OK(di_sampling_set_include_stop_string(sp, 0));
  OK(di_sampling_set_skip_special_tokens(sp, 1));
  OK(di_sampling_clone(sp, &copy));

  /* A token session: ids and text, two completions with logprobs and prompt logprobs. */
  OK(di_session_create(engine, &s));
  OK(di_session_context_length(s, &ctx_len));
  CHECK(ctx_len == 0);
  OK(di_session_add_tokens(s, ids, n_ids));
  OK(di_session_add_text(s, " girl", 5, DI_TEXT_PLAIN));
  OK(di_session_context_length(s, &ctx_len));
  CHECK(ctx_len > (int64_t)n_ids);
  FAILS(di_session_context_tokens(s, ctx, 1, &n), DI_ERR_BUFFER_TOO_SMALL);
  CHECK((int64_t)n == ctx_len);
  OK(di_session_context_tokens(s, ctx, 1024, &n));
  CHECK((int64_t)n == ctx_len && memcmp(ctx, ids, n_ids * sizeof ids[0]) == 0);

  if (generate(s, sp, 2, &g1, 1)) {
    int i;
    CHECK(g1.prompt_logprob_events == 1);
    CHECK(g1.prompt_logprob_tokens == (size_t)ctx_len - 1);
    for (i = 0; i < 2; ++i) {
      CHECK(g1.c[i].n_tokens >= 2 && g1.c[i].n_tokens <= 12);
      CHECK(g1.c[i].reason == DI_FINISH_LENGTH || g1.c[i].reason == DI_FINISH_STOP);
      CHECK(g1.c[i].seed == 42);
      CHECK((int64_t)g1.c[i].prompt_tokens == ctx_len);
      CHECK(g1.c[i].logprob_events == (int)g1.c[i].n_tokens);
    }
  }
  /* The output of completion 0 joined the context. */
  OK(di_session_context_length(s, &ctx_len2));
  CHECK(ctx_len2 == ctx_len + (int64_t)g1.c[0].n_tokens);

  /* The clone has the same parameters: a fresh session replays the same output. */
  {
    di_session *s2 = NULL;
    OK(di_session_create(engine, &s2));
    OK(di_session_add_tokens(s2, ctx, (size_t)ctx_len));
    if (generate(s2, copy, 2, &g2, 1)) {
      CHECK(same_tokens(&g1.c[0], &g2.c[0]));
      CHECK(same_tokens(&g1.c[1], &g2.c[1]));
    }
    di_session_free(s2);
    di_session_free(s2);
  }

  /* The next turn reuses the kept state. */
  OK(di_sampling_set_logprobs(sp, -1));
  OK(di_sampling_set_prompt_logprobs(sp, -1));
  OK(di_sampling_set_n(sp, 1));
  OK(di_session_add_text(s, " The end.", 9, DI_TEXT_PLAIN));
  if (generate(s, sp, 1, &g2, 0)) {
    CHECK(g2.c[0].cached_tokens > 0);
    CHECK(g2.prompt_logprob_events == 0);
  }

  /* Cancel: a long generation ends as cancelled and leaves the context as it was. */
  OK(di_session_context_length(s, &ctx_len));
  OK(di_sampling_set_max_tokens(copy, 1000));
  OK(di_sampling_set_ignore_eos(copy, 1));
  OK(di_sampling_set_n(copy, 1));
  OK(di_session_generate(s, copy));
  {
    di_event *ev = NULL;
    di_finish_reason reason = DI_FINISH_NONE;
    di_event_type kind = 0;
    FAILS(di_session_generate(s, copy), DI_ERR_STATE);
    OK(di_session_poll(s, 60000, &ev));
    CHECK(ev != NULL);
    di_event_free(ev);
    OK(di_session_cancel(s));
    for (;;) {
      ev = NULL;
      if (!OK(di_session_poll(s, 60000, &ev)) || !ev) break;
      OK(di_event_kind(ev, &kind));
      if (kind == DI_EVENT_FINISHED) OK(di_event_finish_reason(ev, &reason));
      di_event_free(ev);
      if (kind == DI_EVENT_DONE) break;
    }
    CHECK(kind == DI_EVENT_DONE && reason == DI_FINISH_CANCELLED);
    OK(di_session_cancel(s)); /* nothing runs: no effect */
  }
  OK(di_session_context_length(s, &ctx_len2));
  CHECK(ctx_len2 == ctx_len);

  /* Reset empties the context. */
  OK(di_session_reset(s));
  OK(di_session_context_length(s, &ctx_len));
  CHECK(ctx_len == 0);

  /* A chat session: messages and tool calls, two turns. */
  OK(di_session_create(engine, &chat));
  OK(di_session_add_message(chat, DI_ROLE_SYSTEM, "You tell stories.", 17));
  OK(di_session_add_message(chat, DI_ROLE_USER, "Tell me a story.", 16));
  FAILS(di_session_add_tokens(chat, ids, 1), DI_ERR_STATE);
  OK(di_session_context_length(chat, &ctx_len));
  CHECK(ctx_len > 0);
  if (generate(chat, defaults, 1, &g3, 0)) CHECK(g3.c[0].n_tokens > 0);
  OK(di_session_context_length(chat, &ctx_len2));
  CHECK(ctx_len2 > ctx_len);
  OK(di_session_set_tools(chat, "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]", 59));
  FAILS(di_session_set_tools(chat, "[", 1), DI_ERR_INVALID_ARGUMENT);
  OK(di_session_add_tool_call(chat, "get_weather", 11, "{\"city\": \"Paris\"}", 17));
  OK(di_session_add_message(chat, DI_ROLE_TOOL, "sunny", 5));
  OK(di_session_context_length(chat, &ctx_len));
  CHECK(ctx_len > ctx_len2);
  OK(di_sampling_set_max_tokens(defaults, 8));
  if (generate(chat, defaults, 1, &g3, 0)) CHECK(g3.c[0].n_tokens > 0);

  /* A session that delivers its events to a callback. */
  memset(&cbs, 0, sizeof cbs);
  pthread_mutex_init(&cbs.mu, NULL);
  pthread_cond_init(&cbs.cv, NULL);
  OK(di_session_create(engine, &cb));
  OK(di_session_set_callback(cb, on_event, &cbs));
  OK(di_session_add_tokens(cb, ids, n_ids));
  OK(di_sampling_set_n(sp, 3));
  OK(di_sampling_set_max_tokens(sp, 6));
  OK(di_sampling_set_min_tokens(sp, 0));
  if (OK(di_session_generate(cb, sp))) {
    di_event *ev = NULL;
    FAILS(di_session_poll(cb, 0, &ev), DI_ERR_STATE); /* events go to the callback */
    pthread_mutex_lock(&cbs.mu);
    while (!cbs.done) pthread_cond_wait(&cbs.cv, &cbs.mu);
    CHECK(cbs.finished == 3 && cbs.done == 1);
    CHECK(cbs.tokens >= 3 && cbs.tokens <= 18);
    CHECK(cbs.events >= 7);
    pthread_mutex_unlock(&cbs.mu);
  }
  /* The generation has ended once its last event arrived; wait for the session to be idle. */
  {
    int tries;
    di_error *e = NULL;
    for (tries = 0; tries < 6000; ++tries) {
      e = di_session_set_callback(cb, NULL, NULL);
      if (!e || di_error_code(e) != DI_ERR_STATE) break;
      di_error_free(e);
      e = NULL;
      {
        di_event *ev = NULL;
        FAILS(di_session_poll(cb, 0, &ev), DI_ERR_STATE);
      }
    }
    OK(e);
  }
  di_session_free(cb);
  pthread_cond_destroy(&cbs.cv);
  pthread_mutex_destroy(&cbs.mu);

  /* Freed handles. */
  di_sampling_free(copy);
  di_sampling_free(copy);
  FAILS(di_sampling_set_n(copy, 1), DI_ERR_INVALID_HANDLE);
  di_sampling_free(defaults);
  di_session_free(s);
  {
    di_event *ev = NULL;
    FAILS(di_session_poll(s, 0, &ev), DI_ERR_INVALID_HANDLE);
  }

  replay_one_completion(engine, ids, n_ids);
  keep_cancelled(engine, ids, n_ids);
  completion_queue(engine, ids, n_ids);
  structured_outputs(engine, argv[1]);

  /* A session outlives its engine: its calls report DI_ERR_CLOSED. */
  di_engine_free(engine);
  di_engine_free(engine);
  FAILS(di_engine_vocab_size(engine, &vocab), DI_ERR_INVALID_HANDLE);
  FAILS(di_session_add_message(chat, DI_ROLE_USER, "hi", 2), DI_ERR_CLOSED);
  FAILS(di_session_generate(chat, sp), DI_ERR_CLOSED);
  di_session_free(chat);
  di_sampling_free(sp);

  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("abi_c99: all checks passed\n");
  return 0;
}
