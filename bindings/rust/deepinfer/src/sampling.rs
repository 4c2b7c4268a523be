//! Sampling parameters: how a generation picks its tokens and when it stops.

use std::fmt;

use deepinfer_sys as sys;

use crate::error::{check, Result};
use crate::ffi::{self, get, int32};
use crate::grammar::Grammar;
use crate::version::ensure_compatible;

/// The sampling parameters of a generation, made with [`SamplingParams::builder`] (the library's
/// defaults) or [`Engine::sampling_defaults`](crate::Engine::sampling_defaults) (the model's).
///
/// Each setting is checked by the library as it is set; [`SamplingParamsBuilder::build`] returns
/// the first error, an [`InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the field
/// and value. The getters return what was set (or the default), and `Debug` shows them all.
/// `SamplingParams` is `Send + Sync`: one value may serve many generations on many threads.
///
/// ```
/// use deepinfer::SamplingParams;
///
/// let params = SamplingParams::builder()
///     .temperature(0.7)
///     .top_p(0.9)
///     .max_tokens(64)
///     .seed(42)
///     .stop("\n\n")
///     .build()?;
/// assert_eq!(params.max_tokens(), 64);
/// assert_eq!(params.seed(), Some(42));
/// assert_eq!(params.stop_strings(), vec!["\n\n".to_string()]);
/// println!("{params:?}");
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub struct SamplingParams {
    raw: *mut sys::di_sampling,
}

// SAFETY: calls taking a const di_sampling may run concurrently (deepinfer.h, Threading); every
// call that changes it takes &mut self.
unsafe impl Send for SamplingParams {}
unsafe impl Sync for SamplingParams {}

impl Drop for SamplingParams {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_sampling_free(self.raw) }
    }
}

impl Clone for SamplingParams {
    /// A copy (panics only when the library runs out of memory, as allocating in Rust would).
    fn clone(&self) -> Self {
        self.try_clone()
            .unwrap_or_else(|e| panic!("deepinfer: cloning sampling parameters failed: {e}"))
    }
}

impl SamplingParams {
    pub(crate) fn from_raw(raw: *mut sys::di_sampling) -> SamplingParams {
        SamplingParams { raw }
    }

    pub(crate) fn raw(&self) -> *const sys::di_sampling {
        self.raw
    }

    /// Starts from the library's defaults: temperature 1, no top-k/top-p/min-p, no penalties,
    /// `max_tokens` 256, one completion, no seed (drawn from the engine), no logprobs.
    pub fn builder() -> SamplingParamsBuilder {
        let params = ensure_compatible()
            // SAFETY: `out` is written on success only.
            .and_then(|()| ffi::create(|out| unsafe { sys::di_sampling_create(out) }))
            .map(SamplingParams::from_raw);
        SamplingParamsBuilder { params }
    }

    /// The library's defaults (`SamplingParams::builder().build()`).
    pub fn new() -> Result<SamplingParams> {
        SamplingParams::builder().build()
    }

    /// Greedy decoding (temperature 0) of at most `max_tokens` tokens.
    ///
    /// ```
    /// let params = deepinfer::SamplingParams::greedy(16)?;
    /// assert_eq!(params.temperature(), 0.0);
    /// # Ok::<(), deepinfer::Error>(())
    /// ```
    pub fn greedy(max_tokens: u32) -> Result<SamplingParams> {
        SamplingParams::builder()
            .temperature(0.0)
            .max_tokens(max_tokens)
            .build()
    }

    /// A copy, failing only when the library runs out of memory.
    pub fn try_clone(&self) -> Result<SamplingParams> {
        // SAFETY: `self` is live; `out` is written on success only.
        ffi::create(|out| unsafe { sys::di_sampling_clone(self.raw, out) })
            .map(SamplingParams::from_raw)
    }

    /// A builder that starts from a copy of these parameters.
    ///
    /// ```
    /// let base = deepinfer::SamplingParams::greedy(16)?;
    /// let longer = base.to_builder().max_tokens(64).build()?;
    /// assert_eq!((base.max_tokens(), longer.max_tokens()), (16, 64));
    /// # Ok::<(), deepinfer::Error>(())
    /// ```
    pub fn to_builder(&self) -> SamplingParamsBuilder {
        SamplingParamsBuilder {
            params: self.try_clone(),
        }
    }

