//! Sessions: a context (prompt and conversation so far) whose model state persists between its
//! generations, so a follow-up turn only processes its new tokens.

use deepinfer_sys as sys;

use crate::engine::Engine;
use crate::error::{check, Result};
use crate::ffi;
use crate::queue::Queue;
use crate::sampling::SamplingParams;
use crate::stream::Stream;

/// Who speaks a chat message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// The system prompt.
    System,
    /// The user.
    User,
    /// The assistant (the model).
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    fn raw(self) -> sys::di_role {
        match self {
            Role::System => sys::DI_ROLE_SYSTEM,
            Role::User => sys::DI_ROLE_USER,
            Role::Assistant => sys::DI_ROLE_ASSISTANT,
            Role::Tool => sys::DI_ROLE_TOOL,
        }
    }
}

/// An owned `di_session`: the part of a session that batch generation shares with [`Session`].
#[derive(Debug)]
pub(crate) struct RawSession(*mut sys::di_session);

// SAFETY: a session is used by one thread at a time; moving it between threads is allowed.
unsafe impl Send for RawSession {}

impl Drop for RawSession {
    fn drop(&mut self) {
        // SAFETY: owned; cancels a running generation (its last events go to the queue).
        unsafe { sys::di_session_free(self.0) }
    }
}

impl RawSession {
    pub(crate) fn new(engine: &Engine) -> Result<RawSession> {
        // SAFETY: the engine is live; `out` is written on success only.
        ffi::create(|out| unsafe { sys::di_session_create(engine.raw(), out) }).map(RawSession)
    }

    pub(crate) fn attach(&self, queue: &Queue, tag: u64) -> Result<()> {
        // SAFETY: both live; the queue outlives the session (see the owners' field order).
        check(unsafe { sys::di_session_set_queue(self.0, queue.raw(), tag) })
    }

    pub(crate) fn add_text(&self, text: &str, flags: sys::di_text_flags) -> Result<()> {
        let (ptr, len) = ffi::text(text.as_bytes());
        // SAFETY: live; `ptr`/`len` describe `text`.
        check(unsafe { sys::di_session_add_text(self.0, ptr, len, flags) })
    }

    pub(crate) fn generate(&self, params: &SamplingParams) -> Result<()> {
        // SAFETY: both live; the parameters are copied.
        check(unsafe { sys::di_session_generate(self.0, params.raw()) })
    }

    pub(crate) fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            session: self.0 as usize,
        }
    }
}

/// A conversation or one-shot generation of an [`Engine`]: a context of token ids, and the model
/// state that goes with it.
///
/// Add a prompt (text, token ids or chat messages), then [`generate`](Session::generate); the
/// output of the first completion joins the context, so the next turn continues from it. A
/// session is `Send`: it can move between threads, and is used by one at a time. Dropping it
/// cancels a running generation. A session whose engine was dropped fails with
/// [`Closed`](crate::ErrorKind::Closed).
///
/// ```
/// use deepinfer::{Role, SamplingParams};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
/// # let engine = deepinfer::Engine::builder().model(&model).build()?;
/// let mut chat = engine.session()?;
/// chat.add_message(Role::System, "You answer in Python.")?;
/// chat.add_message(Role::User, "Print hello.")?;
/// let reply = chat.generate(&SamplingParams::greedy(16)?)?.text()?;
/// chat.add_message(Role::User, "Again, louder.")?; // the reply is already in the context
/// # let _ = reply;
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Debug)]
pub struct Session {
    // Dropped in this order: the session (which may still deliver events), then its queue.
    raw: RawSession,
    queue: Queue,
}

