//! Raw declarations of `deepinfer.h`, the C ABI of DeepInfer (version 0.2, ABI 0).
//!
//! This crate only declares: every function, type and constant of the header, by hand, with the
//! header's names. The header's comments are the reference for each call's contract (ownership,
//! threading, errors); the one-line docs here only summarise them. A test of this crate compares
//! these declarations with the header and with the library's list of exported symbols, so the two
//! cannot drift apart.
//!
//! Use the `deepinfer` crate for a safe API.
//!
//! # Linking
//!
//! The build script links `libdeepinfer.so`, found through, in order:
//! 1. `DEEPINFER_LIB_DIR`: the folder holding `libdeepinfer.so`;
//! 2. `pkg-config deepinfer` (the `pkg-config` program; set `PKG_CONFIG_PATH` to `<prefix>/lib/pkgconfig`
//!    for an installation outside the system's folders).
//!
//! It stops with a message naming what to install or set when neither finds the library. Dependent
//! build scripts receive the library folder as `DEP_DEEPINFER_LIB_DIR`.
//!
//! # Conventions kept from the header
//!
//! * Enumerations are `i32`/`u32` type aliases with constants, never Rust `enum`s: a newer library may
//!   return values this crate does not name (the sets are append-only).
//! * Handles are pointers to opaque structs; their values are ids, never dereferenced.
//! * Platforms: 64-bit only, like the header.
#![allow(non_camel_case_types)]
#![deny(missing_docs)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("deepinfer-sys: DeepInfer supports 64-bit platforms only (handles are 64-bit ids)");

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_void};

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// An error: a code and a message, owned by the caller and released with [`di_error_free`].
    di_error;
    /// Settings for [`di_engine_create`].
    di_engine_config;
    /// A loaded model with its step thread (thread-safe).
    di_engine;
    /// A snapshot of an engine's bookkeeping.
    di_stats;
    /// Sampling parameters of a generation.
    di_sampling;
    /// A conversation or one-shot generation: a context and its model state.
    di_session;
    /// One event of a generation (immutable).
    di_event;
    /// A completion queue: one place to wait for the events of many sessions.
    di_queue;
    /// A compiled grammar (immutable).
    di_grammar;
    /// A tokenizer without a model.
    di_tokenizer;
    /// Follows one output through a grammar, token by token.
    di_matcher;
}

// ------------------------------------------------------------------------------------------------
// Versions

/// Major version of the header.
pub const DI_VERSION_MAJOR: u32 = 0;
/// Minor version of the header.
pub const DI_VERSION_MINOR: u32 = 2;
/// Patch version of the header.
pub const DI_VERSION_PATCH: u32 = 0;
/// The ABI version (the SONAME's number, `libdeepinfer.so.0`).
pub const DI_ABI_VERSION: u32 = 0;

// ------------------------------------------------------------------------------------------------
// Errors

/// A stable error code (`DI_OK` or `DI_ERR_*`; append-only).
pub type di_code = i32;
/// Success.
pub const DI_OK: di_code = 0;
/// A parameter is out of range or malformed (the message names it).
pub const DI_ERR_INVALID_ARGUMENT: di_code = 1;
/// A file or key that must exist does not.
pub const DI_ERR_NOT_FOUND: di_code = 2;
/// A checkpoint, config or tokenizer file is malformed.
pub const DI_ERR_MODEL_FORMAT: di_code = 3;
/// Valid input this build or machine cannot handle.
pub const DI_ERR_UNSUPPORTED: di_code = 4;
/// Memory ran out.
pub const DI_ERR_OUT_OF_MEMORY: di_code = 5;
/// Larger than the engine's limits (context length, state memory).
pub const DI_ERR_CAPACITY: di_code = 6;
/// The output buffer is too small; `*out_len` holds the size needed.
pub const DI_ERR_BUFFER_TOO_SMALL: di_code = 7;
/// The caller asked to stop (a load aborted by its progress callback).
pub const DI_ERR_CANCELLED: di_code = 8;
/// A grammar, JSON schema or regular expression failed to compile.
pub const DI_ERR_GRAMMAR: di_code = 9;
/// A file could not be read.
pub const DI_ERR_IO: di_code = 10;
/// The device failed.
pub const DI_ERR_BACKEND: di_code = 11;
/// Not valid in the object's current state.
pub const DI_ERR_STATE: di_code = 12;
/// Reserved: not produced by this version.
pub const DI_ERR_TIMEOUT: di_code = 13;
/// The engine behind the object was freed (or this process is a fork's child).
pub const DI_ERR_CLOSED: di_code = 14;
/// NULL, freed, or a handle of another type.
pub const DI_ERR_INVALID_HANDLE: di_code = 15;
/// A bug in DeepInfer.
pub const DI_ERR_INTERNAL: di_code = 100;