    /// Sampling temperature; 0 is greedy.
    pub fn temperature(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_temperature)
    }
    /// Keep the k most likely tokens (0 or -1: off).
    pub fn top_k(&self) -> i32 {
        get(self.raw, sys::di_sampling_get_top_k)
    }
    /// Nucleus sampling mass (1: off).
    pub fn top_p(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_top_p)
    }
    /// Drop tokens below `min_p` times the top probability (0: off).
    pub fn min_p(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_min_p)
    }
    /// Penalty for tokens of the prompt and output (1: off).
    pub fn repetition_penalty(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_repetition_penalty)
    }
    /// Penalty for tokens already generated.
    pub fn presence_penalty(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_presence_penalty)
    }
    /// Penalty per occurrence in the output.
    pub fn frequency_penalty(&self) -> f32 {
        get(self.raw, sys::di_sampling_get_frequency_penalty)
    }
    /// Most tokens to generate.
    pub fn max_tokens(&self) -> u32 {
        get::<_, i32>(self.raw, sys::di_sampling_get_max_tokens).max(0) as u32
    }
    /// Fewest tokens before EOS or a stop token may end generation.
    pub fn min_tokens(&self) -> u32 {
        get::<_, i32>(self.raw, sys::di_sampling_get_min_tokens).max(0) as u32
    }
    /// Completions per generation.
    pub fn n(&self) -> u32 {
        get::<_, i32>(self.raw, sys::di_sampling_get_n).max(0) as u32
    }
    /// The seed, or `None` when each generation draws one from the engine.
    pub fn seed(&self) -> Option<u64> {
        let (mut seed, mut has) = (0u64, 0i32);
        // SAFETY: `self` is live; both outputs are valid places.
        if let Err(e) = check(unsafe { sys::di_sampling_get_seed(self.raw, &mut seed, &mut has) }) {
            panic!("deepinfer: a getter failed on a live handle: {e}");
        }
        if has != 0 {
            Some(seed)
        } else {
            None
        }
    }
    /// The random stream of the first completion (see [`SamplingParamsBuilder::first_completion`]).
    pub fn first_completion(&self) -> u32 {
        get::<_, i32>(self.raw, sys::di_sampling_get_first_completion).max(0) as u32
    }
    /// Whether end-of-sequence tokens are ignored.
    pub fn ignore_eos(&self) -> bool {
        get::<_, i32>(self.raw, sys::di_sampling_get_ignore_eos) != 0
    }
    /// Alternatives reported with each output token's logprob, or `None` when logprobs are off.
    pub fn logprobs(&self) -> Option<u32> {
        u32::try_from(get::<_, i32>(self.raw, sys::di_sampling_get_logprobs)).ok()
    }
    /// Alternatives reported with each prompt token's logprob, or `None` when off.
    pub fn prompt_logprobs(&self) -> Option<u32> {
        u32::try_from(get::<_, i32>(
            self.raw,
            sys::di_sampling_get_prompt_logprobs,
        ))
        .ok()
    }
    /// The logit biases, `(token id, bias)` in token id order.
    pub fn logit_bias(&self) -> Vec<(i32, f32)> {
        let mut ids = Vec::new();
        let biases = self.list(|buf, cap, out_len| {
            ids.resize(cap, 0);
            // SAFETY: both buffers hold `cap` elements.
            unsafe {
                sys::di_sampling_get_logit_bias(self.raw, ids.as_mut_ptr(), buf, cap, out_len)
            }
        });
        ids.into_iter().zip(biases).collect()
    }
    /// The only tokens that may be sampled (empty: no restriction).
    pub fn allowed_tokens(&self) -> Vec<i32> {
        self.list(|buf, cap, out_len| {
            // SAFETY: the buffer holds `cap` ids.
            unsafe { sys::di_sampling_get_allowed_tokens(self.raw, buf, cap, out_len) }
        })
    }
    /// Tokens that end the generation.
    pub fn stop_tokens(&self) -> Vec<i32> {
        self.list(|buf, cap, out_len| {
            // SAFETY: the buffer holds `cap` ids.
            unsafe { sys::di_sampling_get_stop_tokens(self.raw, buf, cap, out_len) }
        })
    }
    /// Strings that end the generation, in the order added.
    pub fn stop_strings(&self) -> Vec<String> {
        let count: usize = get(self.raw, sys::di_sampling_stop_string_count);
        (0..count)
            .map(|i| {
                ffi::read_string(32, |buf, cap, out_len| {
                    // SAFETY: the buffer holds `cap` bytes.
                    unsafe { sys::di_sampling_get_stop_string(self.raw, i, buf, cap, out_len) }
                })
                .unwrap_or_else(|e| panic!("deepinfer: a getter failed on a live handle: {e}"))
            })
            .collect()
    }
    /// Whether a matched stop string is returned with the text.
    pub fn include_stop_string(&self) -> bool {
        get::<_, i32>(self.raw, sys::di_sampling_get_include_stop_string) != 0
    }
    /// Whether special tokens are left out of the text of events.
    pub fn skip_special_tokens(&self) -> bool {
        get::<_, i32>(self.raw, sys::di_sampling_get_skip_special_tokens) != 0
    }
    /// The grammar constraining the output, if any (a new handle to the same compiled grammar).
    pub fn grammar(&self) -> Option<Grammar> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `self` is live; `out` is written on success only.
        if let Err(e) = check(unsafe { sys::di_sampling_get_grammar(self.raw, &mut out) }) {
            panic!("deepinfer: a getter failed on a live handle: {e}");
        }
        if out.is_null() {
            None
        } else {
            Some(Grammar::from_raw(out))
        }
    }

    fn list<T: Copy + Default>(
        &self,
        call: impl FnMut(*mut T, usize, *mut usize) -> *mut sys::di_error,
    ) -> Vec<T> {
        ffi::read_vec(16, call)
            .unwrap_or_else(|e| panic!("deepinfer: a getter failed on a live handle: {e}"))
    }
}

