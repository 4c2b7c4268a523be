//! Shared by the integration tests: where the demo model and the CLI are, one engine per test
//! binary, a small JSON parser and a single-threaded executor (no crates are available).
#![allow(dead_code)] // each test binary uses its own part of this module

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use deepinfer::{Device, Engine};

/// The demo model: `DEEPINFER_MODEL`, else the repository's models/demo.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("DEEPINFER_MODEL") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo")),
    }
}

/// The `deepinfer` command: `DEEPINFER_CLI`, else `deepinfer` on the PATH.
pub fn cli() -> PathBuf {
    std::env::var_os("DEEPINFER_CLI").map_or_else(|| PathBuf::from("deepinfer"), PathBuf::from)
}

/// A new CPU engine on the demo model.
pub fn new_engine() -> Engine {
    Engine::builder()
        .model(model_dir())
        .device(Device::Cpu)
        .build()
        .unwrap_or_else(|e| {
            panic!(
                "cannot load the demo model at {} ({e}); set DEEPINFER_MODEL",
                model_dir().display()
            )
        })
}

static SHARED: Mutex<Option<Arc<Engine>>> = Mutex::new(None);

/// One engine shared by the tests of a binary (loading it once keeps the suite fast).
pub fn engine() -> Arc<Engine> {
    let mut slot = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    slot.get_or_insert_with(|| Arc::new(new_engine())).clone()
}

/// Resident set size of this process, in bytes (Linux).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

// ---------------------------------------------------------------------------------------------
// JSON: a strict parser (RFC 8259), enough to check that constrained output is valid JSON and to
// look at its structure.

#[derive(Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

pub fn parse_json(text: &str) -> Result<Json, String> {
    let mut p = JsonParser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing characters at {}", p.i));
    }
    Ok(v)
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at {}", c as char, self.i))
        }
    }
    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at {}", self.i))
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(format!("unexpected input at {}", self.i)),
        }
    }
    fn object(&mut self) -> Result<Json, String> {
        self.expect(b'{')?;
        let mut map = BTreeMap::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Json::Object(map));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            self.expect(b':')?;
            map.insert(key, self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Json::Object(map));
                }
                _ => return Err(format!("expected ',' or '}}' at {}", self.i)),
            }
        }
    }
    fn array(&mut self) -> Result<Json, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(format!("expected ',' or ']' at {}", self.i)),
            }
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let c = self.peek().ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let e = self.peek().ok_or("unterminated escape")?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = std::str::from_utf8(
                                self.s.get(self.i..self.i + 4).ok_or("short \\u")?,
                            )
                            .map_err(|e| e.to_string())?;
                            let code = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        _ => return Err(format!("bad escape at {}", self.i)),
                    }
                }
                0..=0x1f => return Err(format!("control character in string at {}", self.i)),
                _ => out.push(c),
            }
        }
    }
    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.i;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.i += 1;
            }
            p.i - s
        };
        let int_start = self.i;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(format!("bad number at {start}"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(format!("bad fraction at {start}"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(format!("bad exponent at {start}"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
        text.parse().map(Json::Number).map_err(|e| format!("{e}"))
    }
}

// ---------------------------------------------------------------------------------------------
// A single-threaded executor: tasks are polled on the calling thread only when their waker was
// called; the thread sleeps in the channel otherwise. It counts polls so a test can tell
// wake-ups driven by events from a busy loop.

struct TaskWaker {
    id: usize,
    ready: Mutex<Sender<usize>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        let _ = self.ready.lock().unwrap().send(self.id);
    }
}

/// A task of [`run_all`].
pub type Task<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Runs every future to completion on this thread; returns their outputs and the number of polls.
pub fn run_all<T>(futures: Vec<Task<'_, T>>) -> (Vec<T>, usize) {
    let (tx, rx) = channel();
    let mut tasks: Vec<Option<Task<'_, T>>> = futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = tasks.iter().map(|_| None).collect();
    let wakers: Vec<Waker> = (0..tasks.len())
        .map(|id| {
            Waker::from(Arc::new(TaskWaker {
                id,
                ready: Mutex::new(tx.clone()),
            }))
        })
        .collect();
    for id in 0..tasks.len() {
        tx.send(id).unwrap();
    }
    let (mut left, mut polls) = (tasks.len(), 0);
    while left > 0 {
        let id = rx.recv().unwrap();
        let task = match tasks[id].as_mut() {
            Some(task) => task,
            None => continue, // woken again after it finished
        };
        polls += 1;
        if let Poll::Ready(v) = task.as_mut().poll(&mut Context::from_waker(&wakers[id])) {
            outputs[id] = Some(v);
            tasks[id] = None;
            left -= 1;
        }
    }
    (outputs.into_iter().map(Option::unwrap).collect(), polls)
}
