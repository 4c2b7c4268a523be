#!/usr/bin/env python3
"""The SASS instructions of each profiled kernel with the most warp-stall samples, from
`ncu -i report --page source --csv --print-source sass` (tools/gpu/ncu_decode_step.sh with SOURCE=1):
where a kernel's warps wait, and on what. The file holds a section per profiled launch ("Kernel
Name" line, then the table); the first launch of each kernel is shown. Usage: ncu_sass_top.py file.csv [rows]"""
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 30
starts = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name"] or [-1]
seen = set()
for n, start in enumerate(starts):
    name = rows[start][1] if start >= 0 else "(kernel)"
    if name in seen:
        continue
    seen.add(name)
    end = starts[n + 1] if n + 1 < len(starts) else len(rows)
    section = rows[start + 1:end]
    head = next(i for i, r in enumerate(section) if "Address" in r or "Source" in r)
    cols = section[head]
    data = [dict(zip(cols, r)) for r in section[head + 1:] if len(r) == len(cols)]
    key = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
    if key is None:
        sys.exit(f"no stall-sampling column; columns: {cols}")
    num = lambda v: float(v.replace(",", "") or 0)
    total = sum(num(d[key]) for d in data) or 1
    stall_cols = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
    by_reason = sorted(((sum(num(d[c]) for d in data), c) for c in stall_cols), reverse=True)[:6]
    print(f"== {name.split('(')[0]}: {len(data)} instructions, {total:.0f} samples; "
          + ", ".join(f"{c[6:]} {100 * v / total:.0f}%" for v, c in by_reason))
    for d in sorted(data, key=lambda d: -num(d[key]))[:limit]:
        why = sorted(((num(d[c]), c) for c in stall_cols), reverse=True)[:2]
        print(f"{100 * num(d[key]) / total:5.1f}%  {d.get('Address', '')[-5:]}  {d.get('Source', '').strip()[:60]:60}  "
              + " ".join(f"{c[6:]}={v:.0f}" for v, c in why if v))
