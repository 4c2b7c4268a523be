/*
 * deepinfer.h - the C ABI of DeepInfer, an embeddable inference engine for DeepSeek-V4-family models.
 * This is the only public header; it compiles as C99 and as C++. Platforms: 64-bit only.
 *
 * CONVENTIONS
 *
 * Handles. Every object is an opaque handle made by di_<object>_create (or a call that names what it
 *   returns) and released by di_<object>_free. Free functions accept NULL. Handles are 64-bit ids, not
 *   memory addresses, and are never reused: after a handle is freed, every call that is given it
 *   returns DI_ERR_INVALID_HANDLE, and freeing it again does nothing. A handle parameter is const
 *   when the call neither frees nor changes the object's settings; engines are always passed const,
 *   except to di_engine_free.
 *
 * Errors. A call that can fail returns di_error*: NULL on success, otherwise an error carrying a
 *   stable di_code and a UTF-8 message, which the caller owns and releases with di_error_free (once).
 *   When memory runs out while an error is being made, the call returns a static out-of-memory error
 *   (never NULL), which di_error_free accepts and ignores. Out-parameters are written only on success
 *   (except the size needed of DI_ERR_BUFFER_TOO_SMALL). Every pointer out-parameter is required: NULL
 *   is DI_ERR_INVALID_ARGUMENT. No call aborts the process on bad input.
 *
 * Growth. The values of di_code, di_event_type, di_finish_reason, di_model_info, di_stat and every
 *   flag set are append-only: a newer library may return values this header does not name, and
 *   bindings must accept them (treat an unknown code as an error, skip an unknown event kind, show an
 *   unknown finish reason as such).
 *
 * Buffers. Inputs come as (pointer, length) pairs; text is UTF-8 and needs no NUL terminator; a NULL
 *   pointer is allowed with length 0. Outputs go into caller buffers as (buf, cap, *out_len): on
 *   success *out_len is the number of elements written; when cap is too small the call returns
 *   DI_ERR_BUFFER_TOO_SMALL, writes nothing to buf and sets *out_len to the number needed (so a call
 *   with cap 0 asks for the size). Output text is not NUL-terminated. Immutable data (the contents of
 *   an event) can also be read in place through *_view calls: the pointers they return stay valid
 *   until the object is freed and are never NULL (an empty view points to valid memory).
 *
 * Threading. di_engine, di_queue and the log functions are thread-safe: any number of threads may use
 *   them at once. Calls that take a const handle of di_sampling, di_event, di_grammar, di_tokenizer or
 *   di_stats only read it and may run concurrently from many threads; calls that change such an
 *   object (setters, free) need exclusive use of it. A di_session, di_engine_config or di_matcher is
 *   used by one thread at a time, with one exception: di_session_cancel may be called from any thread
 *   at any time. Objects passed to a call are copied or referenced by the callee as documented; the
 *   caller may free its own handle right after the call returns.
 *
 * Callbacks. Event callbacks (di_session_set_callback) run on the engine's thread, or on the thread
 *   calling di_engine_free (which delivers the last events of running generations itself). These
 *   calls wait until a call of the session's callback in progress has returned: di_session_free,
 *   di_session_set_callback, di_session_set_queue and di_engine_free; do not hold a lock the callback
 *   needs while making them (in Python: release the GIL). A callback must not call functions of its
 *   own session other than di_session_cancel, nor free the engine. The log callback runs under a
 *   process-wide lock: it must not call di_set_log_callback. The load progress callback runs on the
 *   thread calling di_engine_create, before it returns.
 *
 * Process life. At process exit (exit() or a return from main) engines still open are stopped before
 *   the library's own data is released, and no callback is called once exit has begun. After fork()
 *   the child's engines are closed: their calls return DI_ERR_CLOSED (nothing of the parent's engine
 *   threads exists in the child); other objects (sampling, grammars, tokenizers, events) keep working.
 *
 * Seeds. Random sampling is keyed by (seed, completion stream, output position) through a
 *   counter-based generator: completion i of a generation with seed S draws its t-th token from the
 *   stream (S, first + i, t), where first is the sampling parameters' first completion index
 *   (default 0), so a single completion can replay completion i of an earlier generation. On the
 *   CPU the same seed, prompt and sampling parameters give the same tokens and logprobs whatever else
 *   the engine is running and however the work is batched or scheduled. On a GPU the same holds with
 *   the option batch_invariant (di_engine_config_set_option; slower kernels): a sequence's logits are
 *   then bitwise the same whatever else is in its steps, however its prompt is cut into chunks
 *   (max_batched_tokens), with CUDA graphs on or off, and in any engine of the same model and options
 *   on the same kind of GPU with the same library. Without it (the default) the logits of a sequence
 *   may differ in their last bits with the batch it runs in, so a seeded output repeats exactly only
 *   when the batches repeat (the GPU's sampling itself is deterministic and independent of the batch:
 *   the same logits and stream give the same token). A generation without a seed draws one from the engine
 *   (di_engine_config_set_seed makes those draws reproducible too); every finished completion
 *   reports the seed it used (di_event_seed), so any output can be replayed by setting that seed.
 *
 * Streaming. Output is pull-based: di_session_generate starts a generation and di_session_poll
 *   returns its events: new tokens with their text, one FINISHED event per completion, and last one
 *   DONE event, after which the generation is over and the session's context is updated. Events may
 *   instead go to a completion queue shared by many sessions (di_queue_*, with a file descriptor for
 *   event loops) or to a callback (di_session_set_callback); no binding needs the callback.
 */
