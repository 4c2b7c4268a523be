//! A finished completion's whole output, gathered from its events.

use crate::error::Error;
use crate::event::{Event, EventKind, FinishReason, Usage};

/// One completion's output, gathered from the events of a generation
/// ([`Stream::completions`](crate::Stream::completions),
/// [`Engine::generate_batch`](crate::Engine::generate_batch)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion {
    /// The output text.
    pub text: String,
    /// The output token ids.
    pub tokens: Vec<i32>,
    /// Why it ended (`None` only if the generation ended without saying, which the library
    /// does not do).
    pub finish_reason: Option<FinishReason>,
    /// Token counts.
    pub usage: Usage,
    /// The seed it used (set it to replay the output exactly).
    pub seed: Option<u64>,
    /// Why it failed, with [`FinishReason::Error`].
    pub error: Option<Error>,
}

/// Gathers events into completions, indexed by the events' completion numbers.
#[derive(Default)]
pub(crate) struct Collector {
    completions: Vec<Completion>,
}

impl Collector {
    pub(crate) fn add(&mut self, event: &Event) {
        let i = event.completion();
        if self.completions.len() <= i {
            self.completions.resize_with(i + 1, Completion::default);
        }
        let c = &mut self.completions[i];
        match event.kind() {
            EventKind::Tokens => {
                c.text.push_str(event.text());
                c.tokens.extend_from_slice(event.tokens());
            }
            EventKind::Finished => {
                c.finish_reason = event.finish_reason();
                c.usage = event.usage().unwrap_or_default();
                c.seed = event.seed();
                c.error = event.error();
            }
            EventKind::PromptLogprobs => {}
        }
    }

    pub(crate) fn finish(self) -> Vec<Completion> {
        self.completions
    }
}