// ------------------------------------------------------------------------------------------------
// Logging

/// A log level (`DI_LOG_*`).
pub type di_log_level = i32;
/// Debug messages and above.
pub const DI_LOG_DEBUG: di_log_level = 0;
/// Informational messages and above.
pub const DI_LOG_INFO: di_log_level = 1;
/// Warnings and errors (the default).
pub const DI_LOG_WARN: di_log_level = 2;
/// Errors only.
pub const DI_LOG_ERROR: di_log_level = 3;
/// No messages.
pub const DI_LOG_OFF: di_log_level = 4;
/// Receives log messages (NUL-terminated, valid during the call), under a process-wide lock.
pub type di_log_callback = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        level: di_log_level,
        message: *const c_char,
        len: usize,
    ),
>;

// ------------------------------------------------------------------------------------------------
// Engine configuration

/// A device (`DI_DEVICE_*`).
pub type di_device = i32;
/// CUDA when its backend module, a driver and a GPU are present, else the CPU.
pub const DI_DEVICE_AUTO: di_device = 0;
/// The CPU.
pub const DI_DEVICE_CPU: di_device = 1;
/// A CUDA GPU.
pub const DI_DEVICE_CUDA: di_device = 2;
/// Called as the model loads with bytes done and in all; a nonzero return aborts the load.
pub type di_progress_callback =
    Option<unsafe extern "C" fn(user: *mut c_void, done: u64, total: u64) -> i32>;

// ------------------------------------------------------------------------------------------------
// Engine

/// A fact about the loaded model (`DI_MODEL_*`; append-only).
pub type di_model_info = i32;
/// Number of layers.
pub const DI_MODEL_LAYERS: di_model_info = 1;
/// Width of the residual stream.
pub const DI_MODEL_HIDDEN_SIZE: di_model_info = 2;
/// Attention heads.
pub const DI_MODEL_ATTENTION_HEADS: di_model_info = 3;
/// Routed experts per MoE layer.
pub const DI_MODEL_ROUTED_EXPERTS: di_model_info = 4;
/// Experts chosen per token.
pub const DI_MODEL_EXPERTS_PER_TOKEN: di_model_info = 5;
/// Vocabulary size.
pub const DI_MODEL_VOCAB_SIZE: di_model_info = 6;
/// The model's longest context.
pub const DI_MODEL_MAX_POSITION: di_model_info = 7;
/// Number of weights.
pub const DI_MODEL_PARAMETERS: di_model_info = 8;
/// Bytes the weights take on the device.
pub const DI_MODEL_WEIGHT_BYTES: di_model_info = 9;

/// A value of an engine stats snapshot (`DI_STAT_*`; append-only).
pub type di_stat = i32;
/// Completions with model state, being computed.
pub const DI_STAT_RUNNING_SEQUENCES: di_stat = 1;
/// Completions submitted and not yet started (or preempted).
pub const DI_STAT_WAITING_SEQUENCES: di_stat = 2;
/// Generations submitted and not finished.
pub const DI_STAT_RUNNING_GENERATIONS: di_stat = 3;
/// Idle sessions whose state is kept for their next turn.
pub const DI_STAT_RESIDENT_SESSIONS: di_stat = 4;
/// State memory in use.
pub const DI_STAT_STATE_BYTES_USED: di_stat = 5;
/// State memory in all.
pub const DI_STAT_STATE_BYTES_TOTAL: di_stat = 6;
/// Context tokens processed since the engine started.
pub const DI_STAT_PROMPT_TOKENS: di_stat = 7;
/// Tokens sampled since the engine started.
pub const DI_STAT_GENERATED_TOKENS: di_stat = 8;
/// Engine steps (forwards).
pub const DI_STAT_STEPS: di_stat = 9;
/// Sequences whose state was given up to make room.
pub const DI_STAT_PREEMPTIONS: di_stat = 10;
/// Time spent in steps.
pub const DI_STAT_STEP_MICROSECONDS: di_stat = 11;

/// Text flags for tokenizing (`DI_TEXT_*`).
pub type di_text_flags = u32;
/// Plain text: control-token lookalikes become ordinary tokens.
pub const DI_TEXT_PLAIN: di_text_flags = 0;
/// Added tokens written in the text are recognised.
pub const DI_TEXT_SPECIAL: di_text_flags = 1;
/// Detokenizing flags (`DI_DETOK_*`).
pub type di_detok_flags = u32;
/// Leave special tokens out of the text.
pub const DI_DETOK_SKIP_SPECIAL: di_detok_flags = 1;