#ifndef DEEPINFER_H
#define DEEPINFER_H

#include <stddef.h>
#include <stdint.h>

#if !defined(UINTPTR_MAX) || UINTPTR_MAX != 0xFFFFFFFFFFFFFFFFu
#error "deepinfer.h: DeepInfer supports 64-bit platforms only (handles are 64-bit ids)"
#endif

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
#define DI_VERSION_MINOR 2
#define DI_VERSION_PATCH 0
/* The ABI version: the SONAME's number (libdeepinfer.so.0). Bindings check it at build and load time. */
#define DI_ABI_VERSION 0

/* "MAJOR.MINOR.PATCH" of the loaded library (static storage; never freed). */
DI_API const char *di_version(void);
/* The loaded library's version as MAJOR << 16 | MINOR << 8 | PATCH (0.2.0 is 0x000200), for checks
 * such as "needs at least 0.2". */
DI_API uint32_t di_version_number(void);
/* DI_ABI_VERSION of the loaded library. */
DI_API uint32_t di_abi_version(void);

/* ---------------------------------------------------------------------------------------------- */
/* Errors                                                                                         */

typedef int32_t di_code;
enum di_code_values {
  DI_OK = 0,
  DI_ERR_INVALID_ARGUMENT = 1,  /* a parameter is out of range or malformed (message names it) */
  DI_ERR_NOT_FOUND = 2,         /* a file or key that must exist does not */
  DI_ERR_MODEL_FORMAT = 3,      /* a checkpoint, config or tokenizer file is malformed */
  DI_ERR_UNSUPPORTED = 4,       /* valid input this build or machine cannot handle (message says what is missing) */
  DI_ERR_OUT_OF_MEMORY = 5,
  DI_ERR_CAPACITY = 6,          /* larger than the engine's limits (context length, state memory) */
  DI_ERR_BUFFER_TOO_SMALL = 7,  /* *out_len holds the size needed */
  DI_ERR_CANCELLED = 8,         /* the caller asked to stop (a load aborted by its progress callback) */
  DI_ERR_GRAMMAR = 9,           /* a grammar, JSON schema or regular expression failed to compile */
  DI_ERR_IO = 10,               /* a file could not be read */
  DI_ERR_BACKEND = 11,          /* the device failed */
  DI_ERR_STATE = 12,            /* not valid in the object's current state (e.g. already generating) */
  DI_ERR_TIMEOUT = 13,          /* reserved: not produced by this version (a poll that times out returns no event) */
  DI_ERR_CLOSED = 14,           /* the engine behind the object was freed (or this process is a fork's child) */
  DI_ERR_INVALID_HANDLE = 15,   /* NULL, freed, or a handle of another type */
  DI_ERR_INTERNAL = 100         /* a bug in DeepInfer; please report it */
};

typedef struct di_error di_error;

/* The error's code; DI_OK for NULL. */
DI_API di_code di_error_code(const di_error *err);
/* The error's message (owned by err, valid until di_error_free); "" for NULL. */
DI_API const char *di_error_message(const di_error *err);
/* Releases an error. NULL and the static out-of-memory error are ignored. Each error must be freed once. */
DI_API void di_error_free(di_error *err);
/* A short name for a code, e.g. "invalid argument" (static storage; "unknown" for an unknown code). */
DI_API const char *di_code_name(di_code code);

/* ---------------------------------------------------------------------------------------------- */
/* Logging (process-wide; thread-safe)                                                            */

typedef int32_t di_log_level;
enum di_log_level_values { DI_LOG_DEBUG = 0, DI_LOG_INFO = 1, DI_LOG_WARN = 2, DI_LOG_ERROR = 3, DI_LOG_OFF = 4 };
typedef void (*di_log_callback)(void *user, di_log_level level, const char *message, size_t len);

/* Messages below `level` are dropped (default DI_LOG_WARN). */
DI_API di_error *di_set_log_level(di_log_level level);
/* Sends log messages to fn (called from any thread, one message at a time, under a process-wide
 * lock: fn must not call di_set_log_callback) instead of stderr; fn NULL restores stderr. `message`
 * is NUL-terminated and valid during the call only. Once this returns, the old fn is not called
 * again, so its `user` data may be released. */