impl Session {
    pub(crate) fn new(engine: &Engine) -> Result<Session> {
        let raw = RawSession::new(engine)?;
        let queue = Queue::new()?;
        raw.attach(&queue, 0)?;
        Ok(Session { raw, queue })
    }

    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Appends token ids to the context (ids outside the vocabulary are an
    /// [`InvalidArgument`](crate::ErrorKind::InvalidArgument) error).
    pub fn add_tokens(&mut self, ids: &[i32]) -> Result<()> {
        // SAFETY: live; `ids` is a valid slice.
        check(unsafe { sys::di_session_add_tokens(self.raw.0, ids.as_ptr(), ids.len()) })
    }

    /// Tokenizes plain text and appends it: control-token lookalikes in it become ordinary tokens.
    pub fn add_text(&mut self, text: &str) -> Result<()> {
        self.raw.add_text(text, sys::DI_TEXT_PLAIN)
    }

    /// Tokenizes text in which control tokens written out are recognised, and appends it.
    pub fn add_special_text(&mut self, text: &str) -> Result<()> {
        self.raw.add_text(text, sys::DI_TEXT_SPECIAL)
    }

    /// Appends a chat message in the model's chat format (content is always plain text). A
    /// session holds either chat messages or raw text and tokens, not both.
    pub fn add_message(&mut self, role: Role, content: &str) -> Result<()> {
        let (ptr, len) = ffi::text(content.as_bytes());
        // SAFETY: live; `ptr`/`len` describe `content`.
        check(unsafe { sys::di_session_add_message(self.raw.0, role.raw(), ptr, len) })
    }

    /// Appends a tool call (a function name and its JSON arguments) to the last message when it
    /// is an assistant message made only of tool calls, else to a new one.
    pub fn add_tool_call(&mut self, name: &str, arguments: &str) -> Result<()> {
        let (n, nl) = ffi::text(name.as_bytes());
        let (a, al) = ffi::text(arguments.as_bytes());
        // SAFETY: live; text arguments are valid slices.
        check(unsafe { sys::di_session_add_tool_call(self.raw.0, n, nl, a, al) })
    }

    /// Tool definitions for a chat: an OpenAI-style JSON array
    /// (`[{"type": "function", "function": {"name", "description", "parameters"}}]`), which the
    /// library describes to the model; `""` removes them.
    ///
    /// ```
    /// # let model = std::env::var("DEEPINFER_MODEL")
    /// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
    /// # let engine = deepinfer::Engine::builder().model(&model).build()?;
    /// let mut session = engine.session()?;
    /// session.add_message(deepinfer::Role::User, "What is the weather in Paris?")?;
    /// session.set_tools(r#"[{"type": "function", "function": {"name": "get_weather"}}]"#)?;
    /// assert!(session.set_tools("[").is_err());
    /// # Ok::<(), deepinfer::Error>(())
    /// ```
    pub fn set_tools(&mut self, tools_json: &str) -> Result<()> {
        let (t, tl) = ffi::text(tools_json.as_bytes());
        // SAFETY: live; the text is a valid slice.
        check(unsafe { sys::di_session_set_tools(self.raw.0, t, tl) })
    }

    /// Number of tokens in the context.
    pub fn context_len(&self) -> Result<usize> {
        let mut out = 0;
        // SAFETY: live; `out` is a valid place.
        check(unsafe { sys::di_session_context_length(self.raw.0, &mut out) })?;
        Ok(usize::try_from(out).unwrap_or(0))
    }

    /// The context's token ids.
    pub fn context_tokens(&self) -> Result<Vec<i32>> {
        ffi::read_vec(64, |buf, cap, out_len| {
            // SAFETY: live; the buffer holds `cap` ids.
            unsafe { sys::di_session_context_tokens(self.raw.0, buf, cap, out_len) }
        })
    }

    /// Empties the context (and the chat transcript) and releases the model state.
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: live.
        check(unsafe { sys::di_session_reset(self.raw.0) })
    }

    /// Whether the output of a cancelled generation joins the context: `false` (the default)
    /// drops it; `true` keeps the first completion's output up to the cancel (a chat's stop
    /// button).
    pub fn set_keep_cancelled_output(&mut self, keep: bool) -> Result<()> {
        // SAFETY: live.
        check(unsafe { sys::di_session_set_keep_cancelled_output(self.raw.0, i32::from(keep)) })
    }

    /// Starts generating from the context; the returned [`Stream`] yields the events, as an
    /// [`Iterator`] or with `.next().await`, and ends when the generation is over.
    ///
    /// The parameters are copied. In a chat session the assistant's prompt is added first.
    pub fn generate(&mut self, params: &SamplingParams) -> Result<Stream<'_>> {
        self.raw.generate(params)?;
        Ok(Stream::new(self))
    }

    /// A handle that cancels this session's running generation from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.raw.cancel_handle()
    }
}

/// Cancels the running generation of a session, from any thread and at any time: every
/// unfinished completion ends with [`FinishReason::Cancelled`](crate::FinishReason::Cancelled).
///
/// A `CancelHandle` is `Send + Sync + Clone` and may outlive its session: cancelling when nothing
/// runs does nothing, and once the session is dropped [`cancel`](CancelHandle::cancel) returns an
/// [`InvalidHandle`](crate::ErrorKind::InvalidHandle) error (session handles are never reused).
///
/// ```
/// use std::{thread, time::Duration};
/// use deepinfer::{FinishReason, SamplingParams};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
/// # let engine = deepinfer::Engine::builder().model(&model).build()?;
///
/// let mut session = engine.session()?;
/// session.add_text("class Parser:")?;
/// let cancel = session.cancel_handle();
/// let params = SamplingParams::builder().max_tokens(100_000).ignore_eos(true).build()?;
/// let stream = session.generate(&params)?;
/// thread::spawn(move || {
///     thread::sleep(Duration::from_millis(50));
///     cancel.cancel()
/// });
/// let done = stream.completions()?;
/// assert_eq!(done[0].finish_reason, Some(FinishReason::Cancelled));
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CancelHandle {
    // The session's handle value: an id that the library checks and never reuses, so it is safe
    // to keep after the session is freed.
    session: usize,
}

impl CancelHandle {
    /// Ends the session's running generation; no effect when nothing runs.
    pub fn cancel(&self) -> Result<()> {
        // SAFETY: di_session_cancel may be called from any thread at any time, with any handle
        // value: a freed session is reported as an invalid handle.
        check(unsafe { sys::di_session_cancel(self.session as *mut sys::di_session) })
    }
}