// ------------------------------------------------------------------------------------------------
// Sessions and events

/// A chat role (`DI_ROLE_*`).
pub type di_role = i32;
/// The system prompt.
pub const DI_ROLE_SYSTEM: di_role = 0;
/// The user.
pub const DI_ROLE_USER: di_role = 1;
/// The assistant.
pub const DI_ROLE_ASSISTANT: di_role = 2;
/// A tool's result.
pub const DI_ROLE_TOOL: di_role = 3;

/// An event's kind (`DI_EVENT_*`; append-only: skip unknown kinds).
pub type di_event_type = i32;
/// New output of one completion: tokens and their text (either may be empty).
pub const DI_EVENT_TOKENS: di_event_type = 1;
/// One completion ended (finish reason, usage, seed).
pub const DI_EVENT_FINISHED: di_event_type = 2;
/// Logprobs of the prompt tokens (when requested), before any output.
pub const DI_EVENT_PROMPT_LOGPROBS: di_event_type = 3;
/// The generation ended: the last event, once per generation.
pub const DI_EVENT_DONE: di_event_type = 4;
/// Receives the events of a session instead of polling (the callback owns each event).
pub type di_event_callback = Option<unsafe extern "C" fn(user: *mut c_void, event: *mut di_event)>;

/// Why a completion ended (`DI_FINISH_*`; append-only).
pub type di_finish_reason = i32;
/// Not finished (not a FINISHED event).
pub const DI_FINISH_NONE: di_finish_reason = 0;
/// EOS, a stop token or a stop string.
pub const DI_FINISH_STOP: di_finish_reason = 1;
/// `max_tokens` or the context limit.
pub const DI_FINISH_LENGTH: di_finish_reason = 2;
/// Cancelled.
pub const DI_FINISH_CANCELLED: di_finish_reason = 3;
/// Failed (see [`di_event_error`]).
pub const DI_FINISH_ERROR: di_finish_reason = 4;

// ------------------------------------------------------------------------------------------------
// Grammars

/// A grammar's language (`DI_GRAMMAR_*`).
pub type di_grammar_kind = i32;
/// A regular expression.
pub const DI_GRAMMAR_REGEX: di_grammar_kind = 1;
/// A JSON Schema (draft 2020-12).
pub const DI_GRAMMAR_JSON_SCHEMA: di_grammar_kind = 2;
/// An EBNF grammar (GBNF dialect, start rule `root`).
pub const DI_GRAMMAR_EBNF: di_grammar_kind = 3;
/// Grammar flags (`DI_GRAMMAR_COMPACT_WHITESPACE`).
pub type di_grammar_flags = u32;
/// JSON Schema: no whitespace between JSON tokens.
pub const DI_GRAMMAR_COMPACT_WHITESPACE: di_grammar_flags = 1;

