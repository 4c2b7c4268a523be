//! Every error path gives the right kind and exactly the library's message: each case is also
//! run through the raw C ABI (deepinfer-sys) and the two messages compared.

mod common;

use std::ffi::CStr;
use std::ops::ControlFlow;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use common::{engine, model_dir, new_engine};
use deepinfer::{
    Device, Engine, Error, ErrorKind, Grammar, GrammarKind, GrammarOptions, Role, SamplingParams,
    Tokenizer,
};
use deepinfer_sys as sys;

/// Code and message of a raw call's error (it must fail).
fn raw_error(err: *mut sys::di_error) -> (i32, String) {
    assert!(!err.is_null(), "the raw call succeeded");
    // SAFETY: a non-null error the caller owns.
    unsafe {
        let out = (
            sys::di_error_code(err),
            CStr::from_ptr(sys::di_error_message(err))
                .to_string_lossy()
                .into_owned(),
        );
        sys::di_error_free(err);
        out
    }
}

fn assert_same(err: &Error, kind: ErrorKind, raw: (i32, String)) {
    assert_eq!(err.kind(), kind, "{err}");
    assert_eq!((err.code(), err.message()), (raw.0, raw.1.as_str()));
    assert!(!err.message().is_empty());
    // Display: the code's name, then the library's message.
    let name = unsafe { CStr::from_ptr(sys::di_code_name(err.code())) }
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(err.to_string(), format!("{name}: {}", err.message()));
}

fn text(s: &str) -> (*const c_char, usize) {
    (s.as_ptr().cast(), s.len())
}

#[test]
fn a_missing_model_directory_is_not_found() {
    let dir = "/nonexistent/deepinfer-model";
    let err = Engine::builder()
        .model(dir)
        .device(Device::Cpu)
        .build()
        .unwrap_err();
    let raw = unsafe {
        let mut cfg = std::ptr::null_mut();
        assert!(sys::di_engine_config_create(&mut cfg).is_null());
        let (p, l) = text(dir);
        assert!(sys::di_engine_config_set_model_path(cfg, p, l).is_null());
        assert!(sys::di_engine_config_set_device(cfg, sys::DI_DEVICE_CPU).is_null());
        let mut engine = std::ptr::null_mut();
        let raw = raw_error(sys::di_engine_create(cfg, &mut engine));
        sys::di_engine_config_free(cfg);
        raw
    };
    assert_same(&err, ErrorKind::NotFound, raw);
    assert!(err.message().contains(dir), "{err}");
}

#[test]
fn bad_engine_settings_name_the_setting() {
    let err = Engine::builder()
        .model(model_dir())
        .option("no_such_option", "1")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("no_such_option"), "{err}");
    let err = Engine::builder()
        .model(model_dir())
        .state_memory_fraction(1.5)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        Engine::builder().build().is_err(),
        "an engine without a model"
    );
}

