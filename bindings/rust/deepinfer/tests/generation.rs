//! Generation through the safe API against the `deepinfer` command, and the API's own promises:
//! seeds repeat, streamed text adds up, grammars hold, logprobs and batches are consistent.

mod common;

use std::process::Command;

use common::{cli, engine, model_dir, parse_json, Json};
use deepinfer::{
    Completion, Engine, EventKind, FinishReason, Grammar, GrammarKind, GrammarOptions, Role,
    SamplingParams, Session,
};

/// The CLI's output for a prompt: (text, token ids), from its text mode and its JSON mode.
fn cli_generate(prompt: &str, extra: &[&str]) -> (String, Vec<i32>) {
    let run = |json: bool| {
        let mut cmd = Command::new(cli());
        cmd.arg("generate").arg("--model").arg(model_dir()).args([
            "--device",
            "cpu",
            "--prompt",
            prompt,
            "--no-echo",
        ]);
        cmd.args(extra);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}); set DEEPINFER_CLI to the deepinfer command",
                cli().display()
            )
        });
        assert!(
            out.status.success(),
            "deepinfer generate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let mut text = run(false);
    assert_eq!(
        text.pop(),
        Some('\n'),
        "the CLI ends its output with a newline"
    );
    let mut ids = Vec::new();
    for line in run(true).lines() {
        let event = match parse_json(line).unwrap_or_else(|e| panic!("{e}: {line}")) {
            Json::Object(event) => event,
            other => panic!("not an object: {other:?}"),
        };
        if let Some(Json::Array(tokens)) = event.get("tokens") {
            ids.extend(tokens.iter().map(|t| match t {
                Json::Number(n) => *n as i32,
                other => panic!("token {other:?}"),
            }));
        }
    }
    (text, ids)
}

fn generate(engine: &Engine, prompt: &str, params: &SamplingParams) -> Completion {
    let mut session = engine.session().unwrap();
    session.add_text(prompt).unwrap();
    let mut completions = session.generate(params).unwrap().completions().unwrap();
    assert_eq!(completions.len(), 1);
    completions.remove(0)
}

/// The CLI starts from the model's sampling defaults, then applies its flags.
fn cli_like(engine: &Engine) -> deepinfer::SamplingParamsBuilder {
    engine.sampling_defaults().unwrap().to_builder()
}

#[test]
fn greedy_output_equals_the_cli() {
    let engine = engine();
    for prompt in ["def add(a, b):", "import os\nimport sys\n\n"] {
        let params = cli_like(&engine)
            .temperature(0.0)
            .max_tokens(32)
            .build()
            .unwrap();
        let ours = generate(&engine, prompt, &params);
        let (text, ids) = cli_generate(prompt, &["--temperature", "0", "--max-tokens", "32"]);
        assert_eq!(ours.text, text, "prompt {prompt:?}");
        assert_eq!(ours.tokens, ids, "prompt {prompt:?}");
        assert_eq!(ours.tokens.len(), 32);
        assert_eq!(ours.finish_reason, Some(FinishReason::Length));
    }
}

#[test]
fn seeded_sampling_repeats_and_equals_the_cli() {
    let engine = engine();
    let seeded = |seed: u64| cli_like(&engine).max_tokens(24).seed(seed).build().unwrap();
    let first = generate(&engine, "class Config:", &seeded(42));
    let again = generate(&engine, "class Config:", &seeded(42));
    let other = generate(&engine, "class Config:", &seeded(43));
    assert_eq!(first.tokens, again.tokens);
    assert_ne!(
        first.tokens, other.tokens,
        "seeds 42 and 43 sampled the same 24 tokens"
    );
    assert_eq!(first.seed, Some(42));
    let (text, ids) = cli_generate("class Config:", &["--max-tokens", "24", "--seed", "42"]);
    assert_eq!(
        (first.text.as_str(), first.tokens.as_slice()),
        (text.as_str(), ids.as_slice())
    );

    // Without a seed the engine draws one, and reports it so the output can be replayed.
    let drawn = generate(
        &engine,
        "class Config:",
        &cli_like(&engine).max_tokens(24).build().unwrap(),
    );
    let replay = generate(
        &engine,
        "class Config:",
        &seeded(drawn.seed.expect("a finished completion reports its seed")),
    );
    assert_eq!(drawn.tokens, replay.tokens);
}

