//! Events of a generation: new output, a completion's end, prompt logprobs.

use std::fmt;

use deepinfer_sys as sys;

use crate::error::{check, Error};
use crate::ffi::get;

/// What an [`Event`] reports. The end of a generation (the ABI's DONE event) ends the
/// [`Stream`](crate::Stream) instead of coming as an event, and kinds newer than this crate are
/// skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// New output of one completion: tokens and their text (either may be empty: text that may
    /// still become a stop string is held back until it cannot).
    Tokens,
    /// One completion ended: [`Event::finish_reason`], [`Event::usage`], [`Event::seed`].
    Finished,
    /// Logprobs of the prompt tokens (when requested), before any output.
    PromptLogprobs,
}

impl EventKind {
    /// The kind of a raw event type; None for DONE and for kinds this crate does not know.
    pub(crate) fn from_raw(kind: sys::di_event_type) -> Option<EventKind> {
        match kind {
            sys::DI_EVENT_TOKENS => Some(EventKind::Tokens),
            sys::DI_EVENT_FINISHED => Some(EventKind::Finished),
            sys::DI_EVENT_PROMPT_LOGPROBS => Some(EventKind::PromptLogprobs),
            _ => None,
        }
    }
}

/// Why a completion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// End-of-sequence, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the context limit.
    Length,
    /// Cancelled ([`CancelHandle`](crate::CancelHandle), a dropped stream or engine).
    Cancelled,
    /// Failed: see [`Event::error`].
    Error,
    /// A reason this version of the crate does not name (its raw value).
    Unknown(i32),
}

impl FinishReason {
    pub(crate) fn from_raw(reason: sys::di_finish_reason) -> Option<FinishReason> {
        match reason {
            sys::DI_FINISH_NONE => None,
            sys::DI_FINISH_STOP => Some(FinishReason::Stop),
            sys::DI_FINISH_LENGTH => Some(FinishReason::Length),
            sys::DI_FINISH_CANCELLED => Some(FinishReason::Cancelled),
            sys::DI_FINISH_ERROR => Some(FinishReason::Error),
            other => Some(FinishReason::Unknown(other)),
        }
    }
}

/// Token counts of a finished completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    /// Prompt tokens processed for this generation.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Prompt tokens whose state was reused from earlier turns instead of computed.
    pub cached_tokens: u64,
}

/// One event of a generation, read in place: its text and tokens are borrowed from it.
///
/// Events are immutable and `Send + Sync`.
///
/// ```
/// use deepinfer::{EventKind, SamplingParams};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
/// # let engine = deepinfer::Engine::builder().model(&model).build()?;
/// let mut session = engine.session()?;
/// session.add_text("for i in range(")?;
/// let params = SamplingParams::builder().temperature(0.0).max_tokens(8).logprobs(2).build()?;
/// for event in session.generate(&params)? {
///     let event = event?;
///     match event.kind() {
///         EventKind::Tokens => {
///             let text: &str = event.text();
///             let ids: &[i32] = event.tokens();
///             let logprobs = event.logprobs().expect("requested");
///             assert_eq!(logprobs.len(), ids.len());
///             print!("{text}");
///         }
///         EventKind::Finished => println!("\n[{:?}, {:?}]", event.finish_reason(), event.usage()),
///         _ => {}
///     }
/// }
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub struct Event {
    raw: *mut sys::di_event,
    kind: EventKind,
}

// SAFETY: events are immutable; const calls may run concurrently (deepinfer.h, Threading).
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_event_free(self.raw) }
    }
}

impl Event {
    /// Wraps an owned event of a known kind (`from_raw` of its type gave `kind`).
    pub(crate) fn new(raw: *mut sys::di_event, kind: EventKind) -> Event {
        Event { raw, kind }
    }

    /// What the event reports.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// Which completion (0 .. n-1) the event belongs to.
    pub fn completion(&self) -> usize {
        get::<_, i32>(self.raw, sys::di_event_completion).max(0) as usize
    }

    /// The output text of a [`Tokens`](EventKind::Tokens) event (a character is never split
    /// across events); empty for other kinds.
    pub fn text(&self) -> &str {
        let bytes = self.text_bytes();
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            // The library promises UTF-8; never trust it with unchecked conversions.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        }
    }

    fn text_bytes(&self) -> &[u8] {
        let (mut data, mut len) = (std::ptr::null(), 0usize);
        // SAFETY: the view stays valid until di_event_free, i.e. while `self` lives.
        unsafe {
            view(check(sys::di_event_text_view(
                self.raw, &mut data, &mut len,
            )));
            slice(data.cast::<u8>(), len)
        }
    }

    /// The token ids: new output tokens, or the prompt's tokens in a
    /// [`PromptLogprobs`](EventKind::PromptLogprobs) event.
    pub fn tokens(&self) -> &[i32] {
        let (mut data, mut len) = (std::ptr::null(), 0usize);
        // SAFETY: as for the text.
        unsafe {
            view(check(sys::di_event_tokens_view(
                self.raw, &mut data, &mut len,
            )));
            slice(data, len)
        }
    }

