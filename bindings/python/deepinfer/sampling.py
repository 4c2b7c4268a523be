"""Sampling parameters: every field of the C ABI's di_sampling, validated by the library."""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._lib import native

__all__ = ["SamplingParams"]

_UNSET: Any = object()

# Structured output kinds (deepinfer.h: di_grammar_kind).
_GRAMMAR_KINDS = {"regex": native.DI_GRAMMAR_REGEX, "json_schema": native.DI_GRAMMAR_JSON_SCHEMA, "ebnf": native.DI_GRAMMAR_EBNF}


def _f32(v: float) -> float:
    """A float32 from the library as the shortest decimal that is the same float32 (0.95, not
    0.949999988079071)."""
    exact = struct.unpack("f", struct.pack("f", v))[0]
    for digits in range(6, 10):
        short = float(f"{v:.{digits}g}")
        if struct.unpack("f", struct.pack("f", short))[0] == exact:
            return short
    return v


def _scalar(name: str, doc: str, convert=lambda v: v, read=lambda v: v):
    setter = getattr(native, f"di_sampling_set_{name}")
    getter = getattr(native, f"di_sampling_get_{name}")

    def fget(self: "SamplingParams"):
        return read(getter(self._handle))

    def fset(self: "SamplingParams", value) -> None:
        setter(self._handle, convert(value))

    return property(fget, fset, doc=doc)


def _optional_count(name: str, doc: str):
    """logprobs / prompt_logprobs: None (the library's -1) is off."""
    return _scalar(name, doc, convert=lambda v: -1 if v is None else int(v), read=lambda v: None if v < 0 else v)


