"""What generations return: whole outputs (RequestOutput) and streamed pieces (StreamDelta)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

from .errors import DeepInferError

__all__ = ["TokenLogprob", "Usage", "CompletionOutput", "RequestOutput", "StreamDelta", "finish_reason_name"]

_FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "cancelled", 4: "error"}


def finish_reason_name(code: int) -> Optional[str]:
    """"stop", "length", "cancelled", "error"; None while not finished; "unknown(N)" for a reason a
    newer library added."""
    return _FINISH_REASONS.get(code, f"unknown({code})")


@dataclass(frozen=True)
class TokenLogprob:
    """One token's log-probability, its 1-based rank in the distribution, and the most likely
    alternatives as (token id, logprob) pairs, most likely first."""

    token_id: int
    logprob: float
    rank: int
    top: List[Tuple[int, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Usage:
    """Token counts of one completion: prompt tokens processed for the generation, tokens
    generated, and prompt tokens whose model state was reused from an earlier turn."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    Attributes:
        index: which completion (0 .. n-1).
        text: the generated text (without a stop string unless include_stop_str_in_output).
        token_ids: the generated token ids.
        finish_reason: "stop" (EOS, a stop token or string), "length", "cancelled", "error"; None
            while running; "unknown(N)" for a reason a newer library added.
        logprobs: per generated token, when SamplingParams.logprobs was set.
        usage: token counts.
        seed: the seed it was sampled with (set it to replay the output).
        error: the library's error when finish_reason is "error".
    """

    index: int
    text: str = ""
    token_ids: List[int] = field(default_factory=list)
    finish_reason: Optional[str] = None
    logprobs: Optional[List[TokenLogprob]] = None
    usage: Usage = field(default_factory=Usage)
    seed: Optional[int] = None
    error: Optional[DeepInferError] = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """The result of one prompt: its completions, in index order.

    Attributes:
        prompt: the prompt as given (text, token ids, or chat messages).
        prompt_token_ids: the context the model saw (for chat: the encoded conversation).
        outputs: the completions.
        prompt_logprobs: per prompt token after the first, when SamplingParams.prompt_logprobs was set.
        seed: the seed of the generation.
    """

    prompt: Union[str, List[int], list, None]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    prompt_logprobs: Optional[List[TokenLogprob]] = None
    seed: Optional[int] = None

    @property
    def text(self) -> str:
        """The text of the first completion."""
        return self.outputs[0].text if self.outputs else ""

    @property
    def finished(self) -> bool:
        return all(o.finished for o in self.outputs)

    @property
    def usage(self) -> Usage:
        """Prompt tokens once, completion tokens summed over the completions."""
        if not self.outputs:
            return Usage()
        first = self.outputs[0].usage
        return Usage(first.prompt_tokens, sum(o.usage.completion_tokens for o in self.outputs), first.cached_tokens)


@dataclass
class StreamDelta:
    """New output of one completion, as a stream yields it.

    A completion's deltas concatenate to its text and token ids. Its last delta has
    ``finish_reason`` set (with usage and seed), and may carry no new text. A delta with
    ``prompt_logprobs`` comes first when they were requested.
    """

    index: int
    text: str = ""
    token_ids: List[int] = field(default_factory=list)
    logprobs: Optional[List[TokenLogprob]] = None
    finish_reason: Optional[str] = None
    usage: Optional[Usage] = None
    seed: Optional[int] = None
    error: Optional[DeepInferError] = None
    prompt_logprobs: Optional[List[TokenLogprob]] = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
