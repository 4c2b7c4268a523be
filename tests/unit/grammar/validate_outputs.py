#!/usr/bin/python3
"""Independent check of generated outputs (Debian's python3-jsonschema, draft 2020-12).

Reads JSON lines {"schema": <schema>, "output": "<text>"} and prints one line per record that does
not parse as JSON or does not validate; exits 1 if there is any.
"""
import json
import sys

from jsonschema import Draft202012Validator

failures = 0
with open(sys.argv[1], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        record = json.loads(line)
        try:
            instance = json.loads(record["output"])
        except ValueError as e:
            print(f"record {n}: output is not JSON ({e}): {record['output']!r}")
            failures += 1
            continue
        validator = Draft202012Validator(record["schema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
        errors = list(validator.iter_errors(instance))
        if errors:
            print(f"record {n}: {errors[0].message}: {record['output']!r} schema {json.dumps(record['schema'])}")
            failures += 1
sys.exit(1 if failures else 0)
