"""Structured output: JSON schema, regular expression, EBNF."""

import json
import re

import jsonschema
import pytest

import deepinfer
from deepinfer import SamplingParams

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("compact", [False, True])
def test_json_schema_output_parses_and_validates(engine, compact):
    for seed in (1, 2, 3):
        p = SamplingParams(temperature=0.8, seed=seed, max_tokens=200, json_schema=PERSON, compact_json=compact)
        out = engine.generate("A person: ", p)[0].outputs[0]
        assert out.finish_reason == "stop", out.text
        value = json.loads(out.text)
        jsonschema.Draft202012Validator(PERSON).validate(value)
        if compact:
            assert out.text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
