"""Prints the wheel's platform tag after checking that the shared objects it carries deserve it.

Usage: python3 platform_tag.py FILE...

The tag is manylinux_X_Y_<arch> for the glibc X.Y of the build machine (PEP 600: such a wheel
works on any distribution with glibc >= X.Y) when every file
  - needs symbol versions GLIBC_* no newer than X.Y, and
  - links only libraries of the manylinux set (libc, libm, libstdc++, libgcc_s, ...), the other
    files given (bundled beside it), or the CUDA libraries of the CUDA backend module, which is
    loaded at run time only where CUDA is present (like other CUDA wheels, they are not bundled).
Otherwise it prints linux_<arch> and the reason on stderr. Uses readelf/objdump (binutils).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from typing import List, Set, Tuple

# PEP 600 / auditwheel's policy: libraries every manylinux system provides.
MANYLINUX_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1", "libnsl.so.1",
    "libresolv.so.2", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}  # fmt: skip
# Needed by libdeepinfer-cuda.so.0 only; present wherever that module can run (CUDA 13).
CUDA_LIBS = {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcuda.so.1"}


def needed(path: str) -> List[str]:
    out = subprocess.check_output(["readelf", "-d", path], text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def soname(path: str) -> str:
    out = subprocess.check_output(["readelf", "-d", path], text=True)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else os.path.basename(path)


def glibc_versions(path: str) -> Set[Tuple[int, ...]]:
    out = subprocess.check_output(["objdump", "-T", path], text=True)
    return {tuple(int(x) for x in v.split(".")) for v in re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)\b", out)}


def main(files: List[str]) -> int:
    libc = platform.libc_ver()
    arch = platform.machine()
    if libc[0] != "glibc":
        print(f"linux_{arch}")
        return 0
    limit = tuple(int(x) for x in libc[1].split(".")[:2])
    carried = {soname(f) for f in files}
    problems: List[str] = []
    for f in files:
        newest = max(glibc_versions(f), default=(0,))
        if newest > limit:
            problems.append(f"{os.path.basename(f)} needs GLIBC_{'.'.join(map(str, newest))}")
        allowed = MANYLINUX_LIBS | carried | (CUDA_LIBS if "cuda" in os.path.basename(f) else set())
        for lib in needed(f):
            if lib not in allowed:
                problems.append(f"{os.path.basename(f)} links {lib}, which is neither bundled nor in the manylinux set")
    if problems:
        print("platform_tag: " + "; ".join(problems) + f": tagging linux_{arch}", file=sys.stderr)
        print(f"linux_{arch}")
    else:
        print(f"manylinux_{limit[0]}_{limit[1]}_{arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