class SamplingParams:
    """How a generation samples its tokens, and when it stops.

    Every keyword is optional; fields left out keep the library's defaults (temperature 1, no
    truncation, no penalties, max_tokens 256, n 1, no seed). ``Engine.generate`` without params
    uses the model's defaults from its generation_config.json instead
    (``engine.default_sampling_params()``).

    Each value is checked by the library as it is set: a bad value raises
    :class:`deepinfer.InvalidArgument` (or :class:`deepinfer.GrammarError` for a structured-output
    spec) with the library's message. Every field can be read back and set again as an attribute.
    One object may be shared by many threads for generating; change it from one thread at a time.

    Args:
        temperature: 0 is greedy; [0, 1e6].
        top_k: keep the k most likely tokens (0 or -1: off).
        top_p: nucleus sampling mass, (0, 1] (1: off).
        min_p: drop tokens below min_p times the most likely one's probability, [0, 1].
        repetition_penalty: [0.01, 100] (1: off), on tokens of the prompt and the output.
        presence_penalty: [-2, 2], once per token already generated.
        frequency_penalty: [-2, 2], per occurrence in the output.
        max_tokens: most tokens to generate (>= 1).
        min_tokens: EOS and stop tokens are masked until this many were generated.
        n: completions per prompt, [1, 128].
        seed: the same seed, prompt and parameters give the same tokens (None: the engine draws one;
            every output reports the seed it used).
        first_completion: completion i samples from random stream first_completion + i, so
            ``n=1, first_completion=i`` replays completion i of an earlier ``n>1`` generation.
        stop: stop strings (at most 64, 1..1024 bytes each); not included in the output unless
            include_stop_str_in_output.
        stop_token_ids: generation also stops after any of these tokens.
        include_stop_str_in_output: keep the stop string that ended a completion in its text.
        ignore_eos: do not stop at end-of-sequence tokens.
        skip_special_tokens: leave special tokens out of the text (their ids are still returned).
        logprobs: report each sampled token's logprob and rank, and its top ``logprobs``
            alternatives (0..20; None: off).
        prompt_logprobs: the same for every prompt token after the first (None: off).
        logit_bias: {token id: bias in [-100, 100]} added to the logits.
        allowed_token_ids: only these tokens may be sampled (None or empty: any).
        json_schema: constrain the output to JSON matching this schema (a dict or JSON text;
            draft 2020-12).
        regex: constrain the output to match this regular expression.
        ebnf: constrain the output to this EBNF (GBNF dialect) grammar, start rule ``root``.
        compact_json: with json_schema, no whitespace between JSON tokens.
        max_whitespace_run: longest whitespace run between JSON tokens (0: unbounded).
    """

    temperature = _scalar("temperature", "Sampling temperature; 0 is greedy.", float, _f32)
    top_k = _scalar("top_k", "Keep the k most likely tokens (0 or -1: off).", int)
    top_p = _scalar("top_p", "Nucleus sampling mass in (0, 1] (1: off).", float, _f32)
    min_p = _scalar("min_p", "Minimum probability relative to the most likely token (0: off).", float, _f32)
    repetition_penalty = _scalar("repetition_penalty", "Penalty for prompt and output tokens (1: off).", float, _f32)
    presence_penalty = _scalar("presence_penalty", "Penalty for tokens already generated, in [-2, 2].", float, _f32)
    frequency_penalty = _scalar("frequency_penalty", "Penalty per occurrence in the output, in [-2, 2].", float, _f32)
    max_tokens = _scalar("max_tokens", "Most tokens to generate.", int)
    min_tokens = _scalar("min_tokens", "Fewest tokens before EOS or a stop token may end a completion.", int)
    n = _scalar("n", "Completions per prompt.", int)
    first_completion = _scalar("first_completion", "Random stream of completion 0 (replays completion i).", int)
    ignore_eos = _scalar("ignore_eos", "Do not stop at end-of-sequence tokens.", lambda v: int(bool(v)), bool)
    include_stop_str_in_output = property(
        lambda self: bool(native.di_sampling_get_include_stop_string(self._handle)),
        lambda self, v: native.di_sampling_set_include_stop_string(self._handle, int(bool(v))),
        doc="Keep the stop string that ended a completion in its text.",
    )
    skip_special_tokens = _scalar(
        "skip_special_tokens", "Leave special tokens out of the text.", lambda v: int(bool(v)), bool
    )
    logprobs = _optional_count("logprobs", "Top alternatives reported per sampled token (None: no logprobs).")
    prompt_logprobs = _optional_count("prompt_logprobs", "Top alternatives reported per prompt token (None: off).")

    def __init__(
        self,
        *,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        repetition_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        frequency_penalty: Optional[float] = None,
        max_tokens: Optional[int] = None,
        min_tokens: Optional[int] = None,
        n: Optional[int] = None,
        seed: Optional[int] = None,
        first_completion: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
        include_stop_str_in_output: Optional[bool] = None,
        ignore_eos: Optional[bool] = None,
        skip_special_tokens: Optional[bool] = None,
        logprobs: Optional[int] = None,
        prompt_logprobs: Optional[int] = None,
        logit_bias: Optional[Mapping[int, float]] = None,
        allowed_token_ids: Optional[Sequence[int]] = None,
        json_schema: Union[str, Mapping[str, Any], None] = None,
        regex: Optional[str] = None,
        ebnf: Optional[str] = None,
        compact_json: bool = False,
        max_whitespace_run: int = 0,
    ) -> None:
        self._handle = 0
        self._handle = native.di_sampling_create()
        self._grammar: Optional[tuple] = None  # (kind name, spec text, flags, max_whitespace_run)
        values = dict(
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            n=n,
            first_completion=first_completion,
            stop=stop,
            stop_token_ids=stop_token_ids,
            include_stop_str_in_output=include_stop_str_in_output,
            ignore_eos=ignore_eos,
            skip_special_tokens=skip_special_tokens,
            logit_bias=logit_bias,
            allowed_token_ids=allowed_token_ids,
        )
        for name, value in values.items():
            if value is not None:
                setattr(self, name, value)
        if seed is not None:
            self.seed = seed
        if logprobs is not None:
            self.logprobs = logprobs
        if prompt_logprobs is not None:
            self.prompt_logprobs = prompt_logprobs
        self.set_structured_output(
            json_schema=json_schema, regex=regex, ebnf=ebnf, compact_json=compact_json, max_whitespace_run=max_whitespace_run
        )

    @classmethod
    def _adopt(cls, handle: int) -> "SamplingParams":
        """Wraps a di_sampling handle this object then owns."""
        self = cls.__new__(cls)
        self._handle = handle
        self._grammar = None
        return self

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", 0), 0
        if handle and native is not None:
            native.di_sampling_free(handle)

    def clone(self) -> "SamplingParams":
        """An independent copy."""
        copy = SamplingParams._adopt(native.di_sampling_clone(self._handle))
        copy._grammar = self._grammar
        return copy

    # -- fields with more than one value ------------------------------------------------------------

    @property
    def seed(self) -> Optional[int]:
        """The seed, or None when the engine draws one for each generation."""
        value, has = native.di_sampling_get_seed(self._handle)
        return value if has else None

    @seed.setter
    def seed(self, value: Optional[int]) -> None:
        if value is None:
            native.di_sampling_clear_seed(self._handle)
        else:
            native.di_sampling_set_seed(self._handle, int(value))

    @property
    def stop(self) -> List[str]:
        """Stop strings, in the order added."""
        count = native.di_sampling_stop_string_count(self._handle)
        return [native.di_sampling_get_stop_string(self._handle, i) for i in range(count)]

    @stop.setter
    def stop(self, value: Union[str, Iterable[str], None]) -> None:
        strings = [value] if isinstance(value, str) else list(value or ())
        old = self.stop
        try:
            native.di_sampling_clear_stop_strings(self._handle)
            for s in strings:
                native.di_sampling_add_stop_string(self._handle, s)
        except BaseException:  # a rejected list leaves the old one
            native.di_sampling_clear_stop_strings(self._handle)
            for s in old:
                native.di_sampling_add_stop_string(self._handle, s)
            raise

    @property
    def stop_token_ids(self) -> List[int]:
        """Token ids that end a completion (besides EOS)."""
        return native.di_sampling_get_stop_tokens(self._handle)

    @stop_token_ids.setter
    def stop_token_ids(self, value: Optional[Iterable[int]]) -> None:
        native.di_sampling_set_stop_tokens(self._handle, list(value or ()))

    @property
    def logit_bias(self) -> Dict[int, float]:
        """{token id: bias} added to the logits."""
        return {i: _f32(b) for i, b in native.di_sampling_get_logit_bias(self._handle)}

    @logit_bias.setter
    def logit_bias(self, value: Optional[Mapping[int, float]]) -> None:
        native.di_sampling_set_logit_bias(self._handle, [(int(k), float(v)) for k, v in (value or {}).items()])

    @property
    def allowed_token_ids(self) -> Optional[List[int]]:
        """The only tokens that may be sampled, or None for any."""
        ids = native.di_sampling_get_allowed_tokens(self._handle)
        return ids or None

    @allowed_token_ids.setter
    def allowed_token_ids(self, value: Optional[Iterable[int]]) -> None:
        native.di_sampling_set_allowed_tokens(self._handle, list(value or ()))

    # -- structured output ---------------------------------------------------------------------------

    def set_structured_output(
        self,
        *,
        json_schema: Union[str, Mapping[str, Any], None] = None,
        regex: Optional[str] = None,
        ebnf: Optional[str] = None,
        compact_json: bool = False,
        max_whitespace_run: int = 0,
    ) -> None:
        """Constrains the output to a JSON schema, a regular expression or an EBNF grammar (at most
        one; none removes the constraint). The spec is checked by the library now
        (:class:`deepinfer.GrammarError` names the keyword or position) and compiled for an
        engine's vocabulary when a generation starts (the library caches compiled grammars)."""
        given = [(k, v) for k, v in (("json_schema", json_schema), ("regex", regex), ("ebnf", ebnf)) if v is not None]
        if len(given) > 1:
            raise ValueError("give at most one of json_schema, regex and ebnf")
        if not given:
            self._grammar = None
            return
        kind, spec = given[0]
        if kind == "json_schema" and not isinstance(spec, (str, bytes)):
            spec = json.dumps(spec)
        if isinstance(spec, bytes):
            spec = spec.decode("utf-8")
        flags = native.DI_GRAMMAR_COMPACT_WHITESPACE if compact_json else 0
        native.di_grammar_validate(_GRAMMAR_KINDS[kind], spec, flags, int(max_whitespace_run))
        self._grammar = (kind, spec, flags, int(max_whitespace_run))

    @property
    def json_schema(self) -> Optional[str]:
        """The JSON schema constraining the output (as JSON text), or None."""
        return self._grammar[1] if self._grammar and self._grammar[0] == "json_schema" else None

    @property
    def regex(self) -> Optional[str]:
        """The regular expression constraining the output, or None."""
        return self._grammar[1] if self._grammar and self._grammar[0] == "regex" else None

    @property
    def ebnf(self) -> Optional[str]:
        """The EBNF grammar constraining the output, or None."""
        return self._grammar[1] if self._grammar and self._grammar[0] == "ebnf" else None

    @property
    def compact_json(self) -> bool:
        """Whether JSON output has no whitespace between tokens."""
        return bool(self._grammar and self._grammar[2] & native.DI_GRAMMAR_COMPACT_WHITESPACE)

    def _bind(self, engine_handle: int) -> "_Bound":
        """The di_sampling handle to generate with on an engine (with its grammar compiled)."""
        return _Bound(self, engine_handle)

    # -- reading ----------------------------------------------------------------------------------------

    _FIELDS = (
        "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
        "frequency_penalty", "max_tokens", "min_tokens", "n", "seed", "first_completion", "stop",
        "stop_token_ids", "include_stop_str_in_output", "ignore_eos", "skip_special_tokens", "logprobs",
        "prompt_logprobs", "logit_bias", "allowed_token_ids",
    )  # fmt: skip

    def to_dict(self) -> Dict[str, Any]:
        """Every field, read back from the library (plus the structured-output constraint)."""
        d = {name: getattr(self, name) for name in self._FIELDS}
        if self._grammar:
            kind, spec, _, max_ws = self._grammar
            d[kind] = spec
            d["compact_json"] = self.compact_json
            d["max_whitespace_run"] = max_ws
        return d

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"SamplingParams({fields})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SamplingParams):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __getstate__(self) -> Dict[str, Any]:
        return self.to_dict()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


class _Bound:
    """A context manager giving the di_sampling handle for one engine: the parameters themselves,
    or a copy with the grammar compiled for that engine (freed on exit)."""

    __slots__ = ("_params", "_engine", "_clone")

    def __init__(self, params: SamplingParams, engine_handle: int) -> None:
        self._params = params
        self._engine = engine_handle
        self._clone = 0

    def __enter__(self) -> int:
        g = self._params._grammar
        if g is None:
            return self._params._handle
        kind, spec, flags, max_ws = g
        grammar = native.di_grammar_compile_options(self._engine, _GRAMMAR_KINDS[kind], spec, flags, max_ws)
        try:
            clone = native.di_sampling_clone(self._params._handle)
            try:
                native.di_sampling_set_grammar(clone, grammar)
            except BaseException:
                native.di_sampling_free(clone)
                raise
            self._clone = clone
        finally:
            native.di_grammar_free(grammar)  # the parameters reference it
        return clone

    def __exit__(self, *exc: object) -> None:
        if self._clone:
            native.di_sampling_free(self._clone)
            self._clone = 0