#[test]
fn first_completion_replays_one_completion_of_many() {
    let engine = engine();
    let many = SamplingParams::builder()
        .n(3)
        .seed(7)
        .max_tokens(12)
        .build()
        .unwrap();
    let mut session = engine.session().unwrap();
    session.add_text("def main():").unwrap();
    let all = session.generate(&many).unwrap().completions().unwrap();
    assert_eq!(all.len(), 3);
    let one = SamplingParams::builder()
        .seed(7)
        .max_tokens(12)
        .first_completion(2)
        .build()
        .unwrap();
    assert_eq!(generate(&engine, "def main():", &one).tokens, all[2].tokens);
}

#[test]
fn streamed_text_concatenates_to_the_full_output() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("for line in open(").unwrap();
    let params = SamplingParams::builder()
        .temperature(0.0)
        .max_tokens(40)
        .stop("\n\n")
        .build()
        .unwrap();
    let (mut text, mut ids, mut pieces, mut finished) = (String::new(), Vec::new(), 0, 0);
    for event in session.generate(&params).unwrap() {
        let event = event.unwrap();
        match event.kind() {
            EventKind::Tokens => {
                text.push_str(event.text());
                ids.extend_from_slice(event.tokens());
                pieces += 1;
            }
            EventKind::Finished => {
                finished += 1;
                let usage = event.usage().unwrap();
                assert_eq!(usage.completion_tokens as usize, ids.len());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(finished, 1);
    assert!(pieces > 1, "the output came in one piece");
    let full = generate(&engine, "for line in open(", &params);
    assert_eq!(text, full.text);
    assert_eq!(ids, full.tokens);
    // The text of the ids is the streamed text, up to a held-back stop string.
    let decoded = engine.detokenize(&ids, true).unwrap();
    assert!(decoded.starts_with(&text), "{decoded:?} vs {text:?}");
}

#[test]
fn the_context_grows_with_each_turn() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("x = 1\n").unwrap();
    let before = session.context_len().unwrap();
    let out = session
        .generate(&SamplingParams::greedy(5).unwrap())
        .unwrap()
        .completions()
        .unwrap();
    let after = session.context_tokens().unwrap();
    assert_eq!(after.len(), before + out[0].tokens.len());
    assert_eq!(&after[before..], out[0].tokens.as_slice());
    session.reset().unwrap();
    assert_eq!(session.context_len().unwrap(), 0);
}

#[test]
fn chat_turns_continue_the_conversation() {
    let engine = engine();
    let mut chat = engine.session().unwrap();
    chat.add_message(Role::System, "You write Python.").unwrap();
    chat.add_message(Role::User, "A function that adds two numbers.")
        .unwrap();
    let params = SamplingParams::greedy(12).unwrap();
    let first = chat
        .generate(&params)
        .unwrap()
        .completions()
        .unwrap()
        .remove(0);
    let len = chat.context_len().unwrap();
    chat.add_message(Role::User, "Now subtract.").unwrap();
    assert!(chat.context_len().unwrap() > len);
    let second = chat
        .generate(&params)
        .unwrap()
        .completions()
        .unwrap()
        .remove(0);
    assert_eq!((first.tokens.len(), second.tokens.len()), (12, 12));
    chat.add_tool_call("add", r#"{"a": 1, "b": 2}"#).unwrap();
    // A chat session takes no raw text.
    assert!(chat.add_text("raw").is_err());
}

#[test]
fn generate_batch_matches_one_session_per_prompt() {
    let engine = engine();
    let prompts = [
        "import json",
        "def parse(text):",
        "class Node:",
        "for i in range(10):",
    ];
    let params = SamplingParams::greedy(16).unwrap();
    let batch = engine.generate_batch(prompts, &params).unwrap();
    assert_eq!(batch.len(), prompts.len());
    for (prompt, completions) in prompts.iter().zip(&batch) {
        assert_eq!(completions.len(), 1);
        let mut alone = generate(&engine, prompt, &params);
        // Each generation draws its own seed; greedy output does not depend on it.
        alone.seed = completions[0].seed;
        assert_eq!(completions[0], alone, "prompt {prompt:?}");
    }
    let two = SamplingParams::builder()
        .n(2)
        .seed(3)
        .max_tokens(6)
        .build()
        .unwrap();
    let batch = engine
        .generate_batch(vec!["a".to_string(), "b".to_string()], &two)
        .unwrap();
    assert!(batch
        .iter()
        .all(|c| c.len() == 2 && c.iter().all(|c| c.tokens.len() == 6)));
    assert!(engine
        .generate_batch(Vec::<&str>::new(), &params)
        .unwrap()
        .is_empty());
}

#[test]
fn json_schema_output_is_valid_json() {
    let engine = engine();
    let schema = r#"{
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": false
    }"#;
    // Every part is bounded (strings may still take escapes), so any allowed output ends within
    // max_tokens. A small model fills unbounded whitespace runs: bound them (or allow none).
    let spaced = GrammarOptions::new().max_whitespace_run(2);
    let compact = GrammarOptions::new().compact_whitespace(true);
    for seed in 0..4 {
        let options = if seed % 2 == 0 { spaced } else { compact };
        let grammar = Grammar::compile(&engine, GrammarKind::JsonSchema, schema, options).unwrap();
        let params = SamplingParams::builder()
            .grammar(&grammar)
            .seed(seed)
            .max_tokens(400)
            .build()
            .unwrap();
        let out = generate(&engine, "person = ", &params);
        assert_eq!(
            out.finish_reason,
            Some(FinishReason::Stop),
            "seed {seed}: {:?}",
            out.text
        );
        let value =
            parse_json(&out.text).unwrap_or_else(|e| panic!("seed {seed}: {e} in {:?}", out.text));
        let fields = match value {
            Json::Object(fields) => fields,
            other => panic!("not an object: {other:?}"),
        };
        assert_eq!(
            fields.keys().map(String::as_str).collect::<Vec<_>>(),
            ["age", "name", "tags"]
        );
        assert!(
            matches!(&fields["name"], Json::String(s) if s.chars().count() <= 12),
            "{:?}",
            out.text
        );
        assert!(
            matches!(fields["age"], Json::Number(n) if n.fract() == 0.0),
            "{:?}",
            out.text
        );
        assert!(
            matches!(&fields["tags"], Json::Array(a) if a.len() <= 3 && a.iter().all(|t| matches!(t, Json::Bool(_))))
        );
        let limit = if seed % 2 == 0 { 2 } else { 0 };
        assert!(
            longest_whitespace_outside_strings(&out.text) <= limit,
            "{:?}",
            out.text
        );
    }
    let grammar = Grammar::json_schema(&engine, schema).unwrap();
    // The grammar outlives its handle: the parameters hold it.
    let params = SamplingParams::builder().grammar(&grammar).build().unwrap();
    drop(grammar);
    assert!(params.grammar().is_some());
}

/// The longest run of whitespace between JSON tokens.
fn longest_whitespace_outside_strings(json: &str) -> usize {
    let (mut in_string, mut escaped, mut run, mut longest) = (false, false, 0, 0);
    for c in json.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c.is_whitespace() {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
            in_string = c == '"';
        }
    }
    longest
}

