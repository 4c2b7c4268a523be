/*
 * deepinfer.h - the C ABI of DeepInfer, an embeddable inference engine for DeepSeek-V4-family models.
 * This is the only public header; it compiles as C99 and as C++.
 *
 * CONVENTIONS
 *
 * Handles. Every object is an opaque handle made by di_<object>_create (or a call that names what it
 *   returns) and released by di_<object>_free. Free functions accept NULL. Handles are not memory
 *   addresses and are never reused: after a handle is freed, every call that is given it returns
 *   DI_ERR_INVALID_HANDLE, and freeing it again does nothing.
 *
 * Errors. A call that can fail returns di_error*: NULL on success, otherwise an error carrying a
 *   stable di_code and a UTF-8 message, which the caller owns and releases with di_error_free (once).
 *   Out-parameters are written only on success. No call aborts the process on bad input.
 *
 * Buffers. Inputs come as (pointer, length) pairs; text is UTF-8 and needs no NUL terminator.
 *   Outputs go into caller buffers as (buf, cap, *out_len): on success *out_len is the number of
 *   elements written; when cap is too small the call returns DI_ERR_BUFFER_TOO_SMALL, writes nothing
 *   to buf and sets *out_len to the number needed (so a call with cap 0 asks for the size). Output
 *   text is not NUL-terminated.
 *
 * Threading. di_engine is thread-safe: any number of threads may create sessions, tokenize and so on
 *   concurrently. A di_session, di_sampling, di_event or di_engine_config is used by one thread at a
 *   time, with one exception: di_session_cancel may be called from any thread at any time.
 *   Objects passed to a call are copied or referenced by the callee as documented; the caller may
 *   free its own handle right after the call returns.
 *
 * Seeds. Random sampling is keyed by (seed, completion index, output position) through a
 *   counter-based generator: completion i of a generation with seed S draws its t-th token from the
 *   stream (S, i, t). The same seed, prompt and sampling parameters give the same tokens whatever
 *   else the engine is running and however the work is batched or scheduled. A generation without
 *   a seed draws one from the engine (di_engine_config_set_seed makes those draws reproducible too);
 *   every finished completion reports the seed it used (di_event_seed), so any output can be
 *   replayed by setting that seed.
 *
 * Streaming. Output is pull-based: di_session_generate starts a generation and di_session_poll
 *   returns its events (new tokens with their text, then one FINISHED event per completion). A
 *   callback (di_session_set_callback) may receive the events instead; no binding needs it.
 */
#ifndef DEEPINFER_H
#define DEEPINFER_H

#include <stddef.h>
#include <stdint.h>

#if defined(DI_BUILDING_LIBRARY)
#define DI_API __attribute__((visibility("default")))
#else
#define DI_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Versions                                                                                       */

#define DI_VERSION_MAJOR 0
#define DI_VERSION_MINOR 1
#define DI_VERSION_PATCH 0
/* The ABI version: the SONAME's number (libdeepinfer.so.0). Bindings check it at build and load time. */
#define DI_ABI_VERSION 0

/* "MAJOR.MINOR.PATCH" of the loaded library (static storage; never freed). */
DI_API const char *di_version(void);
/* DI_ABI_VERSION of the loaded library. */
DI_API uint32_t di_abi_version(void);

/* ---------------------------------------------------------------------------------------------- */
/* Errors                                                                                         */