extern "C" {
    // Versions
    /// "MAJOR.MINOR.PATCH" of the loaded library (static storage).
    pub fn di_version() -> *const c_char;
    /// The loaded library's version as `MAJOR << 16 | MINOR << 8 | PATCH`.
    pub fn di_version_number() -> u32;
    /// `DI_ABI_VERSION` of the loaded library.
    pub fn di_abi_version() -> u32;

    // Errors
    /// The error's code; `DI_OK` for NULL.
    pub fn di_error_code(err: *const di_error) -> di_code;
    /// The error's message (NUL-terminated UTF-8, owned by `err`); "" for NULL.
    pub fn di_error_message(err: *const di_error) -> *const c_char;
    /// Releases an error (once); NULL and the static out-of-memory error are ignored.
    pub fn di_error_free(err: *mut di_error);
    /// A short name for a code (static storage; "unknown" for an unknown code).
    pub fn di_code_name(code: di_code) -> *const c_char;

    // Logging
    /// Drops messages below `level`.
    pub fn di_set_log_level(level: di_log_level) -> *mut di_error;
    /// Sends log messages to `fn_` instead of stderr (None restores stderr).
    pub fn di_set_log_callback(fn_: di_log_callback, user: *mut c_void);

    // Engine configuration
    /// A configuration with defaults.
    pub fn di_engine_config_create(out: *mut *mut di_engine_config) -> *mut di_error;
    /// Releases a configuration (NULL is ignored).
    pub fn di_engine_config_free(cfg: *mut di_engine_config);
    /// The model directory (required).
    pub fn di_engine_config_set_model_path(
        cfg: *mut di_engine_config,
        path: *const c_char,
        len: usize,
    ) -> *mut di_error;
    /// The device.
    pub fn di_engine_config_set_device(
        cfg: *mut di_engine_config,
        device: di_device,
    ) -> *mut di_error;
    /// CPU worker threads; 0 = one per core.
    pub fn di_engine_config_set_threads(cfg: *mut di_engine_config, n: i32) -> *mut di_error;
    /// Sequences the engine keeps state for at once.
    pub fn di_engine_config_set_max_sequences(cfg: *mut di_engine_config, n: i32) -> *mut di_error;
    /// Longest context of one sequence, in tokens; 0 = the model's maximum.
    pub fn di_engine_config_set_max_context(
        cfg: *mut di_engine_config,
        tokens: i64,
    ) -> *mut di_error;
    /// Bytes for the shared pool of model state; 0 = automatic.
    pub fn di_engine_config_set_state_memory(
        cfg: *mut di_engine_config,
        bytes: u64,
    ) -> *mut di_error;
    /// The share of the GPU's free memory that automatic state memory takes, in (0, 1].
    pub fn di_engine_config_set_state_memory_fraction(
        cfg: *mut di_engine_config,
        fraction: f64,
    ) -> *mut di_error;
    /// Tokens processed per engine step.
    pub fn di_engine_config_set_max_batched_tokens(
        cfg: *mut di_engine_config,
        n: i32,
    ) -> *mut di_error;
    /// Seed of the engine's own generator.
    pub fn di_engine_config_set_seed(cfg: *mut di_engine_config, seed: u64) -> *mut di_error;
    /// A named setting of the engine or its backend, as text.
    pub fn di_engine_config_set_option(
        cfg: *mut di_engine_config,
        key: *const c_char,
        key_len: usize,
        value: *const c_char,
        value_len: usize,
    ) -> *mut di_error;
    /// Called during [`di_engine_create`] as the model loads; None removes it.
    pub fn di_engine_config_set_progress_callback(
        cfg: *mut di_engine_config,
        fn_: di_progress_callback,
        user: *mut c_void,
    ) -> *mut di_error;

    // Engine
    /// Loads the model and starts the engine's step thread (the configuration is copied).
    pub fn di_engine_create(
        cfg: *const di_engine_config,
        out: *mut *mut di_engine,
    ) -> *mut di_error;
    /// Cancels every generation, stops the engine and releases the model.
    pub fn di_engine_free(engine: *mut di_engine);
    /// Vocabulary size of the model (the width of its logits).
    pub fn di_engine_vocab_size(engine: *const di_engine, out: *mut i32) -> *mut di_error;
    /// Longest context of one sequence, in tokens.
    pub fn di_engine_max_context(engine: *const di_engine, out: *mut i64) -> *mut di_error;
    /// Tokens of context the state memory holds in total.
    pub fn di_engine_capacity_tokens(engine: *const di_engine, out: *mut i64) -> *mut di_error;
    /// End-of-sequence token ids.
    pub fn di_engine_eos_tokens(
        engine: *const di_engine,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// The device the engine runs on (never AUTO).
    pub fn di_engine_device(engine: *const di_engine, out: *mut di_device) -> *mut di_error;
    /// 1 when the model directory has a tokenizer, else 0.
    pub fn di_engine_has_tokenizer(engine: *const di_engine, out: *mut i32) -> *mut di_error;
    /// One fact about the loaded model.
    pub fn di_engine_model_info(
        engine: *const di_engine,
        key: di_model_info,
        out: *mut i64,
    ) -> *mut di_error;
    /// How the weights are held on the device, e.g. "bf16" (ASCII).
    pub fn di_engine_weight_dtype(
        engine: *const di_engine,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// A snapshot of the engine's bookkeeping.
    pub fn di_engine_stats(engine: *const di_engine, out: *mut *mut di_stats) -> *mut di_error;
    /// One value of the snapshot.
    pub fn di_stats_get(stats: *const di_stats, key: di_stat, out: *mut u64) -> *mut di_error;
    /// Releases a snapshot.
    pub fn di_stats_free(stats: *mut di_stats);
    /// Tokenizes UTF-8 text.
    pub fn di_engine_tokenize(
        engine: *const di_engine,
        text: *const c_char,
        len: usize,
        flags: di_text_flags,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// UTF-8 text of token ids.
    pub fn di_engine_detokenize(
        engine: *const di_engine,
        ids: *const i32,
        n: usize,
        flags: di_detok_flags,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;

    // Sampling parameters
    /// Library defaults.
    pub fn di_sampling_create(out: *mut *mut di_sampling) -> *mut di_error;
    /// Library defaults overridden by the model's generation_config.json.
    pub fn di_engine_sampling_defaults(
        engine: *const di_engine,
        out: *mut *mut di_sampling,
    ) -> *mut di_error;
    /// A copy.
    pub fn di_sampling_clone(src: *const di_sampling, out: *mut *mut di_sampling) -> *mut di_error;
    /// Releases sampling parameters.
    pub fn di_sampling_free(sp: *mut di_sampling);
    /// [0, 1e6]; 0 = greedy.
    pub fn di_sampling_set_temperature(sp: *mut di_sampling, t: f32) -> *mut di_error;
    /// >= -1; 0 or -1 = off.
    pub fn di_sampling_set_top_k(sp: *mut di_sampling, k: i32) -> *mut di_error;
    /// (0, 1]; 1 = off.
    pub fn di_sampling_set_top_p(sp: *mut di_sampling, p: f32) -> *mut di_error;
    /// [0, 1]; 0 = off.
    pub fn di_sampling_set_min_p(sp: *mut di_sampling, p: f32) -> *mut di_error;
    /// [0.01, 100]; 1 = off.
    pub fn di_sampling_set_repetition_penalty(sp: *mut di_sampling, v: f32) -> *mut di_error;
    /// [-2, 2].
    pub fn di_sampling_set_presence_penalty(sp: *mut di_sampling, v: f32) -> *mut di_error;
    /// [-2, 2].
    pub fn di_sampling_set_frequency_penalty(sp: *mut di_sampling, v: f32) -> *mut di_error;
    /// >= 1.
    pub fn di_sampling_set_max_tokens(sp: *mut di_sampling, n: i32) -> *mut di_error;
    /// >= 0; stop ids and EOS masked until n.
    pub fn di_sampling_set_min_tokens(sp: *mut di_sampling, n: i32) -> *mut di_error;
    /// Completions per generation, [1, 128].
    pub fn di_sampling_set_n(sp: *mut di_sampling, n: i32) -> *mut di_error;
    /// The seed.
    pub fn di_sampling_set_seed(sp: *mut di_sampling, seed: u64) -> *mut di_error;
    /// Draw the seed from the engine.
    pub fn di_sampling_clear_seed(sp: *mut di_sampling) -> *mut di_error;
    /// Completion i draws from stream first + i; [0, 2^31 - 128].
    pub fn di_sampling_set_first_completion(sp: *mut di_sampling, first: i32) -> *mut di_error;
    /// EOS does not stop.
    pub fn di_sampling_set_ignore_eos(sp: *mut di_sampling, ignore: i32) -> *mut di_error;
    /// Logprobs of sampled tokens with the top `n` alternatives (0..20; -1 off).
    pub fn di_sampling_set_logprobs(sp: *mut di_sampling, n: i32) -> *mut di_error;
    /// The same for every prompt token after the first (-1 off).
    pub fn di_sampling_set_prompt_logprobs(sp: *mut di_sampling, n: i32) -> *mut di_error;
    /// Adds `bias[i]` to the logit of `ids[i]`, each in [-100, 100].
    pub fn di_sampling_set_logit_bias(
        sp: *mut di_sampling,
        ids: *const i32,
        bias: *const f32,
        n: usize,
    ) -> *mut di_error;
    /// Only these tokens may be sampled (n 0: no restriction).
    pub fn di_sampling_set_allowed_tokens(
        sp: *mut di_sampling,
        ids: *const i32,
        n: usize,
    ) -> *mut di_error;
    /// Generation stops after any of these tokens.
    pub fn di_sampling_set_stop_tokens(
        sp: *mut di_sampling,
        ids: *const i32,
        n: usize,
    ) -> *mut di_error;
    /// Generation stops when the text contains this string.
    pub fn di_sampling_add_stop_string(
        sp: *mut di_sampling,
        s: *const c_char,
        len: usize,
    ) -> *mut di_error;
    /// Removes every stop string.
    pub fn di_sampling_clear_stop_strings(sp: *mut di_sampling) -> *mut di_error;
    /// Return the stop string with the text.
    pub fn di_sampling_set_include_stop_string(sp: *mut di_sampling, include: i32)
        -> *mut di_error;
    /// Leave special tokens out of the text of events (default on).
    pub fn di_sampling_set_skip_special_tokens(sp: *mut di_sampling, skip: i32) -> *mut di_error;
    /// The temperature.
    pub fn di_sampling_get_temperature(sp: *const di_sampling, out: *mut f32) -> *mut di_error;
    /// top_k.
    pub fn di_sampling_get_top_k(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// top_p.
    pub fn di_sampling_get_top_p(sp: *const di_sampling, out: *mut f32) -> *mut di_error;
    /// min_p.
    pub fn di_sampling_get_min_p(sp: *const di_sampling, out: *mut f32) -> *mut di_error;
    /// The repetition penalty.
    pub fn di_sampling_get_repetition_penalty(
        sp: *const di_sampling,
        out: *mut f32,
    ) -> *mut di_error;
    /// The presence penalty.
    pub fn di_sampling_get_presence_penalty(sp: *const di_sampling, out: *mut f32)
        -> *mut di_error;
    /// The frequency penalty.
    pub fn di_sampling_get_frequency_penalty(
        sp: *const di_sampling,
        out: *mut f32,
    ) -> *mut di_error;
    /// max_tokens.
    pub fn di_sampling_get_max_tokens(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// min_tokens.
    pub fn di_sampling_get_min_tokens(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// Completions per generation.
    pub fn di_sampling_get_n(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// `*has_seed` 1 when a seed is set (then `*seed` is it), else 0.
    pub fn di_sampling_get_seed(
        sp: *const di_sampling,
        seed: *mut u64,
        has_seed: *mut i32,
    ) -> *mut di_error;
    /// The first completion's random stream.
    pub fn di_sampling_get_first_completion(sp: *const di_sampling, out: *mut i32)
        -> *mut di_error;
    /// Whether EOS is ignored.
    pub fn di_sampling_get_ignore_eos(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// Logprobs alternatives (-1: off).
    pub fn di_sampling_get_logprobs(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// Prompt logprobs alternatives (-1: off).
    pub fn di_sampling_get_prompt_logprobs(sp: *const di_sampling, out: *mut i32) -> *mut di_error;
    /// The biases in token id order; `cap` is the capacity of both buffers.
    pub fn di_sampling_get_logit_bias(
        sp: *const di_sampling,
        ids: *mut i32,
        bias: *mut f32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// The allowed tokens.
    pub fn di_sampling_get_allowed_tokens(
        sp: *const di_sampling,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// The stop tokens.
    pub fn di_sampling_get_stop_tokens(
        sp: *const di_sampling,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// Number of stop strings.
    pub fn di_sampling_stop_string_count(sp: *const di_sampling, out: *mut usize) -> *mut di_error;
    /// Stop string i (in the order added).
    pub fn di_sampling_get_stop_string(
        sp: *const di_sampling,
        i: usize,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// Whether stop strings are returned.
    pub fn di_sampling_get_include_stop_string(
        sp: *const di_sampling,
        out: *mut i32,
    ) -> *mut di_error;
    /// Whether special tokens are left out of the text.
    pub fn di_sampling_get_skip_special_tokens(
        sp: *const di_sampling,
        out: *mut i32,
    ) -> *mut di_error;

    // Sessions
    /// A new session of the engine.
    pub fn di_session_create(engine: *const di_engine, out: *mut *mut di_session) -> *mut di_error;
    /// Cancels a running generation and releases the session's state.
    pub fn di_session_free(session: *mut di_session);
    /// Appends token ids to the context.
    pub fn di_session_add_tokens(
        session: *mut di_session,
        ids: *const i32,
        n: usize,
    ) -> *mut di_error;
    /// Tokenizes text and appends it to the context.
    pub fn di_session_add_text(
        session: *mut di_session,
        text: *const c_char,
        len: usize,
        flags: di_text_flags,
    ) -> *mut di_error;
    /// Appends a chat message.
    pub fn di_session_add_message(
        session: *mut di_session,
        role: di_role,
        content: *const c_char,
        len: usize,
    ) -> *mut di_error;
    /// Appends a tool call to the last assistant message of tool calls, else to a new one.
    pub fn di_session_add_tool_call(
        session: *mut di_session,
        name: *const c_char,
        name_len: usize,
        arguments: *const c_char,
        arguments_len: usize,
    ) -> *mut di_error;
    /// Tool definitions (an OpenAI-style JSON array) described to the model; len 0 removes them.
    pub fn di_session_set_tools(
        session: *mut di_session,
        tools_json: *const c_char,
        len: usize,
    ) -> *mut di_error;
    /// Number of tokens in the context.
    pub fn di_session_context_length(session: *const di_session, out: *mut i64) -> *mut di_error;
    /// The context's token ids.
    pub fn di_session_context_tokens(
        session: *const di_session,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// Empties the context and releases the state.
    pub fn di_session_reset(session: *mut di_session) -> *mut di_error;
    /// Whether the output of a cancelled generation joins the context.
    pub fn di_session_set_keep_cancelled_output(
        session: *mut di_session,
        keep: i32,
    ) -> *mut di_error;
    /// Starts generating from the context (the parameters are copied).
    pub fn di_session_generate(
        session: *mut di_session,
        params: *const di_sampling,
    ) -> *mut di_error;
    /// Ends the running generation (safe from any thread).
    pub fn di_session_cancel(session: *mut di_session) -> *mut di_error;
    /// Waits up to `timeout_ms` for the session's next event (`*out` NULL when the time ran out).
    pub fn di_session_poll(
        session: *mut di_session,
        timeout_ms: i32,
        out: *mut *mut di_event,
    ) -> *mut di_error;
    /// Delivers the session's events to `fn_` instead of polling.
    pub fn di_session_set_callback(
        session: *mut di_session,
        fn_: di_event_callback,
        user: *mut c_void,
    ) -> *mut di_error;

    // Completion queues
    /// A new completion queue.
    pub fn di_queue_create(out: *mut *mut di_queue) -> *mut di_error;
    /// Frees the queue and the events still in it.
    pub fn di_queue_free(queue: *mut di_queue);
    /// Sends the session's events to `queue`, each with `tag`; NULL restores polling.
    pub fn di_session_set_queue(
        session: *mut di_session,
        queue: *mut di_queue,
        tag: u64,
    ) -> *mut di_error;
    /// Waits up to `timeout_ms` for an event of any attached session.
    pub fn di_queue_poll(
        queue: *mut di_queue,
        timeout_ms: i32,
        out: *mut *mut di_event,
        tag: *mut u64,
    ) -> *mut di_error;
    /// A file descriptor readable exactly while the queue holds events (owned by the queue).
    pub fn di_queue_fd(queue: *const di_queue, out: *mut i32) -> *mut di_error;

    // Events
    /// Releases an event.
    pub fn di_event_free(event: *mut di_event);
    /// The event's kind.
    pub fn di_event_kind(event: *const di_event, out: *mut di_event_type) -> *mut di_error;
    /// Which completion the event belongs to.
    pub fn di_event_completion(event: *const di_event, out: *mut i32) -> *mut di_error;
    /// The event's token ids.
    pub fn di_event_tokens(
        event: *const di_event,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// The event's token ids in place, valid until [`di_event_free`].
    pub fn di_event_tokens_view(
        event: *const di_event,
        data: *mut *const i32,
        len: *mut usize,
    ) -> *mut di_error;
    /// The text those tokens complete (UTF-8).
    pub fn di_event_text(
        event: *const di_event,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// The text in place (not NUL-terminated), valid until [`di_event_free`].
    pub fn di_event_text_view(
        event: *const di_event,
        data: *mut *const c_char,
        len: *mut usize,
    ) -> *mut di_error;
    /// Logprob of token i and its top alternatives.
    pub fn di_event_logprobs(
        event: *const di_event,
        i: usize,
        logprob: *mut f32,
        top_ids: *mut i32,
        top_logprobs: *mut f32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// Every token's logprobs in place (rows of `k` alternatives), valid until [`di_event_free`].
    pub fn di_event_logprobs_view(
        event: *const di_event,
        logprobs: *mut *const f32,
        ranks: *mut *const i32,
        top_ids: *mut *const i32,
        top_logprobs: *mut *const f32,
        n: *mut usize,
        k: *mut usize,
    ) -> *mut di_error;
    /// FINISHED events: why the completion ended.
    pub fn di_event_finish_reason(
        event: *const di_event,
        out: *mut di_finish_reason,
    ) -> *mut di_error;
    /// FINISHED events: prompt, generated and cached token counts.
    pub fn di_event_usage(
        event: *const di_event,
        prompt_tokens: *mut u64,
        completion_tokens: *mut u64,
        cached_tokens: *mut u64,
    ) -> *mut di_error;
    /// FINISHED and DONE events: the seed the generation used.
    pub fn di_event_seed(event: *const di_event, out: *mut u64) -> *mut di_error;
    /// FINISHED events with `DI_FINISH_ERROR`: a copy of the error; NULL otherwise.
    pub fn di_event_error(event: *const di_event, out: *mut *mut di_error) -> *mut di_error;

    // Grammars
    /// Compiles a grammar for the engine's tokenizer with default options.
    pub fn di_grammar_compile(
        engine: *const di_engine,
        kind: di_grammar_kind,
        spec: *const c_char,
        len: usize,
        out: *mut *mut di_grammar,
    ) -> *mut di_error;
    /// The same with flags and the longest whitespace run (0 = unbounded).
    pub fn di_grammar_compile_options(
        engine: *const di_engine,
        kind: di_grammar_kind,
        spec: *const c_char,
        len: usize,
        flags: di_grammar_flags,
        max_whitespace_run: u32,
        out: *mut *mut di_grammar,
    ) -> *mut di_error;
    /// The error a spec would give when compiled (NULL: valid).
    pub fn di_grammar_validate(
        kind: di_grammar_kind,
        spec: *const c_char,
        len: usize,
        flags: di_grammar_flags,
        max_whitespace_run: u32,
    ) -> *mut di_error;
    /// Releases a grammar.
    pub fn di_grammar_free(grammar: *mut di_grammar);
    /// Constrains generations started with these parameters (NULL removes it).
    pub fn di_sampling_set_grammar(
        sp: *mut di_sampling,
        grammar: *const di_grammar,
    ) -> *mut di_error;
    /// The grammar attached to the parameters as a new handle, or NULL.
    pub fn di_sampling_get_grammar(
        sp: *const di_sampling,
        out: *mut *mut di_grammar,
    ) -> *mut di_error;

    // Tokenizers and matchers
    /// Loads a tokenizer.json (or the one in a model directory).
    pub fn di_tokenizer_create(
        path: *const c_char,
        len: usize,
        out: *mut *mut di_tokenizer,
    ) -> *mut di_error;
    /// The engine's tokenizer.
    pub fn di_engine_tokenizer(
        engine: *const di_engine,
        out: *mut *mut di_tokenizer,
    ) -> *mut di_error;
    /// Releases a tokenizer.
    pub fn di_tokenizer_free(tokenizer: *mut di_tokenizer);
    /// Largest token id + 1.
    pub fn di_tokenizer_vocab_size(tokenizer: *const di_tokenizer, out: *mut i32) -> *mut di_error;
    /// Tokenizes UTF-8 text.
    pub fn di_tokenizer_encode(
        tokenizer: *const di_tokenizer,
        text: *const c_char,
        len: usize,
        flags: di_text_flags,
        buf: *mut i32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// UTF-8 text of token ids.
    pub fn di_tokenizer_decode(
        tokenizer: *const di_tokenizer,
        ids: *const i32,
        n: usize,
        flags: di_detok_flags,
        buf: *mut c_char,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// Compiles a grammar for a tokenizer.
    pub fn di_grammar_compile_for_tokenizer(
        tokenizer: *const di_tokenizer,
        vocab_size: i32,
        eos_ids: *const i32,
        n_eos: usize,
        kind: di_grammar_kind,
        spec: *const c_char,
        len: usize,
        flags: di_grammar_flags,
        max_whitespace_run: u32,
        out: *mut *mut di_grammar,
    ) -> *mut di_error;
    /// A matcher at the start of the grammar.
    pub fn di_matcher_create(
        grammar: *const di_grammar,
        out: *mut *mut di_matcher,
    ) -> *mut di_error;
    /// Releases a matcher.
    pub fn di_matcher_free(matcher: *mut di_matcher);
    /// Consumes a token.
    pub fn di_matcher_accept_token(matcher: *mut di_matcher, token: i32) -> *mut di_error;
    /// Consumes raw UTF-8 bytes as one step.
    pub fn di_matcher_accept_string(
        matcher: *mut di_matcher,
        s: *const c_char,
        len: usize,
    ) -> *mut di_error;
    /// Undoes the last n accept steps.
    pub fn di_matcher_rollback(matcher: *mut di_matcher, n: usize) -> *mut di_error;
    /// Back to the start of the grammar.
    pub fn di_matcher_reset(matcher: *mut di_matcher) -> *mut di_error;
    /// The allowed-token bitmask for the next step.
    pub fn di_matcher_fill_mask(
        matcher: *mut di_matcher,
        words: *mut u32,
        cap: usize,
        out_len: *mut usize,
    ) -> *mut di_error;
    /// 1 when the output so far is a complete match, else 0.
    pub fn di_matcher_can_end(matcher: *const di_matcher, out: *mut i32) -> *mut di_error;
    /// 1 after an end-of-sequence token was accepted, else 0.
    pub fn di_matcher_is_terminated(matcher: *const di_matcher, out: *mut i32) -> *mut di_error;
}
