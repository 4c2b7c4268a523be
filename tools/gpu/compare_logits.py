#!/usr/bin/env python3
"""Compares two logits files of `deepinfer logits` (float32, rows x vocab): the relative error
||a - ref|| / ||ref|| over all values and per row (largest), and how often the rows' best tokens agree.

usage: compare_logits.py A REF VOCAB [LABEL]"""
import math
import sys
from array import array


def read(path):
    a = array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def main():
    a, ref, vocab = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
    label = sys.argv[4] if len(sys.argv) > 4 else sys.argv[1]
    if len(a) != len(ref) or len(a) % vocab:
        sys.exit(f"{label}: {len(a)} and {len(ref)} values for vocab {vocab}")
    rows = len(a) // vocab
    diff = norm = worst = 0.0
    agree = 0
    for r in range(rows):
        x, y = a[r * vocab:(r + 1) * vocab], ref[r * vocab:(r + 1) * vocab]
        d = sum((p - q) ** 2 for p, q in zip(x, y))
        n = sum(q * q for q in y)
        diff, norm = diff + d, norm + n
        worst = max(worst, math.sqrt(d / n) if n else 0.0)
        agree += max(range(vocab), key=x.__getitem__) == max(range(vocab), key=y.__getitem__)
    print(f"{label}: {rows} rows, rel {math.sqrt(diff / norm):.3g} (worst row {worst:.3g}), top-1 agreement {agree}/{rows}")


if __name__ == "__main__":
    main()