impl fmt::Debug for SamplingParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SamplingParams")
            .field("temperature", &self.temperature())
            .field("top_k", &self.top_k())
            .field("top_p", &self.top_p())
            .field("min_p", &self.min_p())
            .field("repetition_penalty", &self.repetition_penalty())
            .field("presence_penalty", &self.presence_penalty())
            .field("frequency_penalty", &self.frequency_penalty())
            .field("max_tokens", &self.max_tokens())
            .field("min_tokens", &self.min_tokens())
            .field("n", &self.n())
            .field("seed", &self.seed())
            .field("first_completion", &self.first_completion())
            .field("ignore_eos", &self.ignore_eos())
            .field("logprobs", &self.logprobs())
            .field("prompt_logprobs", &self.prompt_logprobs())
            .field("logit_bias", &self.logit_bias())
            .field("allowed_tokens", &self.allowed_tokens())
            .field("stop_tokens", &self.stop_tokens())
            .field("stop_strings", &self.stop_strings())
            .field("include_stop_string", &self.include_stop_string())
            .field("skip_special_tokens", &self.skip_special_tokens())
            .field("grammar", &self.grammar().is_some())
            .finish()
    }
}

/// Builds [`SamplingParams`]; every field of the C ABI has a method. The first value the library
/// rejects is the error [`build`](SamplingParamsBuilder::build) returns.
#[must_use]
pub struct SamplingParamsBuilder {
    params: Result<SamplingParams>,
}

impl fmt::Debug for SamplingParamsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SamplingParamsBuilder")
            .field(&self.params)
            .finish()
    }
}

impl SamplingParamsBuilder {
    fn set(mut self, call: impl FnOnce(*mut sys::di_sampling) -> *mut sys::di_error) -> Self {
        if let Ok(params) = &self.params {
            if let Err(e) = check(call(params.raw)) {
                self.params = Err(e);
            }
        }
        self
    }

