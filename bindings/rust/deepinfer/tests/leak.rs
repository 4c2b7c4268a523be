//! Drop frees every handle: 1,000 create / generate / drop cycles leave the process's resident
//! memory where it was. A single test in its own binary, so no other test moves the RSS.

mod common;

use common::{new_engine, rss_bytes};
use deepinfer::{Engine, EventKind, Grammar, SamplingParams};

/// One cycle: every kind of object the crate owns is made, used and dropped.
fn cycle(engine: &Engine, i: usize) -> usize {
    let params = SamplingParams::builder()
        .temperature(0.0)
        .max_tokens(2)
        .logprobs(2)
        .stop("\n\n\n")
        .logit_bias(&[(5, 0.5)])
        .build()
        .unwrap();
    let digits = Grammar::regex(engine, "[0-9]+").unwrap();
    let constrained = params.to_builder().grammar(&digits).build().unwrap();
    let copy = constrained.clone();
    // Debug reads every getter, the grammar's as a new handle.
    assert!(format!("{constrained:?}").contains("grammar: true"));
    let mut session = engine.session().unwrap();
    session
        .add_text(if i % 2 == 0 { "def f(x):" } else { "value = " })
        .unwrap();
    let mut seen = 0;
    for event in session
        .generate(if i % 2 == 0 { &params } else { &copy })
        .unwrap()
    {
        let event = event.unwrap();
        seen += event.text().len() + event.tokens().len();
        if event.kind() == EventKind::Tokens {
            seen += event.logprobs().map_or(0, |l| l.len());
        }
    }
    let _ = session.cancel_handle();
    seen += engine.stats().unwrap().steps as usize % 2;
    seen
}

#[test]
fn a_thousand_cycles_do_not_grow_memory() {
    let engine = new_engine();
    for i in 0..100 {
        cycle(&engine, i);
    }
    let before = rss_bytes();
    let mut output = 0;
    for i in 0..1000 {
        output += cycle(&engine, i);
    }
    let after = rss_bytes();
    assert!(output > 0);
    let growth = after.saturating_sub(before);
    eprintln!(
        "RSS {} KiB -> {} KiB over 1000 cycles",
        before / 1024,
        after / 1024
    );
    // Measured on the demo model: no growth at all. Leaving out the free of one kind of handle
    // (events, or sampling parameters) grows it by 0.5 to 1 MiB.
    assert!(
        growth < 256 << 10,
        "RSS grew by {} KiB over 1000 cycles",
        growth / 1024
    );

    // Engines too: create, generate, drop.
    drop(engine);
    for i in 0..3 {
        cycle(&new_engine(), i);
    }
    let before = rss_bytes();
    for i in 0..10 {
        cycle(&new_engine(), i);
    }
    let growth = rss_bytes().saturating_sub(before);
    eprintln!("RSS grew by {} KiB over 10 engine cycles", growth / 1024);
    // A leaked engine holds its weights (37 MB on the demo model).
    assert!(
        growth < 4 << 20,
        "RSS grew by {} KiB over 10 engine cycles",
        growth / 1024
    );
}