#[test]
fn bad_sampling_values_are_invalid_arguments_naming_the_field() {
    type Set = fn(deepinfer::SamplingParamsBuilder) -> deepinfer::SamplingParamsBuilder;
    type RawSet = unsafe fn(*mut sys::di_sampling) -> *mut sys::di_error;
    let cases: [(&str, Set, RawSet); 8] = [
        (
            "temperature",
            |b| b.temperature(-1.0),
            |p| unsafe { sys::di_sampling_set_temperature(p, -1.0) },
        ),
        (
            "top_p",
            |b| b.top_p(0.0),
            |p| unsafe { sys::di_sampling_set_top_p(p, 0.0) },
        ),
        (
            "top_k",
            |b| b.top_k(-2),
            |p| unsafe { sys::di_sampling_set_top_k(p, -2) },
        ),
        (
            "max_tokens",
            |b| b.max_tokens(0),
            |p| unsafe { sys::di_sampling_set_max_tokens(p, 0) },
        ),
        ("n", |b| b.n(0), |p| unsafe { sys::di_sampling_set_n(p, 0) }),
        (
            "logprobs",
            |b| b.logprobs(21),
            |p| unsafe { sys::di_sampling_set_logprobs(p, 21) },
        ),
        (
            "presence_penalty",
            |b| b.presence_penalty(3.0),
            |p| unsafe { sys::di_sampling_set_presence_penalty(p, 3.0) },
        ),
        (
            "stop",
            |b| b.stop(""),
            |p| unsafe { sys::di_sampling_add_stop_string(p, "".as_ptr().cast(), 0) },
        ),
    ];
    for (field, set, raw_set) in cases {
        // A later good value does not hide the first error.
        let err = set(SamplingParams::builder())
            .max_tokens(5)
            .build()
            .unwrap_err();
        let raw = unsafe {
            let mut sp = std::ptr::null_mut();
            assert!(sys::di_sampling_create(&mut sp).is_null());
            let raw = raw_error(raw_set(sp));
            sys::di_sampling_free(sp);
            raw
        };
        assert_same(&err, ErrorKind::InvalidArgument, raw);
        let name = if field == "stop" { "stop" } else { field };
        assert!(err.message().contains(name), "{field}: {err}");
    }
}

#[test]
fn bad_grammars_are_grammar_errors() {
    let engine = engine();
    let cases = [
        (GrammarKind::Regex, "a(b", sys::DI_GRAMMAR_REGEX),
        (
            GrammarKind::JsonSchema,
            "{\"type\": ",
            sys::DI_GRAMMAR_JSON_SCHEMA,
        ),
        (
            GrammarKind::JsonSchema,
            r#"{"type": "string", "format": "idn-email"}"#,
            sys::DI_GRAMMAR_JSON_SCHEMA,
        ),
        (
            GrammarKind::Ebnf,
            "root ::= missing_rule",
            sys::DI_GRAMMAR_EBNF,
        ),
    ];
    for (kind, spec, raw_kind) in cases {
        let err = Grammar::compile(&engine, kind, spec, GrammarOptions::new()).unwrap_err();
        // The library's own verdict on the spec, through the raw ABI.
        let raw = unsafe {
            let (p, l) = text(spec);
            raw_error(sys::di_grammar_validate(raw_kind, p, l, 0, 0))
        };
        assert_same(&err, ErrorKind::Grammar, raw.clone());
        assert_same(
            &Grammar::validate(kind, spec, GrammarOptions::new()).unwrap_err(),
            ErrorKind::Grammar,
            raw,
        );
    }
    assert_eq!(
        Grammar::json_schema(&engine, "[").unwrap_err().kind(),
        ErrorKind::Grammar
    );
    assert_eq!(
        Grammar::regex(&engine, "(").unwrap_err().kind(),
        ErrorKind::Grammar
    );
    assert_eq!(
        Grammar::ebnf(&engine, "root ::= \"").unwrap_err().kind(),
        ErrorKind::Grammar
    );
}

#[test]
fn sessions_of_a_dropped_engine_are_closed() {
    let engine = new_engine();
    let mut session = engine.session().unwrap();
    session.add_text("x = 1").unwrap();
    let tokenizer = engine.tokenizer().unwrap();
    let params = SamplingParams::greedy(4).unwrap();
    drop(engine);
    let closed = [
        session.add_text("more").unwrap_err(),
        session.generate(&params).unwrap_err(),
        session.context_len().unwrap_err(),
        session.reset().unwrap_err(),
    ];
    for err in &closed {
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        assert!(!err.message().is_empty());
    }
    // Objects that do not need the engine keep working.
    assert_eq!(
        tokenizer
            .decode(&tokenizer.encode("still here", false).unwrap(), false)
            .unwrap(),
        "still here"
    );
    assert_eq!(params.max_tokens(), 4);
}

