//! A multi-turn chat: each line read from stdin is a user message, and the reply streams to
//! stdout. The session keeps the conversation, so each turn only processes its new tokens.
//!
//! Usage: cargo run --example chat -- [MODEL_DIR] [SYSTEM_PROMPT] < questions.txt
//! (MODEL_DIR defaults to $DEEPINFER_MODEL.)

use std::io::{BufRead, Write};

use deepinfer::{Engine, EventKind, Role};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .or_else(|| std::env::var("DEEPINFER_MODEL").ok())
        .ok_or("give a model directory (or set DEEPINFER_MODEL)")?;
    let system = args
        .next()
        .unwrap_or_else(|| "You are a helpful assistant.".to_string());

    let engine = Engine::builder().model(&model).build()?;
    // The model's own defaults (generation_config.json), with a seed so a run can be repeated.
    let params = engine
        .sampling_defaults()?
        .to_builder()
        .max_tokens(64)
        .seed(1)
        .build()?;
    let mut chat = engine.session()?;
    chat.add_message(Role::System, &system)?;

    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        writeln!(out, "> {line}")?;
        chat.add_message(Role::User, &line)?;
        for event in chat.generate(&params)? {
            let event = event?;
            match event.kind() {
                EventKind::Tokens => {
                    write!(out, "{}", event.text())?;
                    out.flush()?;
                }
                EventKind::Finished => {
                    let usage = event.usage().unwrap_or_default();
                    writeln!(
                        out,
                        "\n[{:?}; {} new prompt tokens, {} reused, {} generated]",
                        event
                            .finish_reason()
                            .expect("a finished event has a reason"),
                        usage.prompt_tokens - usage.cached_tokens,
                        usage.cached_tokens,
                        usage.completion_tokens
                    )?;
                }
                _ => {}
            }
        }
    }
    eprintln!("context: {} tokens", chat.context_len()?);
    Ok(())
}
