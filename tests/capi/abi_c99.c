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

static void on_log(void *user, int32_t level, const char *message, size_t len) {
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
    return;
  }
  CHECK(kind == DI_EVENT_FINISHED);
  CHECK(n == 0);
  c->finished = 1;
  c->reason = reason;
  CHECK(reason != DI_FINISH_NONE);
  OK(di_event_usage(ev, &c->prompt_tokens, &c->completion_tokens, &c->cached_tokens));
  OK(di_event_usage(ev, NULL, NULL, NULL)); /* each out-pointer is optional */
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
  while (finished < n) {
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
  int log_tag = 42;
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
  if (!OK(di_engine_create(cfg, &engine))) return 1;
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
      OK(di_event_finish_reason(ev, &reason));
      di_event_free(ev);
      if (kind == DI_EVENT_FINISHED) break;
    }
    CHECK(kind == DI_EVENT_FINISHED && reason == DI_FINISH_CANCELLED);
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
    while (cbs.finished < 3) pthread_cond_wait(&cbs.cv, &cbs.mu);
    CHECK(cbs.tokens >= 3 && cbs.tokens <= 18);
    CHECK(cbs.events >= 6);
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
