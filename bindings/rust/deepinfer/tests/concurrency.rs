//! Threads, cancellation and async: one engine shared by many threads, cancel handles, 32 async
//! streams on one thread under a hand-written executor, and the file descriptor for event loops.

mod common;

use std::future::Future;
use std::os::raw::{c_int, c_short, c_ulong};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use common::{engine, new_engine, run_all, Task};
use deepinfer::{
    CancelHandle, Completion, Engine, ErrorKind, Event, EventKind, FinishReason, Grammar,
    SamplingParams, Session, Stream, Tokenizer,
};

const PROMPTS: [&str; 8] = [
    "import os",
    "def main():",
    "class Stack:",
    "for i in range(",
    "with open(",
    "from typing import",
    "async def fetch(",
    "try:\n    ",
];

fn greedy(engine: &Engine, prompt: &str, max_tokens: u32) -> Vec<i32> {
    let mut session = engine.session().unwrap();
    session.add_text(prompt).unwrap();
    let params = SamplingParams::greedy(max_tokens).unwrap();
    session
        .generate(&params)
        .unwrap()
        .completions()
        .unwrap()
        .remove(0)
        .tokens
}

#[test]
fn types_are_send_and_sync_as_documented() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Engine>();
    send_sync::<SamplingParams>();
    send_sync::<Grammar>();
    send_sync::<Tokenizer>();
    send_sync::<Event>();
    send_sync::<CancelHandle>();
    send_sync::<deepinfer::Error>();
    send::<Session>();
    send::<Stream<'static>>();
    send::<deepinfer::Matcher>();
    // The future of Stream::next can move to a multi-threaded runtime's worker.
    fn future_is_send<'a>(stream: &'a mut Stream<'static>) -> impl Future + Send + 'a {
        stream.next()
    }
    let _ = future_is_send;
}

#[test]
fn an_engine_shared_by_8_threads() {
    let engine = engine();
    let alone: Vec<Vec<i32>> = PROMPTS.iter().map(|p| greedy(&engine, p, 12)).collect();
    let together: Vec<Vec<i32>> = thread::scope(|s| {
        let mut threads = Vec::new();
        for prompt in PROMPTS {
            let engine = &engine;
            threads.push(s.spawn(move || greedy(engine, prompt, 12)));
        }
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(together, alone);
}

#[test]
fn cancel_from_another_thread() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("def loop():").unwrap();
    let context = session.context_len().unwrap();
    let cancel = session.cancel_handle();
    let params = SamplingParams::builder()
        .max_tokens(100_000)
        .ignore_eos(true)
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let canceller = thread::spawn(move || {
        while !flag.load(Ordering::Acquire) {
            thread::sleep(Duration::from_millis(1));
        }
        cancel.cancel()
    });
    let mut tokens = 0;
    let mut reason = None;
    for event in session.generate(&params).unwrap() {
        let event = event.unwrap();
        tokens += event.tokens().len();
        started.store(true, Ordering::Release);
        if event.kind() == EventKind::Finished {
            reason = event.finish_reason();
        }
    }
    canceller.join().unwrap().unwrap();
    assert_eq!(reason, Some(FinishReason::Cancelled));
    assert!(tokens < 100_000);
    // The cancelled output did not join the context, and the session generates again.
    assert_eq!(session.context_len().unwrap(), context);
    assert_eq!(greedy(&engine, "def loop():", 4).len(), 4);
}

#[test]
fn a_cancel_handle_outlives_its_session() {
    let engine = engine();
    let session = engine.session().unwrap();
    let handle = session.cancel_handle();
    handle.cancel().unwrap(); // nothing runs: no effect
    drop(session);
    let copy = handle.clone();
    for h in [handle, copy] {
        assert_eq!(h.cancel().unwrap_err().kind(), ErrorKind::InvalidHandle);
    }
}

#[test]
fn dropping_a_stream_cancels_its_generation() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("x = [").unwrap();
    let params = SamplingParams::builder()
        .max_tokens(100_000)
        .ignore_eos(true)
        .build()
        .unwrap();
    let mut stream = session.generate(&params).unwrap();
    Iterator::next(&mut stream).unwrap().unwrap();
    drop(stream);
    // Nothing is left running or queued: the next turn starts at once and reads only its own events.
    let out = session
        .generate(&SamplingParams::greedy(3).unwrap())
        .unwrap()
        .completions()
        .unwrap();
    assert_eq!((out.len(), out[0].tokens.len()), (1, 3));
}

