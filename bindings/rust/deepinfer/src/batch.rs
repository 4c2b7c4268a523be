//! Many prompts at once: one session each, all delivering to one completion queue.

use deepinfer_sys as sys;

use crate::completion::{Collector, Completion};
use crate::engine::Engine;
use crate::error::Result;
use crate::queue::{Polled, Queue};
use crate::sampling::SamplingParams;
use crate::session::RawSession;

impl Engine {
    /// Generates from many prompts at once and returns each prompt's completions, in the order
    /// of the prompts (`params.n()` completions each).
    ///
    /// Every prompt gets its own session; all are submitted before any output is read, so the
    /// engine batches them together, and their events are read from one completion queue. A
    /// prompt the library refuses (e.g. longer than the context) fails the whole call; a
    /// completion that fails while generating reports it in [`Completion::error`].
    ///
    /// ```
    /// # let model = std::env::var("DEEPINFER_MODEL")
    /// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
    /// # let engine = deepinfer::Engine::builder().model(&model).build()?;
    /// let params = deepinfer::SamplingParams::greedy(8)?;
    /// let outputs = engine.generate_batch(["import numpy", "def main():", "class A:"], &params)?;
    /// assert_eq!(outputs.len(), 3);
    /// for (prompt, completions) in outputs.iter().enumerate() {
    ///     println!("{prompt}: {:?}", completions[0].text);
    /// }
    /// # Ok::<(), deepinfer::Error>(())
    /// ```
    pub fn generate_batch<I, S>(
        &self,
        prompts: I,
        params: &SamplingParams,
    ) -> Result<Vec<Vec<Completion>>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        // Declared before the sessions, so dropped after them: sessions freed on an error path
        // still deliver their last events into it.
        let queue = Queue::new()?;
        let mut sessions = Vec::new();
        for (tag, prompt) in prompts.into_iter().enumerate() {
            let session = RawSession::new(self)?;
            session.attach(&queue, tag as u64)?;
            session.add_text(prompt.as_ref(), sys::DI_TEXT_PLAIN)?;
            sessions.push(session);
        }
        for session in &sessions {
            session.generate(params)?;
        }
        let mut collectors: Vec<Collector> =
            sessions.iter().map(|_| Collector::default()).collect();
        let mut running = sessions.len();
        while running > 0 {
            match queue.poll(-1)? {
                Polled::Event(event, tag) => {
                    if let Some(c) = collectors.get_mut(tag as usize) {
                        c.add(&event);
                    }
                }
                Polled::Done => running -= 1,
                Polled::Skipped | Polled::Empty => {}
            }
        }
        Ok(collectors.into_iter().map(Collector::finish).collect())
    }
}