    /// Every token's logprobs, or `None` when they were not requested
    /// ([`logprobs`](crate::SamplingParamsBuilder::logprobs)).
    pub fn logprobs(&self) -> Option<Logprobs<'_>> {
        let (mut lp, mut ranks, mut top_ids, mut top_lp) = (
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
        );
        let (mut n, mut k) = (0usize, 0usize);
        // SAFETY: the views stay valid while `self` lives; rows hold `k` alternatives each.
        unsafe {
            let result = check(sys::di_event_logprobs_view(
                self.raw,
                &mut lp,
                &mut ranks,
                &mut top_ids,
                &mut top_lp,
                &mut n,
                &mut k,
            ));
            match result {
                Ok(()) => Some(Logprobs {
                    logprobs: slice(lp, n),
                    ranks: slice(ranks, n),
                    top_ids: slice(top_ids, n * k),
                    top_logprobs: slice(top_lp, n * k),
                    k,
                }),
                Err(e) if e.kind() == crate::ErrorKind::State => None,
                Err(e) => panic!("deepinfer: reading an event failed: {e}"),
            }
        }
    }

    /// Why the completion ended ([`Finished`](EventKind::Finished) events; `None` for others).
    pub fn finish_reason(&self) -> Option<FinishReason> {
        FinishReason::from_raw(get(self.raw, sys::di_event_finish_reason))
    }

    /// Token counts ([`Finished`](EventKind::Finished) events; `None` for others).
    pub fn usage(&self) -> Option<Usage> {
        if self.kind != EventKind::Finished {
            return None;
        }
        let mut u = Usage::default();
        // SAFETY: live; every output is a valid place.
        view(check(unsafe {
            sys::di_event_usage(
                self.raw,
                &mut u.prompt_tokens,
                &mut u.completion_tokens,
                &mut u.cached_tokens,
            )
        }));
        Some(u)
    }

    /// The seed the generation used ([`Finished`](EventKind::Finished) events; `None` for
    /// others): set it to replay the output exactly.
    pub fn seed(&self) -> Option<u64> {
        if self.kind == EventKind::Finished {
            Some(get(self.raw, sys::di_event_seed))
        } else {
            None
        }
    }

    /// Why the completion failed ([`FinishReason::Error`]); `None` otherwise.
    pub fn error(&self) -> Option<Error> {
        let mut out = std::ptr::null_mut();
        // SAFETY: live; `out` is written on success only.
        view(check(unsafe { sys::di_event_error(self.raw, &mut out) }));
        if out.is_null() {
            None
        } else {
            // SAFETY: the copy belongs to the caller.
            Some(unsafe { Error::take(out) })
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Event");
        d.field("kind", &self.kind)
            .field("completion", &self.completion());
        d.field("text", &self.text())
            .field("tokens", &self.tokens());
        if let Some(reason) = self.finish_reason() {
            d.field("finish_reason", &reason)
                .field("usage", &self.usage())
                .field("seed", &self.seed());
        }
        d.finish()
    }
}

/// A view call of a live event fails only on a handle the library does not know.
fn view(result: crate::Result<()>) {
    if let Err(e) = result {
        panic!("deepinfer: reading an event failed: {e}");
    }
}

/// A slice over library memory (an empty view may still point anywhere valid, never NULL).
///
/// # Safety
/// `data` points to `len` elements valid for the chosen lifetime.
unsafe fn slice<'a, T>(data: *const T, len: usize) -> &'a [T] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data, len)
    }
}

/// The logprobs of an event's tokens, read in place ([`Event::logprobs`]).
///
/// For token `i`: [`logprob`](Logprobs::logprob) is its logprob, [`rank`](Logprobs::rank) its
/// 1-based rank in the distribution, and [`top`](Logprobs::top) its most likely alternatives.
#[derive(Clone, Copy, Debug)]
pub struct Logprobs<'a> {
    logprobs: &'a [f32],
    ranks: &'a [i32],
    top_ids: &'a [i32],
    top_logprobs: &'a [f32],
    k: usize,
}

impl<'a> Logprobs<'a> {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.logprobs.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.logprobs.is_empty()
    }

    /// Every token's logprob.
    pub fn logprobs(&self) -> &'a [f32] {
        self.logprobs
    }

    /// Every token's 1-based rank.
    pub fn ranks(&self) -> &'a [i32] {
        self.ranks
    }

    /// Logprob of token `i` (panics when out of range, like indexing).
    pub fn logprob(&self, i: usize) -> f32 {
        self.logprobs[i]
    }

    /// Rank of token `i` (1: the most likely).
    pub fn rank(&self, i: usize) -> i32 {
        self.ranks[i]
    }

    /// Alternatives per token (the row width of [`top_ids`](Logprobs::top_ids)).
    pub fn top_k(&self) -> usize {
        self.k
    }

    /// All alternative ids, `top_k` per token, most likely first (-1 fills short rows).
    pub fn top_ids(&self) -> &'a [i32] {
        self.top_ids
    }

    /// All alternative logprobs, laid out as [`top_ids`](Logprobs::top_ids) (-inf fills short rows).
    pub fn top_logprobs(&self) -> &'a [f32] {
        self.top_logprobs
    }

    /// The `(id, logprob)` alternatives of token `i`, most likely first.
    pub fn top(&self, i: usize) -> impl Iterator<Item = (i32, f32)> + 'a {
        let row = i * self.k..(i + 1) * self.k;
        let ids = &self.top_ids[row.clone()];
        let lps = &self.top_logprobs[row];
        ids.iter()
            .copied()
            .zip(lps.iter().copied())
            .filter(|&(id, _)| id >= 0)
    }
}
