#!/usr/bin/env python3
"""The SASS instructions of one kernel with the most warp-stall samples, from
`ncu -i report --page source --csv --print-source sass` (bench/ncu_decode_step.sh with SOURCE=1):
where a kernel's warps wait, and on what. Usage: ncu_sass_top.py file.csv [rows]"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if any("Source" == c or "Address" in c for c in r))
cols = rows[head]
data = [dict(zip(cols, r)) for r in rows[head + 1:] if len(r) == len(cols)]
key = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
if key is None:
    sys.exit(f"no stall-sampling column; columns: {cols}")
num = lambda v: float(v.replace(",", "") or 0)
total = sum(num(d[key]) for d in data) or 1
stall_cols = [c for c in cols if c.startswith("stall_")]
print(f"{len(data)} instructions, {total:.0f} samples")
for d in sorted(data, key=lambda d: -num(d[key]))[: int(sys.argv[2]) if len(sys.argv) > 2 else 30]:
    why = sorted(((num(d[c]), c) for c in stall_cols), reverse=True)[:2]
    print(f"{100 * num(d[key]) / total:5.1f}%  {d.get('Address', '')}  {d.get('Source', '')[:70]}  "
          + " ".join(f"{c}={v:.0f}" for v, c in why if v))