#[test]
fn misuse_of_a_session_is_reported() {
    let engine = engine();
    let vocab = engine.vocab_size().unwrap() as i32;
    let mut session = engine.session().unwrap();
    let err = session.add_tokens(&[1, vocab + 5]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains(&(vocab + 5).to_string()), "{err}");
    session.add_text("plain").unwrap();
    let err = session.add_message(Role::User, "chat").unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::State | ErrorKind::InvalidArgument),
        "{err}"
    );
    assert_eq!(
        engine.detokenize(&[vocab], false).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn tokenizer_and_load_failures() {
    let err = Tokenizer::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Io),
        "{err}"
    );
    assert!(
        err.message().contains("/nonexistent/tokenizer.json"),
        "{err}"
    );

    // A load aborted by its progress callback.
    let err = Engine::builder()
        .model(model_dir())
        .progress(|_, _| ControlFlow::Break(()))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
}

#[test]
fn a_panic_in_the_progress_callback_does_not_cross_into_c() {
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        Engine::builder()
            .model(model_dir())
            .progress(move |_, _| {
                *seen.lock().unwrap() += 1;
                panic!("progress callback panicked");
            })
            .build()
    }));
    let payload = outcome.expect_err("the panic is resumed by build()");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"progress callback panicked")
    );
    assert_eq!(
        *calls.lock().unwrap(),
        1,
        "the load stopped at the first call"
    );
}

#[test]
fn a_panic_in_the_log_callback_is_contained() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    deepinfer::set_log_level(deepinfer::LogLevel::Info).unwrap();
    deepinfer::set_log_callback(move |level, message| {
        sink.lock().unwrap().push((level, message.to_string()));
        assert!(
            deepinfer::clear_log_callback().is_err(),
            "re-entry must be refused"
        );
        panic!("log callback panicked");
    })
    .unwrap();
    let engine = new_engine(); // logs its loading at the info level
    deepinfer::clear_log_callback().unwrap();
    deepinfer::set_log_level(deepinfer::LogLevel::Warn).unwrap();
    drop(engine);
    let lines = lines.lock().unwrap();
    assert!(!lines.is_empty(), "no log line came");
    assert!(lines.iter().all(|(_, m)| !m.is_empty()));
}

#[test]
fn kinds_cover_every_code() {
    let codes = [
        (sys::DI_ERR_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
        (sys::DI_ERR_NOT_FOUND, ErrorKind::NotFound),
        (sys::DI_ERR_MODEL_FORMAT, ErrorKind::ModelFormat),
        (sys::DI_ERR_UNSUPPORTED, ErrorKind::Unsupported),
        (sys::DI_ERR_OUT_OF_MEMORY, ErrorKind::OutOfMemory),
        (sys::DI_ERR_CAPACITY, ErrorKind::Capacity),
        (sys::DI_ERR_BUFFER_TOO_SMALL, ErrorKind::BufferTooSmall),
        (sys::DI_ERR_CANCELLED, ErrorKind::Cancelled),
        (sys::DI_ERR_GRAMMAR, ErrorKind::Grammar),
        (sys::DI_ERR_IO, ErrorKind::Io),
        (sys::DI_ERR_BACKEND, ErrorKind::Backend),
        (sys::DI_ERR_STATE, ErrorKind::State),
        (sys::DI_ERR_TIMEOUT, ErrorKind::Timeout),
        (sys::DI_ERR_CLOSED, ErrorKind::Closed),
        (sys::DI_ERR_INVALID_HANDLE, ErrorKind::InvalidHandle),
        (sys::DI_ERR_INTERNAL, ErrorKind::Internal),
        (16, ErrorKind::Unknown),
        (-1, ErrorKind::Unknown),
    ];
    for (code, kind) in codes {
        assert_eq!(ErrorKind::from_code(code), kind, "code {code}");
    }
    fn error_trait<E: std::error::Error + Send + Sync + 'static>() {}
    error_trait::<Error>();
}
