"""Structured output: JSON schema, regular expression, EBNF."""

import json
import re

import jsonschema
import pytest

import deepinfer
from deepinfer import SamplingParams

# Bounded in every part (escapes in keys and strings included), so that any output the grammar
# allows ends within max_tokens: the test checks the constraint, not the demo model's taste.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"enum": ["Ada", "Grace", "Linus"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


@pytest.mark.parametrize("compact", [False, True])
def test_json_schema_output_parses_and_validates(engine, compact):
    for seed in (1, 2, 3):
        p = SamplingParams(temperature=0.8, seed=seed, max_tokens=400, json_schema=PERSON, compact_json=compact, max_whitespace_run=4)
        out = engine.generate("A person: ", p)[0].outputs[0]
        assert out.finish_reason == "stop", out.text
        value = json.loads(out.text)
        jsonschema.Draft202012Validator(PERSON).validate(value)
        between_strings = STRING.sub("s", out.text)
        if compact:
            assert not re.search(r"\s", between_strings), out.text
        else:
            assert not re.search(r"\s{5}", between_strings), out.text


def test_regex_and_ebnf(engine):
    p = SamplingParams(temperature=1.0, seed=9, max_tokens=32, regex=r"[a-z]{3,6}-[0-9]{2}")
    text = engine.generate("Code: ", p)[0].outputs[0].text
    assert re.fullmatch(r"[a-z]{3,6}-[0-9]{2}", text)
    p = SamplingParams(temperature=1.0, seed=9, max_tokens=8, ebnf='root ::= "yes" | "no"')
    assert engine.generate("Answer: ", p)[0].outputs[0].text in ("yes", "no")


def test_structured_fields_read_back(engine):
    p = SamplingParams(json_schema=PERSON, compact_json=True)
    assert json.loads(p.json_schema) == PERSON and p.compact_json and p.regex is None
    assert p.to_dict()["json_schema"] == p.json_schema
    p.set_structured_output(regex="a+")
    assert p.regex == "a+" and p.json_schema is None
    p.set_structured_output()
    assert p.regex is None and "regex" not in p.to_dict()


def test_bad_grammar_raises_grammar_error_with_the_library_message():
    with pytest.raises(deepinfer.GrammarError) as e:
        SamplingParams(regex="(")
    assert e.value.code == 9 and "missing ')'" in str(e.value)
    with pytest.raises(deepinfer.GrammarError):
        SamplingParams(json_schema={"type": "nonsense"})
    with pytest.raises(deepinfer.GrammarError):
        SamplingParams(ebnf='root ::= "a')
    with pytest.raises(ValueError):
        SamplingParams(regex="a", ebnf='root ::= "a"')
