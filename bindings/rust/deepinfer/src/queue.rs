//! Completion queues: where sessions deliver their events, with a file descriptor to wait on.

use std::os::unix::io::RawFd;

use deepinfer_sys as sys;

use crate::error::{check, Result};
use crate::event::{Event, EventKind};
use crate::ffi;

/// What one poll of a queue gave.
pub(crate) enum Polled {
    /// An event of a kind this crate knows, with its session's tag.
    Event(Event, u64),
    /// A DONE event: the generation of the session it came from is over.
    Done,
    /// An event of a kind newer than this crate (skipped, as the ABI asks).
    Skipped,
    /// No event within the time given.
    Empty,
}

/// An owned `di_queue` and its file descriptor (readable exactly while events are queued).
#[derive(Debug)]
pub(crate) struct Queue {
    raw: *mut sys::di_queue,
    fd: RawFd,
}

// SAFETY: di_queue is thread-safe (deepinfer.h, Threading).
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: owned; frees the events still queued. Sessions attached to it go back to polling.
        unsafe { sys::di_queue_free(self.raw) }
    }
}

impl Queue {
    pub(crate) fn new() -> Result<Queue> {
        // SAFETY: `out` is written on success only.
        let raw = ffi::create(|out| unsafe { sys::di_queue_create(out) })?;
        let mut queue = Queue { raw, fd: -1 };
        // SAFETY: live; `fd` is a valid place. On failure `queue` is dropped, freeing the queue.
        check(unsafe { sys::di_queue_fd(queue.raw, &mut queue.fd) })?;
        Ok(queue)
    }

    pub(crate) fn raw(&self) -> *mut sys::di_queue {
        self.raw
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    /// Waits up to `timeout_ms` (-1: no limit, 0: no wait) for the next event.
    pub(crate) fn poll(&self, timeout_ms: i32) -> Result<Polled> {
        let (mut raw, mut tag) = (std::ptr::null_mut(), 0u64);
        // SAFETY: live; outputs are valid places; the event (if any) becomes ours.
        check(unsafe { sys::di_queue_poll(self.raw, timeout_ms, &mut raw, &mut tag) })?;
        if raw.is_null() {
            return Ok(Polled::Empty);
        }
        let mut kind = 0;
        // SAFETY: `raw` is a live event we own.
        let read = check(unsafe { sys::di_event_kind(raw, &mut kind) });
        match (read, EventKind::from_raw(kind)) {
            (Ok(()), Some(known)) => Ok(Polled::Event(Event::new(raw, known), tag)),
            (result, _) => {
                // SAFETY: owned and not passed on.
                unsafe { sys::di_event_free(raw) };
                result?;
                Ok(if kind == sys::DI_EVENT_DONE {
                    Polled::Done
                } else {
                    Polled::Skipped
                })
            }
        }
    }
}
