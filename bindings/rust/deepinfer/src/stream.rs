//! The events of one generation, as a blocking iterator or awaited one by one.

use std::future::Future;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use deepinfer_sys as sys;

use crate::completion::{Collector, Completion};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::queue::Polled;
use crate::reactor::{self, Registration};
use crate::session::{CancelHandle, Session};

/// The events of a running generation ([`Session::generate`]), in order, until the generation is
/// over: [`Tokens`](crate::EventKind::Tokens) events with new output, one
/// [`Finished`](crate::EventKind::Finished) event per completion, and
/// [`PromptLogprobs`](crate::EventKind::PromptLogprobs) first when requested.
///
/// Read it in one of three ways:
/// * as an [`Iterator`] of `Result<Event>` (blocking);
/// * with `stream.next().await` (the inherent `async fn next`, which takes precedence over
///   `Iterator::next` in method calls) under any async runtime, or none: the future is woken
///   through the completion queue's file descriptor by a small background thread;
/// * by waiting on [`as_raw_fd`](AsRawFd::as_raw_fd) in your own event loop, then calling
///   [`try_next`](Stream::try_next) until it is `Pending`.
///
/// Dropping a stream before its end cancels the generation and waits until it has ended (the
/// engine ends it at its next step), so the session is ready for its next turn.
///
/// ```
/// use deepinfer::SamplingParams;
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
/// # let engine = deepinfer::Engine::builder().model(&model).build()?;
/// let mut session = engine.session()?;
/// session.add_text("import sys\n")?;
/// let params = SamplingParams::greedy(16)?;
///
/// // Any executor works: tokio, async-std, smol, or a hand-written one.
/// async fn collect(stream: &mut deepinfer::Stream<'_>) -> deepinfer::Result<String> {
///     let mut text = String::new();
///     while let Some(event) = stream.next().await {
///         text.push_str(event?.text());
///     }
///     Ok(text)
/// }
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Wake, Waker};
/// #     use std::sync::Arc;
/// #     struct Unpark(std::thread::Thread);
/// #     impl Wake for Unpark { fn wake(self: Arc<Self>) { self.0.unpark() } }
/// #     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
/// #     let mut f = Box::pin(f);
/// #     loop {
/// #         if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; }
/// #         std::thread::park();
/// #     }
/// # }
/// let text = block_on(collect(&mut session.generate(&params)?))?;
/// # let _ = text;
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub struct Stream<'s> {
    session: &'s mut Session,
    /// The generation is over (DONE was read) or polling failed.
    ended: bool,
    /// The waker waiting for the queue's fd, while a future waits.
    registration: Option<Registration>,
}

impl std::fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("fd", &self.as_raw_fd())
            .field("ended", &self.ended)
            .finish()
    }
}

impl<'s> Stream<'s> {
    pub(crate) fn new(session: &'s mut Session) -> Stream<'s> {
        Stream {
            session,
            ended: false,
            registration: None,
        }
    }

    /// Waits up to `timeout_ms` (-1: no limit, 0: no wait); `Pending` when nothing came.
    fn poll_queue(&mut self, timeout_ms: i32) -> Poll<Option<Result<Event>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            match self.session.queue().poll(timeout_ms) {
                Ok(Polled::Event(event, _)) => return Poll::Ready(Some(Ok(event))),
                Ok(Polled::Done) => {
                    self.ended = true;
                    return Poll::Ready(None);
                }
                Ok(Polled::Skipped) => continue,
                Ok(Polled::Empty) if timeout_ms < 0 => continue,
                Ok(Polled::Empty) => return Poll::Pending,
                Err(e) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    /// The next event if one is queued, without waiting: `Ready(None)` once the generation is
    /// over, `Pending` when no event is queued yet (wait for [`as_raw_fd`](AsRawFd::as_raw_fd)
    /// to become readable, then call it again).
    pub fn try_next(&mut self) -> Poll<Option<Result<Event>>> {
        self.poll_queue(0)
    }

    /// The next event, or arranges for `cx`'s waker to be woken when one is queued: the
    /// `poll_next` of a `futures::Stream`, for adapters.
    pub fn poll_next_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Event>>> {
        if let Poll::Ready(item) = self.try_next() {
            self.registration = None;
            return Poll::Ready(item);
        }
        let fd = self.as_raw_fd();
        if let Err(e) = reactor::register(&mut self.registration, fd, cx.waker()) {
            self.ended = true;
            return Poll::Ready(Some(Err(Error::new(
                sys::DI_ERR_INTERNAL,
                format!("cannot wait for events: {e}"),
            ))));
        }
        // An event that came between the first look and the registration would wake no one.
        match self.try_next() {
            Poll::Ready(item) => {
                self.registration = None;
                Poll::Ready(item)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The next event, awaited without blocking the thread; `None` once the generation is over.
    pub async fn next(&mut self) -> Option<Result<Event>> {
        NextEvent { stream: self }.await
    }

    /// A handle that cancels this generation from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.session.cancel_handle()
    }

    /// Cancels the generation: unfinished completions end with
    /// [`FinishReason::Cancelled`](crate::FinishReason::Cancelled) and the stream ends soon after.
    pub fn cancel(&self) -> Result<()> {
        self.cancel_handle().cancel()
    }

    /// Reads the stream to its end and returns each completion's output.
    pub fn completions(mut self) -> Result<Vec<Completion>> {
        let mut collector = Collector::default();
        for event in &mut self {
            collector.add(&event?);
        }
        Ok(collector.finish())
    }

    /// Reads the stream to its end and returns the first completion's text; the error of a
    /// completion that failed.
    pub fn text(self) -> Result<String> {
        let mut completions = self.completions()?;
        if completions.is_empty() {
            return Ok(String::new());
        }
        let first = completions.swap_remove(0);
        match first.error {
            Some(e) => Err(e),
            None => Ok(first.text),
        }
    }
}

impl Iterator for Stream<'_> {
    type Item = Result<Event>;

    /// Blocks until the next event; `None` once the generation is over.
    fn next(&mut self) -> Option<Result<Event>> {
        match self.poll_queue(-1) {
            Poll::Ready(item) => item,
            Poll::Pending => unreachable!("a poll without a time limit returned no event"),
        }
    }
}

impl AsRawFd for Stream<'_> {
    /// The completion queue's file descriptor: readable exactly while events are queued. It
    /// belongs to the stream's session: do not read, write or close it.
    fn as_raw_fd(&self) -> RawFd {
        self.session.queue().fd()
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        self.registration = None;
        if !self.ended {
            // Leave the session ready for its next generation: nothing running, no stale events.
            let _ = self.cancel();
            while let Poll::Ready(Some(Ok(_))) = self.poll_queue(-1) {}
        }
    }
}

/// The future of [`Stream::next`].
struct NextEvent<'a, 's> {
    stream: &'a mut Stream<'s>,
}

impl Future for NextEvent<'_, '_> {
    type Output = Option<Result<Event>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.stream.poll_next_event(cx)
    }
}