typedef int32_t di_code;
enum {
  DI_OK = 0,
  DI_ERR_INVALID_ARGUMENT = 1,  /* a parameter is out of range or malformed (message names it) */
  DI_ERR_NOT_FOUND = 2,         /* a file or key that must exist does not */
  DI_ERR_MODEL_FORMAT = 3,      /* a checkpoint, config or tokenizer file is malformed */
  DI_ERR_UNSUPPORTED = 4,       /* valid input this build cannot handle */
  DI_ERR_OUT_OF_MEMORY = 5,
  DI_ERR_CAPACITY = 6,          /* larger than the engine's limits (context length, state memory) */
  DI_ERR_BUFFER_TOO_SMALL = 7,  /* *out_len holds the size needed */
  DI_ERR_CANCELLED = 8,
  DI_ERR_GRAMMAR = 9,           /* a grammar, JSON schema or regular expression failed to compile */
  DI_ERR_IO = 10,
  DI_ERR_BACKEND = 11,          /* the device failed */
  DI_ERR_STATE = 12,            /* not valid in the object's current state (e.g. already generating) */
  DI_ERR_TIMEOUT = 13,
  DI_ERR_CLOSED = 14,           /* the engine behind the object was freed */
  DI_ERR_INVALID_HANDLE = 15,   /* NULL, freed, or a handle of another type */
  DI_ERR_INTERNAL = 100         /* a bug in DeepInfer; please report it */
};

typedef struct di_error di_error;

/* The error's code; DI_OK for NULL. */
DI_API di_code di_error_code(const di_error *err);
/* The error's message (owned by err, valid until di_error_free); "" for NULL. */
DI_API const char *di_error_message(const di_error *err);
/* Releases an error. NULL is ignored. Each error must be freed once. */
DI_API void di_error_free(di_error *err);
/* A short name for a code, e.g. "invalid argument" (static storage). */
DI_API const char *di_code_name(di_code code);

/* ---------------------------------------------------------------------------------------------- */
/* Logging (process-wide; thread-safe)                                                            */

enum { DI_LOG_DEBUG = 0, DI_LOG_INFO = 1, DI_LOG_WARN = 2, DI_LOG_ERROR = 3, DI_LOG_OFF = 4 };
typedef void (*di_log_callback)(void *user, int32_t level, const char *message, size_t len);

/* Messages below `level` are dropped (default DI_LOG_WARN, or $DEEPINFER_LOG). */
DI_API di_error *di_set_log_level(int32_t level);
/* Sends log messages to fn (called from any thread, one message at a time) instead of stderr;
 * fn NULL restores stderr. `message` is valid during the call only. */
