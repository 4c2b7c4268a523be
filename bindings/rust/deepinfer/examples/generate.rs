//! Generates text from a prompt and streams it to stdout.
//!
//! Usage: cargo run --example generate -- [MODEL_DIR] [PROMPT]
//! (MODEL_DIR defaults to $DEEPINFER_MODEL, PROMPT to "def fibonacci(n):").

use std::io::Write;
use std::time::Instant;

use deepinfer::{Engine, EventKind, SamplingParams};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .or_else(|| std::env::var("DEEPINFER_MODEL").ok())
        .ok_or("give a model directory (or set DEEPINFER_MODEL)")?;
    let prompt = args
        .next()
        .unwrap_or_else(|| "def fibonacci(n):".to_string());

    let start = Instant::now();
    let engine = Engine::builder().model(&model).build()?;
    let info = engine.model_info()?;
    eprintln!(
        "deepinfer {}: {} layers, {} parameters ({}) on {:?}, loaded in {:.2} s",
        deepinfer::version(),
        info.layers,
        info.parameters,
        info.weight_dtype,
        engine.device()?,
        start.elapsed().as_secs_f64()
    );

    let mut session = engine.session()?;
    session.add_text(&prompt)?;
    let params = SamplingParams::builder()
        .temperature(0.0)
        .max_tokens(48)
        .build()?;

    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    write!(out, "{prompt}")?;
    for event in session.generate(&params)? {
        let event = event?;
        match event.kind() {
            EventKind::Tokens => {
                write!(out, "{}", event.text())?;
                out.flush()?;
            }
            EventKind::Finished => {
                let usage = event.usage().unwrap_or_default();
                writeln!(out)?;
                eprintln!(
                    "[{:?}: {} prompt + {} generated tokens in {:.2} s, seed {}]",
                    event
                        .finish_reason()
                        .expect("a finished event has a reason"),
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    start.elapsed().as_secs_f64(),
                    event.seed().unwrap_or_default()
                );
            }
            _ => {}
        }
    }
    Ok(())
}