#[test]
fn async_next_drives_32_streams_on_one_thread() {
    let engine = engine();
    let alone: Vec<Vec<i32>> = PROMPTS.iter().map(|p| greedy(&engine, p, 10)).collect();
    let params = SamplingParams::greedy(10).unwrap();
    let mut sessions: Vec<Session> = (0..32)
        .map(|i| {
            let mut s = engine.session().unwrap();
            s.add_text(PROMPTS[i % PROMPTS.len()]).unwrap();
            s
        })
        .collect();
    let tasks: Vec<Task<'_, (Vec<i32>, usize)>> = sessions
        .iter_mut()
        .map(|session| {
            let params = &params;
            Box::pin(async move {
                let mut stream = session.generate(params).unwrap();
                let (mut ids, mut events) = (Vec::new(), 0usize);
                while let Some(event) = stream.next().await {
                    let event = event.unwrap();
                    ids.extend_from_slice(event.tokens());
                    events += 1;
                }
                (ids, events)
            }) as Task<'_, _>
        })
        .collect();
    let (outputs, polls) = run_all(tasks);
    let mut events = 0;
    for (i, (ids, n)) in outputs.iter().enumerate() {
        assert_eq!(ids, &alone[i % PROMPTS.len()], "stream {i}");
        events += n;
    }
    eprintln!("32 async streams: {events} events in {polls} polls");
    // Tasks run only when the queue's fd woke them: about one poll per event, never a busy loop;
    // more polls than tasks shows they waited.
    assert!(
        polls > 32,
        "every stream was ready at its first poll: the wait was not exercised"
    );
    assert!(
        polls <= 2 * (events + 32),
        "{polls} polls for {events} events"
    );
}

extern "C" {
    fn poll(fds: *mut PollFd, nfds: c_ulong, timeout: c_int) -> c_int;
}

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: c_short,
    revents: c_short,
}

#[test]
fn the_queue_fd_drives_a_hand_made_event_loop() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("print(").unwrap();
    let params = SamplingParams::greedy(8).unwrap();
    let mut stream = session.generate(&params).unwrap();
    let mut fd = PollFd {
        fd: stream.as_raw_fd(),
        events: 1,
        revents: 0,
    };
    let mut ids = Vec::new();
    loop {
        match stream.try_next() {
            Poll::Ready(Some(event)) => ids.extend_from_slice(event.unwrap().tokens()),
            Poll::Ready(None) => break,
            Poll::Pending => {
                // SAFETY: one valid pollfd.
                let n = unsafe { poll(&mut fd, 1, 10_000) };
                assert_eq!(n, 1, "the fd did not become readable");
            }
        }
    }
    assert_eq!(ids, greedy(&engine, "print(", 8));
    // Drained: the fd is readable exactly while events are queued.
    // SAFETY: as above.
    assert_eq!(unsafe { poll(&mut fd, 1, 0) }, 0);
}

#[test]
fn dropping_the_engine_ends_running_streams_and_closes_sessions() {
    let engine = Arc::new(new_engine());
    let mut session = engine.session().unwrap();
    session.add_text("while True:").unwrap();
    let params = SamplingParams::builder()
        .max_tokens(100_000)
        .ignore_eos(true)
        .build()
        .unwrap();
    let mut stream = session.generate(&params).unwrap();
    Iterator::next(&mut stream).unwrap().unwrap();
    let owner = engine.clone();
    drop(engine);
    thread::spawn(move || drop(owner)).join().unwrap();
    let rest: Vec<Completion> = stream.completions().unwrap();
    assert_eq!(rest[0].finish_reason, Some(FinishReason::Cancelled));
    let err = session.generate(&params).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
}