DI_API void di_set_log_callback(di_log_callback fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Engine configuration                                                                           */

typedef struct di_engine_config di_engine_config;
typedef int32_t di_device;
enum { DI_DEVICE_AUTO = 0, DI_DEVICE_CPU = 1, DI_DEVICE_CUDA = 2 };

/* A configuration with defaults: device AUTO (CUDA when built and present, else CPU), all CPU
 * threads, 64 concurrent sequences, context up to the model's maximum, state memory sized
 * automatically, 2048 tokens per step. */
DI_API di_error *di_engine_config_create(di_engine_config **out);
DI_API void di_engine_config_free(di_engine_config *cfg);
/* The model directory: config.json, *.safetensors, and optionally tokenizer.json,
 * tokenizer_config.json and generation_config.json. Required. */
DI_API di_error *di_engine_config_set_model_path(di_engine_config *cfg, const char *path, size_t len);
DI_API di_error *di_engine_config_set_device(di_engine_config *cfg, di_device device);
/* CPU worker threads; 0 = one per core. */
DI_API di_error *di_engine_config_set_threads(di_engine_config *cfg, int32_t n);
/* Sequences the engine keeps state for at once (each completion of a running generation, and each
 * idle session whose state is still held, is one). */
DI_API di_error *di_engine_config_set_max_sequences(di_engine_config *cfg, int32_t n);
/* Longest context (prompt + output) of one sequence, in tokens; 0 = the model's maximum. */
DI_API di_error *di_engine_config_set_max_context(di_engine_config *cfg, int64_t tokens);
/* Bytes for the shared pool of model state (compressed entries, indexer keys); 0 = automatic: on a
 * GPU a share of its free memory (di_engine_config_set_state_memory_fraction), on the CPU enough for
 * every sequence's context up to 4096 tokens. di_engine_capacity_tokens reports what fits. */
DI_API di_error *di_engine_config_set_state_memory(di_engine_config *cfg, uint64_t bytes);
/* The share of the GPU's free memory (after the weights) that automatic state memory takes, in
 * (0, 1]; default 0.9. */
DI_API di_error *di_engine_config_set_state_memory_fraction(di_engine_config *cfg, double fraction);
/* Tokens processed per engine step (prefill chunks are cut to fit; decodes always run). */
DI_API di_error *di_engine_config_set_max_batched_tokens(di_engine_config *cfg, int32_t n);
/* Seed of the engine's own generator, from which generations without a seed draw theirs. Without
 * it the engine seeds from the operating system. */
DI_API di_error *di_engine_config_set_seed(di_engine_config *cfg, uint64_t seed);

/* ---------------------------------------------------------------------------------------------- */
/* Engine                                                                                         */

typedef struct di_engine di_engine;

/* Loads the model (logging progress at DI_LOG_INFO) and starts the engine's step thread. The
 * configuration is copied. */
DI_API di_error *di_engine_create(const di_engine_config *cfg, di_engine **out);
/* Cancels every generation, stops the engine and releases the model. Sessions of the engine stay
 * valid handles whose calls return DI_ERR_CLOSED until they are freed. */
DI_API void di_engine_free(di_engine *engine);
/* Vocabulary size of the model (the width of its logits). */
DI_API di_error *di_engine_vocab_size(const di_engine *engine, int32_t *out);
/* Longest context of one sequence, in tokens. */
DI_API di_error *di_engine_max_context(const di_engine *engine, int64_t *out);
/* Tokens of context the state memory holds in total. */
DI_API di_error *di_engine_capacity_tokens(const di_engine *engine, int64_t *out);
/* End-of-sequence token ids (from generation_config.json, else config.json). */
DI_API di_error *di_engine_eos_tokens(const di_engine *engine, int32_t *buf, size_t cap, size_t *out_len);

/* Text flags for tokenizing. */
enum {
  DI_TEXT_PLAIN = 0,   /* the text is plain text: control-token lookalikes become ordinary tokens */
  DI_TEXT_SPECIAL = 1  /* added tokens written in the text are recognised (HF tokenizers' behaviour) */
};
/* Detokenizing flags. */
enum { DI_DETOK_SKIP_SPECIAL = 1 };

/* Tokenizes UTF-8 text (invalid UTF-8 is DI_ERR_INVALID_ARGUMENT). Needs the model's tokenizer.json
 * (DI_ERR_UNSUPPORTED without one). */
DI_API di_error *di_engine_tokenize(const di_engine *engine, const char *text, size_t len, uint32_t flags,
                                    int32_t *buf, size_t cap, size_t *out_len);
/* UTF-8 text of token ids (an id outside the vocabulary is DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_engine_detokenize(const di_engine *engine, const int32_t *ids, size_t n, uint32_t flags,
                                      char *buf, size_t cap, size_t *out_len);

/* ---------------------------------------------------------------------------------------------- */
/* Sampling parameters                                                                            */

typedef struct di_sampling di_sampling;

/* Library defaults: temperature 1, no top-k/top-p/min-p, no penalties, max_tokens 256, n 1, no
 * seed (drawn from the engine), no logprobs. */
DI_API di_error *di_sampling_create(di_sampling **out);
/* Library defaults overridden by the model's generation_config.json (temperature, top_p, top_k,
 * max_new_tokens, repetition_penalty). */
DI_API di_error *di_engine_sampling_defaults(const di_engine *engine, di_sampling **out);
DI_API di_error *di_sampling_clone(const di_sampling *src, di_sampling **out);
DI_API void di_sampling_free(di_sampling *sp);

/* Each setter checks its own range (DI_ERR_INVALID_ARGUMENT names the field and value). Token ids
 * are checked against the vocabulary when a generation starts. */
DI_API di_error *di_sampling_set_temperature(di_sampling *sp, float t);        /* [0, 1e6]; 0 = greedy */
DI_API di_error *di_sampling_set_top_k(di_sampling *sp, int32_t k);            /* 0 = off */
DI_API di_error *di_sampling_set_top_p(di_sampling *sp, float p);              /* (0, 1] */
DI_API di_error *di_sampling_set_min_p(di_sampling *sp, float p);              /* [0, 1] */
DI_API di_error *di_sampling_set_repetition_penalty(di_sampling *sp, float v); /* [0.01, 100]; 1 = off */
DI_API di_error *di_sampling_set_presence_penalty(di_sampling *sp, float v);   /* [-2, 2] */
DI_API di_error *di_sampling_set_frequency_penalty(di_sampling *sp, float v);  /* [-2, 2] */
DI_API di_error *di_sampling_set_max_tokens(di_sampling *sp, int32_t n);       /* >= 1 */
DI_API di_error *di_sampling_set_min_tokens(di_sampling *sp, int32_t n);       /* stop ids and EOS masked until n */
DI_API di_error *di_sampling_set_n(di_sampling *sp, int32_t n);                /* completions per generation */
DI_API di_error *di_sampling_set_seed(di_sampling *sp, uint64_t seed);
DI_API di_error *di_sampling_clear_seed(di_sampling *sp);                      /* draw from the engine */
DI_API di_error *di_sampling_set_ignore_eos(di_sampling *sp, int32_t ignore);  /* EOS does not stop */
/* Return the sampled token's logprob and the top `n` alternatives with each token (0..20; -1 off). */
DI_API di_error *di_sampling_set_logprobs(di_sampling *sp, int32_t n);
/* The same for every prompt token (after the first) in a DI_EVENT_PROMPT_LOGPROBS event (-1 off). */
DI_API di_error *di_sampling_set_prompt_logprobs(di_sampling *sp, int32_t n);
/* Adds bias[i] to the logit of ids[i] (replaces any earlier bias). */
DI_API di_error *di_sampling_set_logit_bias(di_sampling *sp, const int32_t *ids, const float *bias, size_t n);
/* Only these tokens may be sampled (n 0: no restriction). */
DI_API di_error *di_sampling_set_allowed_tokens(di_sampling *sp, const int32_t *ids, size_t n);
/* Generation stops after any of these tokens (in addition to EOS unless ignore_eos). */
DI_API di_error *di_sampling_set_stop_tokens(di_sampling *sp, const int32_t *ids, size_t n);
/* Generation stops when the text contains this string (matched on detokenized text; text that may
 * still become a stop string is held back). The stop string itself is not returned unless
 * include_stop_string is set. A model without a tokenizer takes no stop strings (DI_ERR_UNSUPPORTED when
 * the generation starts). */
DI_API di_error *di_sampling_add_stop_string(di_sampling *sp, const char *s, size_t len);
DI_API di_error *di_sampling_clear_stop_strings(di_sampling *sp);
DI_API di_error *di_sampling_set_include_stop_string(di_sampling *sp, int32_t include);
/* Leave special tokens out of the text of events (their ids are still returned). Default on. */
DI_API di_error *di_sampling_set_skip_special_tokens(di_sampling *sp, int32_t skip);

/* ---------------------------------------------------------------------------------------------- */
/* Sessions: a conversation or a one-shot generation                                              */
/* A session holds a context (token ids) whose model state persists between generations, so a      */
/* follow-up turn only processes its new tokens. The engine may drop the state of an idle session  */
/* when memory is needed; its next generation then recomputes it, with the same results.           */

typedef struct di_session di_session;
typedef int32_t di_role;
enum { DI_ROLE_SYSTEM = 0, DI_ROLE_USER = 1, DI_ROLE_ASSISTANT = 2, DI_ROLE_TOOL = 3 };

DI_API di_error *di_session_create(di_engine *engine, di_session **out);
/* Cancels a running generation and releases the session's state. */
DI_API void di_session_free(di_session *session);

/* Appends token ids to the context (ids outside the vocabulary: DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_session_add_tokens(di_session *session, const int32_t *ids, size_t n);
/* Tokenizes text (DI_TEXT_PLAIN or DI_TEXT_SPECIAL) and appends it to the context. */
DI_API di_error *di_session_add_text(di_session *session, const char *text, size_t len, uint32_t flags);
/* Appends a chat message, encoded in the model's chat format. Message content is always plain text:
 * control-token lookalikes in it never become control tokens. A session that holds chat messages
 * accepts no raw tokens or text, and the reverse. */
DI_API di_error *di_session_add_message(di_session *session, di_role role, const char *content, size_t len);
/* Appends a tool call (function name and JSON arguments) to the last message if it is an assistant
 * message made only of tool calls, else to a new one. */
DI_API di_error *di_session_add_tool_call(di_session *session, const char *name, size_t name_len,
                                          const char *arguments, size_t arguments_len);
/* Number of tokens in the context. */
DI_API di_error *di_session_context_length(const di_session *session, int64_t *out);
/* The context's token ids. */
DI_API di_error *di_session_context_tokens(const di_session *session, int32_t *buf, size_t cap, size_t *out_len);
/* Empties the context (and the chat transcript) and releases the state. Not while generating. */
DI_API di_error *di_session_reset(di_session *session);

/* Starts generating from the context with the given parameters (copied). In a chat session the
 * assistant prompt is added first. Returns at once; events follow through di_session_poll. When the
 * generation ends, the output of completion 0 joins the context (as the assistant's reply in a chat
 * session), so the next turn continues from it. DI_ERR_STATE while a generation is running. */
DI_API di_error *di_session_generate(di_session *session, const di_sampling *params);
/* Ends the running generation: every unfinished completion finishes with DI_FINISH_CANCELLED.
 * Safe from any thread; no effect when nothing runs. */
DI_API di_error *di_session_cancel(di_session *session);

typedef struct di_event di_event;
typedef int32_t di_event_type;
enum {
  DI_EVENT_TOKENS = 1,          /* new output tokens of one completion, with their text */
  DI_EVENT_FINISHED = 2,        /* one completion ended (finish reason, usage, seed) */
  DI_EVENT_PROMPT_LOGPROBS = 3  /* logprobs of the prompt tokens (when requested), before any output */
};

/* Waits up to timeout_ms milliseconds (-1: no limit, 0: no wait) for the session's next event. On
 * success *out is the event (the caller frees it), or NULL when the time ran out. DI_ERR_STATE when
 * no generation is running and no event is left to read. */
DI_API di_error *di_session_poll(di_session *session, int32_t timeout_ms, di_event **out);

/* Delivers the session's events to fn on an engine thread instead of queueing them for
 * di_session_poll. fn owns each event (and frees it); it must return quickly and must not call
 * functions of this session other than di_session_cancel, nor free the engine. fn NULL restores
 * polling. Not while generating. Once this call (with another fn or NULL) or di_session_free
 * returns, the old fn is not called again, so its `user` data may be released. */
typedef void (*di_event_callback)(void *user, di_event *event);
DI_API di_error *di_session_set_callback(di_session *session, di_event_callback fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Events                                                                                         */

typedef int32_t di_finish_reason;
enum {
  DI_FINISH_NONE = 0,       /* not finished (a TOKENS event) */
  DI_FINISH_STOP = 1,       /* EOS, a stop token or a stop string */
  DI_FINISH_LENGTH = 2,     /* max_tokens or the context limit */
  DI_FINISH_CANCELLED = 3,
  DI_FINISH_ERROR = 4       /* see di_event_error */
};

DI_API void di_event_free(di_event *event);
DI_API di_error *di_event_kind(const di_event *event, di_event_type *out);
/* Which completion (0 .. n-1) the event belongs to. */
DI_API di_error *di_event_completion(const di_event *event, int32_t *out);
/* The event's token ids: new output tokens, or the prompt tokens of a PROMPT_LOGPROBS event. */
DI_API di_error *di_event_tokens(const di_event *event, int32_t *buf, size_t cap, size_t *out_len);
/* The text those tokens complete (UTF-8; a character is never split across events; text that may
 * still become a stop string is held back until it cannot). */
DI_API di_error *di_event_text(const di_event *event, char *buf, size_t cap, size_t *out_len);
/* Logprob of token i of the event and its top alternatives (ids and logprobs, most likely first;
 * *out_len of them). DI_ERR_STATE when logprobs were not requested. */
DI_API di_error *di_event_logprobs(const di_event *event, size_t i, float *logprob, int32_t *top_ids,
                                   float *top_logprobs, size_t cap, size_t *out_len);
/* FINISHED events: why the completion ended. DI_FINISH_NONE for other events. */
DI_API di_error *di_event_finish_reason(const di_event *event, di_finish_reason *out);
/* FINISHED events: prompt tokens processed for this generation, tokens generated, and prompt tokens
 * whose state was reused from earlier turns instead of computed. */
DI_API di_error *di_event_usage(const di_event *event, uint64_t *prompt_tokens, uint64_t *completion_tokens,
                                uint64_t *cached_tokens);
/* FINISHED events: the seed the generation used (set it to replay the output exactly). */
DI_API di_error *di_event_seed(const di_event *event, uint64_t *out);
/* FINISHED events with DI_FINISH_ERROR: a copy of the error (the caller frees it); NULL otherwise. */
DI_API di_error *di_event_error(const di_event *event, di_error **out);


/* ---------------------------------------------------------------------------------------------- */
/* Structured outputs: grammars                                                                   */
/* A grammar constrains a generation's output to a regular expression, a JSON Schema (draft       */
/* 2020-12) or an EBNF grammar (GBNF dialect, start rule `root`): at every step only tokens that   */
/* keep the output a prefix of a match may be sampled, and end-of-sequence only when it is a       */
/* complete match. A schema feature that cannot be enforced is a compile error naming it, never a  */
/* looser constraint. Compiled grammars are immutable, cached by (kind, spec, options, tokenizer)  */
/* and shared; a handle may be freed as soon as it is attached to sampling parameters.            */

typedef struct di_grammar di_grammar;
typedef int32_t di_grammar_kind;
enum { DI_GRAMMAR_REGEX = 1, DI_GRAMMAR_JSON_SCHEMA = 2, DI_GRAMMAR_EBNF = 3 };
/* Grammar flags. */
enum {
  DI_GRAMMAR_COMPACT_WHITESPACE = 1  /* JSON Schema: no whitespace between JSON tokens (default: any) */
};

/* Compiles a grammar for the engine's tokenizer, with default options (JSON whitespace allowed,
 * runs unbounded). DI_ERR_GRAMMAR for a bad spec or a feature that cannot be enforced; the message
 * names the keyword or position. */
DI_API di_error *di_grammar_compile(di_engine *engine, di_grammar_kind kind, const char *spec, size_t len, di_grammar **out);
/* The same with options: DI_GRAMMAR_* flags, and the longest whitespace run between JSON tokens
 * (0 = unbounded). */
DI_API di_error *di_grammar_compile_options(di_engine *engine, di_grammar_kind kind, const char *spec, size_t len,
                                            uint32_t flags, uint32_t max_whitespace_run, di_grammar **out);
/* The error a spec would give when compiled, without compiling it for a tokenizer (NULL: valid). */
DI_API di_error *di_grammar_validate(di_grammar_kind kind, const char *spec, size_t len, uint32_t flags,
                                     uint32_t max_whitespace_run);
DI_API void di_grammar_free(di_grammar *grammar);
/* Constrains generations started with these parameters (the grammar is referenced, not copied).
 * NULL removes the constraint. The grammar must be compiled for the vocabulary of the engine that
 * generates: by any engine (or di_grammar_compile_for_tokenizer) with the same tokenizer, vocabulary
 * size and end-of-sequence tokens (else DI_ERR_INVALID_ARGUMENT at di_session_generate). */
DI_API di_error *di_sampling_set_grammar(di_sampling *sp, const di_grammar *grammar);

/* ---------------------------------------------------------------------------------------------- */
/* Tokenizers and grammar matchers without a model (tooling and tests)                             */

typedef struct di_tokenizer di_tokenizer;

/* Loads a tokenizer.json (or the one in a model directory). */
DI_API di_error *di_tokenizer_create(const char *path, size_t len, di_tokenizer **out);
/* The engine's tokenizer (DI_ERR_UNSUPPORTED when its model has none). */
DI_API di_error *di_engine_tokenizer(const di_engine *engine, di_tokenizer **out);
DI_API void di_tokenizer_free(di_tokenizer *tokenizer);
/* Largest token id + 1. */
DI_API di_error *di_tokenizer_vocab_size(const di_tokenizer *tokenizer, int32_t *out);
DI_API di_error *di_tokenizer_encode(const di_tokenizer *tokenizer, const char *text, size_t len, uint32_t flags,
                                     int32_t *buf, size_t cap, size_t *out_len);
DI_API di_error *di_tokenizer_decode(const di_tokenizer *tokenizer, const int32_t *ids, size_t n, uint32_t flags,
                                     char *buf, size_t cap, size_t *out_len);
/* Compiles a grammar for a tokenizer: masks are vocab_size wide (0 = the tokenizer's size; a model's
 * logits may be wider) and eos_ids[0..n_eos) are allowed exactly when the output is complete. */
DI_API di_error *di_grammar_compile_for_tokenizer(const di_tokenizer *tokenizer, int32_t vocab_size, const int32_t *eos_ids,
                                                  size_t n_eos, di_grammar_kind kind, const char *spec, size_t len,
                                                  uint32_t flags, uint32_t max_whitespace_run, di_grammar **out);

typedef struct di_matcher di_matcher;

/* Follows one output through a grammar, token by token (one thread at a time). */
DI_API di_error *di_matcher_create(const di_grammar *grammar, di_matcher **out);
DI_API void di_matcher_free(di_matcher *matcher);
/* Consumes a token; DI_ERR_INVALID_ARGUMENT (state unchanged) when the grammar does not allow it here. */
DI_API di_error *di_matcher_accept_token(di_matcher *matcher, int32_t token);
/* Consumes raw UTF-8 bytes as one step (DI_ERR_INVALID_ARGUMENT, state unchanged, when not allowed). */
DI_API di_error *di_matcher_accept_string(di_matcher *matcher, const char *s, size_t len);
/* Undoes the last n accept steps (speculative decoding). */
DI_API di_error *di_matcher_rollback(di_matcher *matcher, size_t n);
DI_API di_error *di_matcher_reset(di_matcher *matcher);
/* The allowed-token bitmask for the next step: bit (i % 32) of words[i / 32] is set iff token i is
 * allowed; (vocab_size + 31) / 32 words. */
DI_API di_error *di_matcher_fill_mask(di_matcher *matcher, uint32_t *words, size_t cap, size_t *out_len);
/* 1 when the output so far is a complete match (end-of-sequence is allowed), else 0. */
DI_API di_error *di_matcher_can_end(const di_matcher *matcher, int32_t *out);
/* 1 after an end-of-sequence token was accepted (nothing more can follow), else 0. */
DI_API di_error *di_matcher_is_terminated(const di_matcher *matcher, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif /* DEEPINFER_H */
