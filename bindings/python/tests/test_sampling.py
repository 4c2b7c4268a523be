"""SamplingParams: every ABI field, checked by the library, read back, shown by repr."""

import pickle

import pytest

import deepinfer
from deepinfer import SamplingParams

VALUES = dict(
    temperature=0.7, top_k=40, top_p=0.9, min_p=0.05, repetition_penalty=1.1, presence_penalty=0.5,
    frequency_penalty=-0.5, max_tokens=77, min_tokens=3, n=4, seed=2**63 + 5, first_completion=9,
    stop=["\n\n", "END"], stop_token_ids=[5, 7], include_stop_str_in_output=True, ignore_eos=True,
    skip_special_tokens=False, logprobs=5, prompt_logprobs=0, logit_bias={3: -1.5, 10: 2.25},
    allowed_token_ids=[1, 2, 3],
)  # fmt: skip


def test_every_field_reads_back():
    p = SamplingParams(**VALUES)
    assert p.to_dict() == VALUES
    for name, value in VALUES.items():
        assert getattr(p, name) == value, name


def test_library_defaults():
    d = SamplingParams().to_dict()
    assert d["temperature"] == 1.0 and d["max_tokens"] == 256 and d["n"] == 1 and d["seed"] is None
    assert d["logprobs"] is None and d["prompt_logprobs"] is None and d["allowed_token_ids"] is None
    assert d["stop"] == [] and d["logit_bias"] == {} and d["skip_special_tokens"] is True


def test_attributes_set_and_clear():
    p = SamplingParams(seed=3, logprobs=2, stop="x")
    assert p.stop == ["x"]
    p.seed = None
    p.logprobs = None
    p.stop = None
    p.temperature = 0
    assert (p.seed, p.logprobs, p.stop, p.temperature) == (None, None, [], 0.0)


def test_repr_shows_every_field():
    r = repr(SamplingParams(**VALUES))
    assert r.startswith("SamplingParams(")
    for name, value in VALUES.items():
        assert f"{name}={value!r}" in r


@pytest.mark.parametrize(
    "field, value",
    [("temperature", -1), ("top_k", -2), ("top_p", 0), ("top_p", 1.5), ("min_p", 2), ("repetition_penalty", 0),
     ("presence_penalty", 3), ("frequency_penalty", -3), ("max_tokens", 0), ("min_tokens", -1), ("n", 0), ("n", 129),
     ("first_completion", -1), ("logprobs", 21), ("prompt_logprobs", 21), ("logit_bias", {1: 200.0}), ("stop", [""]),
     ("stop", ["x"] * 65)],
)  # fmt: skip
def test_bad_values_raise_the_library_message(field, value):
    with pytest.raises(deepinfer.InvalidArgument) as e:
        SamplingParams(**{field: value})
    assert e.value.code == 1 and field in str(e.value)
    assert isinstance(e.value, ValueError)
    p = SamplingParams()
    with pytest.raises(deepinfer.InvalidArgument):
        setattr(p, field, value)
    assert p.to_dict() == SamplingParams().to_dict()  # a failed set changes nothing


def test_clone_pickle_equality():
    p = SamplingParams(**VALUES, regex="[0-9]+")
    q = p.clone()
    assert q == p and q is not p
    q.max_tokens = 5
    assert p.max_tokens == 77
    r = pickle.loads(pickle.dumps(p))
    assert r == p and r.regex == "[0-9]+"
