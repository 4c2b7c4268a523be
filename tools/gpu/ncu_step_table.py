#!/usr/bin/env python3
"""Per-kernel device times of one eager decode step (or prefill forward), from `ncu --csv --metrics gpu__time_duration.sum`
output (bench/ncu_decode_step.sh writes it): the last complete step (embed_kernel to embed_kernel),
summed by kernel name, largest first. --each also lists the step's kernels in launch order."""
import csv
import re
import sys


def kernels(path):
    header, out = None, []
    for row in csv.reader(open(path)):
        if "Kernel Name" in row:
            header = row
            continue
        if header and len(row) == len(header):
            d = dict(zip(header, row))
            v, unit = float(d["Metric Value"].replace(",", "")), d["Metric Unit"]
            us = v / 1000 if unit in ("nsecond", "ns") else v if unit in ("usecond", "us") else v * 1000
            name = re.sub(r"\(.*", "", d["Kernel Name"]).replace("deepinfer::<unnamed>::", "").replace("void ", "")
            out.append((name, us))
    return out


def main():
    ks = kernels(sys.argv[1])
    starts = [i for i, (n, _) in enumerate(ks) if n.startswith("embed_kernel")]
    if len(starts) < 2:
        sys.exit("fewer than two steps (forwards) in the profile: raise ncu's --launch-count")
    step = ks[starts[-2]:starts[-1]]
    print(f"{len(step)} kernels, {sum(us for _, us in step):.1f} us")
    by_name = {}
    for n, us in step:
        c = by_name.setdefault(n, [0, 0.0])
        c[0] += 1
        c[1] += us
    print("| kernel | launches | us | us per launch |\n|---|---:|---:|---:|")
    for n, (c, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"| {n} | {c} | {us:.1f} | {us / c:.2f} |")
    if "--each" in sys.argv:
        for n, us in step:
            print(f"{us:8.2f}  {n}")


main()