#[test]
fn regex_and_ebnf_grammars_constrain_the_output() {
    let engine = engine();
    let date = Grammar::regex(&engine, "20[0-9]{2}-(0[1-9]|1[0-2])-[0-2][0-9]").unwrap();
    let params = SamplingParams::builder()
        .grammar(&date)
        .seed(1)
        .max_tokens(20)
        .build()
        .unwrap();
    let text = generate(&engine, "released = ", &params).text;
    let b = text.as_bytes();
    assert_eq!(b.len(), 10, "{text:?}");
    assert!(b[..2] == *b"20" && b[4] == b'-' && b[7] == b'-', "{text:?}");

    let answer = Grammar::ebnf(&engine, r#"root ::= ("yes" | "no") ".""#).unwrap();
    let params = SamplingParams::builder()
        .grammar(&answer)
        .seed(1)
        .max_tokens(8)
        .build()
        .unwrap();
    let text = generate(&engine, "ok = ", &params).text;
    assert!(text == "yes." || text == "no.", "{text:?}");
}

#[test]
fn logprobs_come_in_bulk_with_every_token() {
    let engine = engine();
    let mut session = engine.session().unwrap();
    session.add_text("while True:").unwrap();
    let params = SamplingParams::builder()
        .temperature(0.0)
        .max_tokens(10)
        .logprobs(3)
        .prompt_logprobs(2)
        .build()
        .unwrap();
    let mut kinds = Vec::new();
    for event in session.generate(&params).unwrap() {
        let event = event.unwrap();
        kinds.push(event.kind());
        if event.kind() == EventKind::Finished {
            continue;
        }
        let lp = event.logprobs().expect("logprobs were requested");
        let ids = event.tokens();
        assert_eq!(lp.len(), ids.len());
        assert_eq!(
            lp.top_k(),
            if event.kind() == EventKind::Tokens {
                3
            } else {
                2
            }
        );
        assert_eq!(lp.top_ids().len(), lp.len() * lp.top_k());
        for (i, &id) in ids.iter().enumerate() {
            let top: Vec<(i32, f32)> = lp.top(i).collect();
            assert!(
                top.windows(2).all(|w| w[0].1 >= w[1].1),
                "alternatives not sorted: {top:?}"
            );
            assert!(lp.logprob(i) <= 0.0 && lp.rank(i) >= 1);
            if event.kind() == EventKind::Tokens {
                // Greedy: every sampled token is the most likely one.
                assert_eq!((lp.rank(i), top[0].0), (1, id));
                assert!((top[0].1 - lp.logprob(i)).abs() < 1e-5);
            }
        }
    }
    assert_eq!(kinds.first(), Some(&EventKind::PromptLogprobs));
    assert_eq!(kinds.last(), Some(&EventKind::Finished));

    let plain = generate(&engine, "while True:", &SamplingParams::greedy(2).unwrap());
    assert_eq!(plain.tokens.len(), 2);
    let mut session = engine.session().unwrap();
    session.add_text("while True:").unwrap();
    let mut stream = session
        .generate(&SamplingParams::greedy(2).unwrap())
        .unwrap();
    let first = Iterator::next(&mut stream).unwrap().unwrap();
    assert!(first.logprobs().is_none(), "logprobs without asking");
}

#[test]
fn stop_strings_end_the_output() {
    let engine = engine();
    let base = generate(&engine, "def f():\n", &SamplingParams::greedy(30).unwrap()).text;
    // Three characters from the middle of the output; it stops at their first occurrence.
    let chars: Vec<(usize, char)> = base.char_indices().collect();
    let middle = chars[chars.len() / 2].0;
    let stop = &base[middle..chars.get(chars.len() / 2 + 3).map_or(base.len(), |c| c.0)];
    let cut = base.find(stop).unwrap();
    let params = SamplingParams::builder()
        .temperature(0.0)
        .max_tokens(30)
        .stop(stop)
        .build()
        .unwrap();
    let out = generate(&engine, "def f():\n", &params);
    assert_eq!(
        (out.text.as_str(), out.finish_reason),
        (&base[..cut], Some(FinishReason::Stop))
    );
    let params = params
        .to_builder()
        .include_stop_string(true)
        .build()
        .unwrap();
    assert_eq!(
        generate(&engine, "def f():\n", &params).text,
        &base[..cut + stop.len()]
    );
}

#[test]
fn sampling_getters_return_every_field() {
    let engine = engine();
    let grammar = Grammar::regex(&engine, "[a-z]+").unwrap();
    let p = SamplingParams::builder()
        .temperature(0.5)
        .top_k(40)
        .top_p(0.9)
        .min_p(0.05)
        .repetition_penalty(1.1)
        .presence_penalty(0.5)
        .frequency_penalty(-0.5)
        .max_tokens(77)
        .min_tokens(3)
        .n(2)
        .seed(99)
        .first_completion(4)
        .ignore_eos(true)
        .logprobs(5)
        .prompt_logprobs(0)
        .logit_bias(&[(12, 1.5), (7, -2.0)])
        .allowed_tokens(&[5, 6, 7, 12])
        .stop_tokens(&[1, 2])
        .stop("END")
        .stop("STOP")
        .include_stop_string(true)
        .skip_special_tokens(false)
        .grammar(&grammar)
        .build()
        .unwrap();
    assert_eq!(
        (p.temperature(), p.top_k(), p.top_p(), p.min_p()),
        (0.5, 40, 0.9, 0.05)
    );
    assert_eq!(
        (
            p.repetition_penalty(),
            p.presence_penalty(),
            p.frequency_penalty()
        ),
        (1.1, 0.5, -0.5)
    );
    assert_eq!(
        (
            p.max_tokens(),
            p.min_tokens(),
            p.n(),
            p.seed(),
            p.first_completion()
        ),
        (77, 3, 2, Some(99), 4)
    );
    assert_eq!(
        (p.ignore_eos(), p.logprobs(), p.prompt_logprobs()),
        (true, Some(5), Some(0))
    );
    assert_eq!(p.logit_bias(), vec![(7, -2.0), (12, 1.5)]);
    assert_eq!(
        (p.allowed_tokens(), p.stop_tokens()),
        (vec![5, 6, 7, 12], vec![1, 2])
    );
    assert_eq!(
        p.stop_strings(),
        vec!["END".to_string(), "STOP".to_string()]
    );
    assert_eq!(
        (
            p.include_stop_string(),
            p.skip_special_tokens(),
            p.grammar().is_some()
        ),
        (true, false, true)
    );
    let debug = format!("{p:?}");
    for field in [
        "temperature: 0.5",
        "top_k: 40",
        "seed: Some(99)",
        "logit_bias: [(7, -2.0), (12, 1.5)]",
        "stop_strings: [\"END\", \"STOP\"]",
        "grammar: true",
    ] {
        assert!(debug.contains(field), "{field} missing from {debug}");
    }
    let cleared = p
        .to_builder()
        .seed(None)
        .logprobs(None)
        .clear_stop_strings()
        .grammar(None)
        .build()
        .unwrap();
    assert_eq!(
        (
            cleared.seed(),
            cleared.logprobs(),
            cleared.stop_strings().len(),
            cleared.grammar().is_some()
        ),
        (None, None, 0, false)
    );
    let copy = p.clone();
    assert_eq!((copy.max_tokens(), p.max_tokens()), (77, 77));
    let defaults = SamplingParams::new().unwrap();
    assert_eq!(
        (
            defaults.temperature(),
            defaults.max_tokens(),
            defaults.n(),
            defaults.seed()
        ),
        (1.0, 256, 1, None)
    );
    let model = engine.sampling_defaults().unwrap();
    assert_eq!(
        (model.temperature(), model.top_p(), model.max_tokens()),
        (0.8, 0.95, 128)
    );
}

#[test]
fn tokenizer_model_info_and_stats() {
    let engine = engine();
    let tokenizer = engine.tokenizer().unwrap();
    let standalone = deepinfer::Tokenizer::from_file(model_dir()).unwrap();
    let ids = tokenizer.encode("print('hi')", false).unwrap();
    assert_eq!(standalone.encode("print('hi')", false).unwrap(), ids);
    assert_eq!(engine.tokenize("print('hi')", false).unwrap(), ids);
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), "print('hi')");
    assert_eq!(
        tokenizer.vocab_size().unwrap(),
        engine.vocab_size().unwrap()
    );

    let info = engine.model_info().unwrap();
    assert_eq!(
        (info.layers, info.hidden_size, info.vocab_size),
        (6, 256, 4096)
    );
    assert!(info.parameters > 9_000_000 && info.weight_bytes > 0 && !info.weight_dtype.is_empty());
    assert!(engine.has_tokenizer().unwrap());
    assert_eq!(engine.eos_tokens().unwrap(), vec![1]);
    assert!(engine.max_context().unwrap() > 0 && engine.capacity_tokens().unwrap() > 0);

    let before = engine.stats().unwrap();
    generate(&engine, "x", &SamplingParams::greedy(3).unwrap());
    let after = engine.stats().unwrap();
    assert!(after.generated_tokens >= before.generated_tokens + 3);
    assert!(after.steps > before.steps && after.state_bytes_total > 0);
}

#[test]
fn keep_cancelled_output_keeps_the_partial_reply() {
    let engine = engine();
    for keep in [false, true] {
        let mut session: Session = engine.session().unwrap();
        session.add_text("def run():").unwrap();
        session.set_keep_cancelled_output(keep).unwrap();
        let before = session.context_len().unwrap();
        let params = SamplingParams::builder()
            .max_tokens(100_000)
            .ignore_eos(true)
            .build()
            .unwrap();
        let mut stream = session.generate(&params).unwrap();
        let mut got = 0;
        while let Some(event) = Iterator::next(&mut stream) {
            let event = event.unwrap();
            got += event.tokens().len();
            if got >= 3 {
                stream.cancel().unwrap();
            }
            if event.kind() == EventKind::Finished {
                assert_eq!(event.finish_reason(), Some(FinishReason::Cancelled));
            }
        }
        drop(stream);
        let after = session.context_len().unwrap();
        if keep {
            assert_eq!(after, before + got);
        } else {
            assert_eq!(after, before);
        }
    }
}