    /// Sampling temperature in [0, 1e6]; 0 is greedy.
    pub fn temperature(self, t: f32) -> Self {
        // SAFETY (every setter below): the parameters are owned and live; slices are valid.
        self.set(|sp| unsafe { sys::di_sampling_set_temperature(sp, t) })
    }
    /// Keep the k most likely tokens (>= -1; 0 or -1: off).
    pub fn top_k(self, k: i32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_top_k(sp, k) })
    }
    /// Nucleus sampling mass in (0, 1]; 1 is off.
    pub fn top_p(self, p: f32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_top_p(sp, p) })
    }
    /// Drop tokens below `p` times the top probability, `p` in [0, 1]; 0 is off.
    pub fn min_p(self, p: f32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_min_p(sp, p) })
    }
    /// Penalty for tokens of the prompt and output, in [0.01, 100]; 1 is off.
    pub fn repetition_penalty(self, v: f32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_repetition_penalty(sp, v) })
    }
    /// Penalty for tokens already generated, in [-2, 2].
    pub fn presence_penalty(self, v: f32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_presence_penalty(sp, v) })
    }
    /// Penalty per occurrence in the output, in [-2, 2].
    pub fn frequency_penalty(self, v: f32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_frequency_penalty(sp, v) })
    }
    /// Most tokens to generate (>= 1).
    pub fn max_tokens(self, n: u32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_max_tokens(sp, int32(n)) })
    }
    /// Fewest tokens before EOS or a stop token may end generation.
    pub fn min_tokens(self, n: u32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_min_tokens(sp, int32(n)) })
    }
    /// Completions per generation, in [1, 128].
    pub fn n(self, n: u32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_n(sp, int32(n)) })
    }
    /// The seed (the same seed, prompt and parameters repeat the output), or `None` to draw one
    /// from the engine for each generation.
    pub fn seed(self, seed: impl Into<Option<u64>>) -> Self {
        match seed.into() {
            Some(s) => self.set(|sp| unsafe { sys::di_sampling_set_seed(sp, s) }),
            None => self.set(|sp| unsafe { sys::di_sampling_clear_seed(sp) }),
        }
    }
    /// Completion i draws from random stream `first + i`: with one completion and `first` i, a
    /// generation replays completion i of an earlier one with the same seed.
    pub fn first_completion(self, first: u32) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_first_completion(sp, int32(first)) })
    }
    /// Keep generating after end-of-sequence tokens.
    pub fn ignore_eos(self, ignore: bool) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_ignore_eos(sp, i32::from(ignore)) })
    }
    /// Report each output token's logprob and rank with its `top` most likely alternatives
    /// (0..=20), or `None` for no logprobs.
    pub fn logprobs(self, top: impl Into<Option<u32>>) -> Self {
        let n = top.into().map_or(-1, int32);
        self.set(|sp| unsafe { sys::di_sampling_set_logprobs(sp, n) })
    }
    /// The same for every prompt token after the first, in a
    /// [`PromptLogprobs`](crate::EventKind::PromptLogprobs) event.
    pub fn prompt_logprobs(self, top: impl Into<Option<u32>>) -> Self {
        let n = top.into().map_or(-1, int32);
        self.set(|sp| unsafe { sys::di_sampling_set_prompt_logprobs(sp, n) })
    }
    /// Adds each bias, in [-100, 100], to its token's logit (replaces earlier biases).
    pub fn logit_bias(self, biases: &[(i32, f32)]) -> Self {
        let (ids, values): (Vec<i32>, Vec<f32>) = biases.iter().copied().unzip();
        self.set(|sp| unsafe {
            sys::di_sampling_set_logit_bias(sp, ids.as_ptr(), values.as_ptr(), ids.len())
        })
    }
    /// Only these tokens may be sampled (empty: no restriction).
    pub fn allowed_tokens(self, ids: &[i32]) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_allowed_tokens(sp, ids.as_ptr(), ids.len()) })
    }
    /// The generation stops after any of these tokens (and at EOS unless `ignore_eos`).
    pub fn stop_tokens(self, ids: &[i32]) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_stop_tokens(sp, ids.as_ptr(), ids.len()) })
    }
    /// Adds a stop string (1..=1024 bytes; at most 64): the generation stops when its text
    /// contains it. Repeatable.
    pub fn stop(self, s: &str) -> Self {
        let (ptr, len) = ffi::text(s.as_bytes());
        self.set(|sp| unsafe { sys::di_sampling_add_stop_string(sp, ptr, len) })
    }
    /// Removes every stop string added so far.
    pub fn clear_stop_strings(self) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_clear_stop_strings(sp) })
    }
    /// Return a matched stop string with the text (default: left out).
    pub fn include_stop_string(self, include: bool) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_include_stop_string(sp, i32::from(include)) })
    }
    /// Leave special tokens out of the text of events (default on; their ids are still returned).
    pub fn skip_special_tokens(self, skip: bool) -> Self {
        self.set(|sp| unsafe { sys::di_sampling_set_skip_special_tokens(sp, i32::from(skip)) })
    }
    /// Constrains the output to a grammar (the parameters keep it alive), or removes the
    /// constraint with `None`.
    pub fn grammar<'g>(self, grammar: impl Into<Option<&'g Grammar>>) -> Self {
        let raw = grammar.into().map_or(std::ptr::null(), Grammar::raw);
        self.set(|sp| unsafe { sys::di_sampling_set_grammar(sp, raw) })
    }

    /// The parameters, or the first error a setting gave.
    pub fn build(self) -> Result<SamplingParams> {
        self.params
    }
}