DI_API void di_set_log_callback(di_log_callback fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Engine configuration                                                                           */

typedef struct di_engine_config di_engine_config;
typedef int32_t di_device;
enum di_device_values { DI_DEVICE_AUTO = 0, DI_DEVICE_CPU = 1, DI_DEVICE_CUDA = 2 };

/* A configuration with defaults: device AUTO (CUDA when its backend module, a driver and a GPU are
 * present, else CPU), all CPU threads, 64 concurrent sequences, context up to the model's maximum,
 * state memory sized automatically, 2048 tokens per step. */
DI_API di_error *di_engine_config_create(di_engine_config **out);
DI_API void di_engine_config_free(di_engine_config *cfg);
/* The model directory: config.json, *.safetensors, and optionally tokenizer.json,
 * tokenizer_config.json and generation_config.json. Required. */
DI_API di_error *di_engine_config_set_model_path(di_engine_config *cfg, const char *path, size_t len);
/* The device. The CUDA backend is a module loaded at run time (libdeepinfer-cuda.so.0, looked for
 * beside libdeepinfer.so.0, then by the dynamic loader's search path; the option "cuda_module"
 * names another file). DI_DEVICE_CUDA where the module, the CUDA libraries, a driver or a GPU is
 * missing is DI_ERR_UNSUPPORTED at di_engine_create, naming what is missing; DI_DEVICE_AUTO then
 * runs on the CPU. */
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
/* A named setting of the engine or its backend, as text (booleans: 1/0, true/false, on/off). An
 * unknown key or a value of the wrong form is DI_ERR_INVALID_ARGUMENT naming it. Settings belong to
 * the engine created from this configuration alone. Backend settings are ignored by the other
 * backend. The keys (`deepinfer options` lists them with their defaults):
 *   cuda_module    path of the CUDA backend module to load instead of the default search
 *   cuda_device    ordinal of the GPU to use (default 0)
 *   fp32_weights   CUDA: keep weights in fp32 and run every product in fp32 (a reference mode)
 *   graphs         CUDA: replay decode steps as CUDA graphs (default on)
 *   pdl            CUDA: programmatic dependent launch of kernels (default on)
 *   zero_scratch   CUDA: zero-fill every scratch tensor (a diagnostic; default off)
 *   batch_invariant  CUDA: each sequence's logits bitwise the same whatever else is in the batch
 *                  (the seed contract above on a GPU; slower kernels; default off)
 *   dummy_weights  build the model from config.json alone with random weights (benchmarks)
 *   host_sampling  sample copies of the logits rows on the engine's threads instead of where they
 *                  are (CUDA: the rows are copied off the GPU each step; default off)
 * Later versions add keys. */
DI_API di_error *di_engine_config_set_option(di_engine_config *cfg, const char *key, size_t key_len, const char *value,
                                             size_t value_len);
/* Called during di_engine_create as the model loads, with the bytes of weights loaded so far and in
 * all (total may be 0 while unknown); a nonzero return aborts the load, and di_engine_create then
 * returns DI_ERR_CANCELLED. fn NULL removes it. */
typedef int32_t (*di_progress_callback)(void *user, uint64_t done, uint64_t total);
DI_API di_error *di_engine_config_set_progress_callback(di_engine_config *cfg, di_progress_callback fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Engine                                                                                         */

typedef struct di_engine di_engine;

/* Loads the model (logging progress at DI_LOG_INFO, reporting it to the progress callback) and starts
 * the engine's step thread. The configuration is copied. */
DI_API di_error *di_engine_create(const di_engine_config *cfg, di_engine **out);
/* Cancels every generation, stops the engine and releases the model; the running generations'
 * last events (FINISHED with DI_FINISH_CANCELLED, then DONE) are delivered before it returns, to
 * callbacks on this thread. Sessions of the engine stay valid handles: di_session_poll returns
 * their queued events, then DI_ERR_CLOSED; their other calls return DI_ERR_CLOSED until they are
 * freed. */
DI_API void di_engine_free(di_engine *engine);
/* Vocabulary size of the model (the width of its logits). */
DI_API di_error *di_engine_vocab_size(const di_engine *engine, int32_t *out);
/* Longest context of one sequence, in tokens. */
DI_API di_error *di_engine_max_context(const di_engine *engine, int64_t *out);
/* Tokens of context the state memory holds in total. */
DI_API di_error *di_engine_capacity_tokens(const di_engine *engine, int64_t *out);
/* End-of-sequence token ids (from generation_config.json, else config.json). */
DI_API di_error *di_engine_eos_tokens(const di_engine *engine, int32_t *buf, size_t cap, size_t *out_len);
/* The device the engine runs on (DI_DEVICE_CPU or DI_DEVICE_CUDA; never AUTO). */
DI_API di_error *di_engine_device(const di_engine *engine, di_device *out);
/* 1 when the model directory has a tokenizer (text in and out, chat, stop strings, grammars), else 0. */
DI_API di_error *di_engine_has_tokenizer(const di_engine *engine, int32_t *out);

/* Facts about the loaded model. */
typedef int32_t di_model_info;
enum di_model_info_values {
  DI_MODEL_LAYERS = 1,
  DI_MODEL_HIDDEN_SIZE = 2,
  DI_MODEL_ATTENTION_HEADS = 3,
  DI_MODEL_ROUTED_EXPERTS = 4,     /* per MoE layer */
  DI_MODEL_EXPERTS_PER_TOKEN = 5,
  DI_MODEL_VOCAB_SIZE = 6,
  DI_MODEL_MAX_POSITION = 7,       /* the model's longest context */
  DI_MODEL_PARAMETERS = 8,         /* number of weights */
  DI_MODEL_WEIGHT_BYTES = 9        /* bytes the weights take on the device */
};
/* One fact (an unknown key is DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_engine_model_info(const di_engine *engine, di_model_info key, int64_t *out);
/* How the weights are held on the device, e.g. "bf16", "f32", or "native" (FP8 / MXFP4 matrices kept
   in the checkpoint's formats: the CUDA backend's native_weights option) (ASCII). */
DI_API di_error *di_engine_weight_dtype(const di_engine *engine, char *buf, size_t cap, size_t *out_len);

/* A snapshot of the engine's bookkeeping. */
typedef struct di_stats di_stats;
typedef int32_t di_stat;
enum di_stat_values {
  DI_STAT_RUNNING_SEQUENCES = 1,   /* completions with model state, being computed */
  DI_STAT_WAITING_SEQUENCES = 2,   /* completions submitted and not yet started (or preempted) */
  DI_STAT_RUNNING_GENERATIONS = 3, /* generations submitted and not finished */
  DI_STAT_RESIDENT_SESSIONS = 4,   /* idle sessions whose state is kept for their next turn */
  DI_STAT_STATE_BYTES_USED = 5,    /* state memory in use */
  DI_STAT_STATE_BYTES_TOTAL = 6,
  DI_STAT_PROMPT_TOKENS = 7,       /* context tokens processed since the engine started */
  DI_STAT_GENERATED_TOKENS = 8,    /* tokens sampled since the engine started */
  DI_STAT_STEPS = 9,               /* engine steps (forwards) */
  DI_STAT_PREEMPTIONS = 10,        /* sequences whose state was given up to make room */
  DI_STAT_STEP_MICROSECONDS = 11   /* time spent in steps */
};
DI_API di_error *di_engine_stats(const di_engine *engine, di_stats **out);
/* One value of the snapshot (an unknown key is DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_stats_get(const di_stats *stats, di_stat key, uint64_t *out);
DI_API void di_stats_free(di_stats *stats);

/* Text flags for tokenizing. */
typedef uint32_t di_text_flags;
enum di_text_flags_values {
  DI_TEXT_PLAIN = 0,   /* the text is plain text: control-token lookalikes become ordinary tokens */
  DI_TEXT_SPECIAL = 1  /* added tokens written in the text are recognised (HF tokenizers' behaviour) */
};
/* Detokenizing flags. */
typedef uint32_t di_detok_flags;
enum di_detok_flags_values { DI_DETOK_SKIP_SPECIAL = 1 };

/* Tokenizes UTF-8 text (invalid UTF-8 is DI_ERR_INVALID_ARGUMENT). Needs the model's tokenizer.json
 * (DI_ERR_UNSUPPORTED without one). */
DI_API di_error *di_engine_tokenize(const di_engine *engine, const char *text, size_t len, di_text_flags flags,
                                    int32_t *buf, size_t cap, size_t *out_len);
/* UTF-8 text of token ids (an id outside the vocabulary is DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_engine_detokenize(const di_engine *engine, const int32_t *ids, size_t n, di_detok_flags flags,
                                      char *buf, size_t cap, size_t *out_len);

/* ---------------------------------------------------------------------------------------------- */
/* Sampling parameters                                                                            */

typedef struct di_sampling di_sampling;

/* Library defaults: temperature 1, no top-k/top-p/min-p, no penalties, max_tokens 256, n 1, no
 * seed (drawn from the engine), first completion 0, no logprobs. */
DI_API di_error *di_sampling_create(di_sampling **out);
/* Library defaults overridden by the model's generation_config.json (temperature, top_p, top_k,
 * max_new_tokens, repetition_penalty). */
DI_API di_error *di_engine_sampling_defaults(const di_engine *engine, di_sampling **out);
DI_API di_error *di_sampling_clone(const di_sampling *src, di_sampling **out);
DI_API void di_sampling_free(di_sampling *sp);

/* Each setter checks its own range (DI_ERR_INVALID_ARGUMENT names the field and value), with the
 * same rules the engine applies. Token ids are checked against the vocabulary when a generation
 * starts. Each getter returns what was set (or the default). */
DI_API di_error *di_sampling_set_temperature(di_sampling *sp, float t);        /* [0, 1e6]; 0 = greedy */
DI_API di_error *di_sampling_set_top_k(di_sampling *sp, int32_t k);            /* >= -1; 0 or -1 = off */
DI_API di_error *di_sampling_set_top_p(di_sampling *sp, float p);              /* (0, 1]; 1 = off */
DI_API di_error *di_sampling_set_min_p(di_sampling *sp, float p);              /* [0, 1]; 0 = off */
DI_API di_error *di_sampling_set_repetition_penalty(di_sampling *sp, float v); /* [0.01, 100]; 1 = off */
DI_API di_error *di_sampling_set_presence_penalty(di_sampling *sp, float v);   /* [-2, 2] */
DI_API di_error *di_sampling_set_frequency_penalty(di_sampling *sp, float v);  /* [-2, 2] */
DI_API di_error *di_sampling_set_max_tokens(di_sampling *sp, int32_t n);       /* >= 1 */
DI_API di_error *di_sampling_set_min_tokens(di_sampling *sp, int32_t n);       /* >= 0; stop ids and EOS masked until n */
DI_API di_error *di_sampling_set_n(di_sampling *sp, int32_t n);                /* completions per generation, [1, 128] */
DI_API di_error *di_sampling_set_seed(di_sampling *sp, uint64_t seed);
DI_API di_error *di_sampling_clear_seed(di_sampling *sp);                      /* draw from the engine */
/* Completion i draws from stream first + i (see Seeds): with n 1 and first i, a generation replays
 * completion i of an earlier one with the same seed. [0, 2^31 - 128]. Events still number the
 * completions 0 .. n-1. */
DI_API di_error *di_sampling_set_first_completion(di_sampling *sp, int32_t first);
DI_API di_error *di_sampling_set_ignore_eos(di_sampling *sp, int32_t ignore);  /* EOS does not stop */
/* Return the sampled token's logprob and rank, and the top `n` alternatives with each token (0..20;
 * -1 off). */
DI_API di_error *di_sampling_set_logprobs(di_sampling *sp, int32_t n);
/* The same for every prompt token (after the first) in a DI_EVENT_PROMPT_LOGPROBS event (-1 off). */
DI_API di_error *di_sampling_set_prompt_logprobs(di_sampling *sp, int32_t n);
/* Adds bias[i] to the logit of ids[i], each in [-100, 100] (replaces any earlier bias). */
DI_API di_error *di_sampling_set_logit_bias(di_sampling *sp, const int32_t *ids, const float *bias, size_t n);
/* Only these tokens may be sampled (n 0: no restriction). */
DI_API di_error *di_sampling_set_allowed_tokens(di_sampling *sp, const int32_t *ids, size_t n);
/* Generation stops after any of these tokens (in addition to EOS unless ignore_eos). */
DI_API di_error *di_sampling_set_stop_tokens(di_sampling *sp, const int32_t *ids, size_t n);
/* Generation stops when the text contains this string (matched on detokenized text; text that may
 * still become a stop string is held back). The stop string itself is not returned unless
 * include_stop_string is set. At most 64 strings of 1..1024 bytes. A model without a tokenizer takes
 * no stop strings (DI_ERR_UNSUPPORTED when the generation starts). */
DI_API di_error *di_sampling_add_stop_string(di_sampling *sp, const char *s, size_t len);
DI_API di_error *di_sampling_clear_stop_strings(di_sampling *sp);
DI_API di_error *di_sampling_set_include_stop_string(di_sampling *sp, int32_t include);
/* Leave special tokens out of the text of events (their ids are still returned). Default on. */
DI_API di_error *di_sampling_set_skip_special_tokens(di_sampling *sp, int32_t skip);

DI_API di_error *di_sampling_get_temperature(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_top_k(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_top_p(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_min_p(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_repetition_penalty(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_presence_penalty(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_frequency_penalty(const di_sampling *sp, float *out);
DI_API di_error *di_sampling_get_max_tokens(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_min_tokens(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_n(const di_sampling *sp, int32_t *out);
/* *has_seed is 1 when a seed is set (then *seed is it), else 0 (and *seed is 0). */
DI_API di_error *di_sampling_get_seed(const di_sampling *sp, uint64_t *seed, int32_t *has_seed);
DI_API di_error *di_sampling_get_first_completion(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_ignore_eos(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_logprobs(const di_sampling *sp, int32_t *out);        /* -1: off */
DI_API di_error *di_sampling_get_prompt_logprobs(const di_sampling *sp, int32_t *out); /* -1: off */
/* The biases in token id order: ids[i] gets bias[i]; cap is the capacity of both buffers. */
DI_API di_error *di_sampling_get_logit_bias(const di_sampling *sp, int32_t *ids, float *bias, size_t cap, size_t *out_len);
DI_API di_error *di_sampling_get_allowed_tokens(const di_sampling *sp, int32_t *buf, size_t cap, size_t *out_len);
DI_API di_error *di_sampling_get_stop_tokens(const di_sampling *sp, int32_t *buf, size_t cap, size_t *out_len);
DI_API di_error *di_sampling_stop_string_count(const di_sampling *sp, size_t *out);
/* Stop string i (in the order added). */
DI_API di_error *di_sampling_get_stop_string(const di_sampling *sp, size_t i, char *buf, size_t cap, size_t *out_len);
DI_API di_error *di_sampling_get_include_stop_string(const di_sampling *sp, int32_t *out);
DI_API di_error *di_sampling_get_skip_special_tokens(const di_sampling *sp, int32_t *out);

/* ---------------------------------------------------------------------------------------------- */
/* Sessions: a conversation or a one-shot generation                                              */
/* A session holds a context (token ids) whose model state persists between generations, so a      */
/* follow-up turn only processes its new tokens. The engine may drop the state of an idle session  */
/* when memory is needed; its next generation then recomputes it, with the same results.           */

typedef struct di_session di_session;
typedef int32_t di_role;
enum di_role_values { DI_ROLE_SYSTEM = 0, DI_ROLE_USER = 1, DI_ROLE_ASSISTANT = 2, DI_ROLE_TOOL = 3 };

DI_API di_error *di_session_create(const di_engine *engine, di_session **out);
/* Cancels a running generation and releases the session's state. Events already queued on a
 * completion queue stay there. */
DI_API void di_session_free(di_session *session);

/* Appends token ids to the context (ids outside the vocabulary: DI_ERR_INVALID_ARGUMENT). */
DI_API di_error *di_session_add_tokens(di_session *session, const int32_t *ids, size_t n);
/* Tokenizes text (DI_TEXT_PLAIN or DI_TEXT_SPECIAL) and appends it to the context. */
DI_API di_error *di_session_add_text(di_session *session, const char *text, size_t len, di_text_flags flags);
/* Appends a chat message, encoded in the model's chat format. Message content is always plain text:
 * control-token lookalikes in it never become control tokens. A session that holds chat messages
 * accepts no raw tokens or text, and the reverse. */
DI_API di_error *di_session_add_message(di_session *session, di_role role, const char *content, size_t len);
/* Appends a tool call (function name and JSON arguments) to the last message if it is an assistant
 * message made only of tool calls, else to a new one. */
DI_API di_error *di_session_add_tool_call(di_session *session, const char *name, size_t name_len,
                                          const char *arguments, size_t arguments_len);
/* Tool definitions for a chat session: an OpenAI-style JSON array of at most 1 MiB
 * ([{"type": "function", "function": {"name", "description", "parameters"}}]). The model's chat
 * format has no place for them: the library describes them in a system block after the session's
 * system messages, with the markup of the format's tool calls (which the model's reply uses when it
 * calls one: leave special tokens in the text with di_sampling_set_skip_special_tokens(sp, 0) to read
 * them). len 0 removes them. The session becomes a chat session (DI_ERR_STATE for one of raw tokens);
 * not while generating; malformed JSON is DI_ERR_INVALID_ARGUMENT naming the place. */
DI_API di_error *di_session_set_tools(di_session *session, const char *tools_json, size_t len);
/* Number of tokens in the context. */
DI_API di_error *di_session_context_length(const di_session *session, int64_t *out);
/* The context's token ids. (The context grows when a generation ends: retry with the size reported.) */
DI_API di_error *di_session_context_tokens(const di_session *session, int32_t *buf, size_t cap, size_t *out_len);
/* Empties the context (and the chat transcript) and releases the state. Not while generating. */
DI_API di_error *di_session_reset(di_session *session);
/* Whether the output of a cancelled generation joins the context: 0 (default) drops it; 1 keeps
 * completion 0's output up to the cancel, as a finished generation's (the stop button of a chat).
 * The output of a generation that failed never joins. */
DI_API di_error *di_session_set_keep_cancelled_output(di_session *session, int32_t keep);

/* Starts generating from the context with the given parameters (copied). In a chat session the
 * assistant prompt is added first. Returns at once; events follow. When the generation ends (before
 * its DONE event), the output of completion 0 joins the context (as the assistant's reply in a chat
 * session), so the next turn continues from it, unless the generation failed or was cancelled (see
 * di_session_set_keep_cancelled_output). DI_ERR_STATE while a generation is running (until its
 * DONE event was delivered). */
DI_API di_error *di_session_generate(di_session *session, const di_sampling *params);
/* Ends the running generation: every unfinished completion finishes with DI_FINISH_CANCELLED, then
 * DONE follows. Safe from any thread; no effect when nothing runs. */
DI_API di_error *di_session_cancel(di_session *session);

typedef struct di_event di_event;
typedef int32_t di_event_type;
enum di_event_type_values {
  DI_EVENT_TOKENS = 1,          /* new output of one completion: tokens and their text (either may be empty) */
  DI_EVENT_FINISHED = 2,        /* one completion ended (finish reason, usage, seed) */
  DI_EVENT_PROMPT_LOGPROBS = 3, /* logprobs of the prompt tokens (when requested), before any output */
  DI_EVENT_DONE = 4             /* the generation ended: the last event, once per generation, after every
                                   FINISHED event and after the context was updated */
};

/* Waits up to timeout_ms milliseconds (-1: no limit, 0: no wait) for the session's next event. On
 * success *out is the event (the caller frees it), or NULL when the time ran out. After the DONE
 * event, a poll returns DI_ERR_STATE (nothing is generating and no event is left); after
 * di_engine_free, DI_ERR_CLOSED once the queued events are read. DI_ERR_STATE too when the session
 * delivers to a callback or a queue. */
DI_API di_error *di_session_poll(di_session *session, int32_t timeout_ms, di_event **out);

/* Delivers the session's events to fn instead of queueing them for di_session_poll (see
 * Callbacks). fn owns each event (and frees it); it must return quickly. fn NULL restores polling.
 * Replaces a completion queue. Not while generating. Once this call (with another fn or NULL),
 * di_session_set_queue or di_session_free returns, the old fn is not called again, so its `user`
 * data may be released. */
typedef void (*di_event_callback)(void *user, di_event *event);
DI_API di_error *di_session_set_callback(di_session *session, di_event_callback fn, void *user);

/* ---------------------------------------------------------------------------------------------- */
/* Completion queues: one place to wait for the events of many sessions                           */

typedef struct di_queue di_queue;

DI_API di_error *di_queue_create(di_queue **out);
/* Frees the queue and the events still in it. Sessions attached to it go back to polling. */
DI_API void di_queue_free(di_queue *queue);
/* Sends the session's events to `queue`, each with `tag` (any value the caller chooses, e.g. an index
 * of its own), instead of queueing them for di_session_poll. NULL restores polling. Replaces a
 * callback. Not while generating. */
DI_API di_error *di_session_set_queue(di_session *session, di_queue *queue, uint64_t tag);
/* Waits up to timeout_ms milliseconds (-1: no limit, 0: no wait) for an event of any attached
 * session; on success *out is the event (or NULL when the time ran out) and *tag its session's tag.
 * Events of one session come in order. Any number of threads may poll; each event goes to one. */
DI_API di_error *di_queue_poll(di_queue *queue, int32_t timeout_ms, di_event **out, uint64_t *tag);
/* A file descriptor that is readable exactly while the queue holds events (for select/poll/epoll,
 * asyncio's add_reader, tokio's AsyncFd, Go's netpoller): a non-blocking, close-on-exec eventfd.
 * Owned by the queue: do not read, write or close it (a dup of it may be watched instead). Wait for
 * readability, then di_queue_poll with timeout 0 until it returns no event. */
DI_API di_error *di_queue_fd(const di_queue *queue, int32_t *out);

/* ---------------------------------------------------------------------------------------------- */
/* Events (immutable)                                                                             */

typedef int32_t di_finish_reason;
enum di_finish_reason_values {
  DI_FINISH_NONE = 0,       /* not finished (not a FINISHED event) */
  DI_FINISH_STOP = 1,       /* EOS, a stop token or a stop string */
  DI_FINISH_LENGTH = 2,     /* max_tokens or the context limit */
  DI_FINISH_CANCELLED = 3,
  DI_FINISH_ERROR = 4       /* see di_event_error */
};

DI_API void di_event_free(di_event *event);
DI_API di_error *di_event_kind(const di_event *event, di_event_type *out);
/* Which completion (0 .. n-1) the event belongs to (0 for DONE). */
DI_API di_error *di_event_completion(const di_event *event, int32_t *out);
/* The event's token ids: new output tokens, or the prompt tokens of a PROMPT_LOGPROBS event. */
DI_API di_error *di_event_tokens(const di_event *event, int32_t *buf, size_t cap, size_t *out_len);
/* The same in place: *data points to *len ids, valid until di_event_free. */
DI_API di_error *di_event_tokens_view(const di_event *event, const int32_t **data, size_t *len);
/* The text those tokens complete (UTF-8; a character is never split across events; text that may
 * still become a stop string is held back until it cannot, so a TOKENS event may carry tokens
 * without text, and the last one of a completion text without tokens). */
DI_API di_error *di_event_text(const di_event *event, char *buf, size_t cap, size_t *out_len);
/* The same in place: *data points to *len bytes (not NUL-terminated), valid until di_event_free. */
DI_API di_error *di_event_text_view(const di_event *event, const char **data, size_t *len);
/* Logprob of token i of the event and its top alternatives (ids and logprobs, most likely first;
 * *out_len of them). DI_ERR_STATE when logprobs were not requested. */
DI_API di_error *di_event_logprobs(const di_event *event, size_t i, float *logprob, int32_t *top_ids,
                                   float *top_logprobs, size_t cap, size_t *out_len);
/* Every token's logprobs in place, valid until di_event_free: for token i of *n, logprobs[i] is its
 * logprob and ranks[i] its 1-based rank in the distribution; top_ids[i * k + j] and
 * top_logprobs[i * k + j] are its j-th most likely alternative (id -1 and logprob -inf fill the
 * places of a row with fewer than k). DI_ERR_STATE when logprobs were not requested. */
DI_API di_error *di_event_logprobs_view(const di_event *event, const float **logprobs, const int32_t **ranks,
                                        const int32_t **top_ids, const float **top_logprobs, size_t *n, size_t *k);
/* FINISHED events: why the completion ended. DI_FINISH_NONE for other events. */
DI_API di_error *di_event_finish_reason(const di_event *event, di_finish_reason *out);
/* FINISHED events: prompt tokens processed for this generation, tokens generated, and prompt tokens
 * whose state was reused from earlier turns instead of computed (0 for other events). */
DI_API di_error *di_event_usage(const di_event *event, uint64_t *prompt_tokens, uint64_t *completion_tokens,
                                uint64_t *cached_tokens);
/* FINISHED and DONE events: the seed the generation used (set it to replay the output exactly). */
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
enum di_grammar_kind_values { DI_GRAMMAR_REGEX = 1, DI_GRAMMAR_JSON_SCHEMA = 2, DI_GRAMMAR_EBNF = 3 };
/* Grammar flags. */
typedef uint32_t di_grammar_flags;
enum di_grammar_flags_values {
  DI_GRAMMAR_COMPACT_WHITESPACE = 1  /* JSON Schema: no whitespace between JSON tokens (default: any) */
};

/* Compiles a grammar for the engine's tokenizer, with default options (JSON whitespace allowed,
 * runs unbounded). DI_ERR_GRAMMAR for a bad spec or a feature that cannot be enforced; the message
 * names the keyword or position. */
DI_API di_error *di_grammar_compile(const di_engine *engine, di_grammar_kind kind, const char *spec, size_t len,
                                    di_grammar **out);
/* The same with options: DI_GRAMMAR_* flags, and the longest whitespace run between JSON tokens
 * (0 = unbounded). */
DI_API di_error *di_grammar_compile_options(const di_engine *engine, di_grammar_kind kind, const char *spec, size_t len,
                                            di_grammar_flags flags, uint32_t max_whitespace_run, di_grammar **out);
/* The error a spec would give when compiled, without compiling it for a tokenizer (NULL: valid). */
DI_API di_error *di_grammar_validate(di_grammar_kind kind, const char *spec, size_t len, di_grammar_flags flags,
                                     uint32_t max_whitespace_run);
DI_API void di_grammar_free(di_grammar *grammar);
/* Constrains generations started with these parameters (the grammar is referenced, not copied).
 * NULL removes the constraint. The grammar must be compiled for the vocabulary of the engine that
 * generates: by any engine (or di_grammar_compile_for_tokenizer) with the same tokenizer, vocabulary
 * size and end-of-sequence tokens (else DI_ERR_INVALID_ARGUMENT at di_session_generate). */
DI_API di_error *di_sampling_set_grammar(di_sampling *sp, const di_grammar *grammar);
/* The grammar attached to the parameters as a new handle (the caller frees it), or NULL. */
DI_API di_error *di_sampling_get_grammar(const di_sampling *sp, di_grammar **out);

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
DI_API di_error *di_tokenizer_encode(const di_tokenizer *tokenizer, const char *text, size_t len, di_text_flags flags,
                                     int32_t *buf, size_t cap, size_t *out_len);
DI_API di_error *di_tokenizer_decode(const di_tokenizer *tokenizer, const int32_t *ids, size_t n, di_detok_flags flags,
                                     char *buf, size_t cap, size_t *out_len);
/* Compiles a grammar for a tokenizer: masks are vocab_size wide (0 = the tokenizer's size; a model's
 * logits may be wider) and eos_ids[0..n_eos) are allowed exactly when the output is complete. */
DI_API di_error *di_grammar_compile_for_tokenizer(const di_tokenizer *tokenizer, int32_t vocab_size, const int32_t *eos_ids,
                                                  size_t n_eos, di_grammar_kind kind, const char *spec, size_t len,
                                                  di_grammar_flags flags, uint32_t max_whitespace_run, di_grammar **out);

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
