#!/usr/bin/env bash
# Library code (src/ but the command line in src/cli, kernels/, capi/) keeps no process-wide mutable
# state and reads no environment variable: settings come through the engine configuration and belong
# to the engine (or backend) that was given them. Fails listing every line that breaks this:
#   - getenv / secure_getenv;
#   - a mutable variable at namespace scope (a declaration at column 0 that is not const/constexpr);
#   - a mutable static variable (function-local or class member).
# A line that must stay process-wide by contract (e.g. the one log sink the C ABI documents) carries
# the marker `process-wide:` in a comment saying why; a thread_local variable (state of the calling
# thread only, shared with no other) carries `per-thread:` with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "$@" <<'PY'
import os, re, sys

roots = ["src", "kernels", "capi"]
skip = ("src/cli/",)
exts = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")

getenv = re.compile(r"\b(secure_)?getenv\s*\(")
# A declaration at column 0 ending in ';' with no parenthesis before any '=' / '{' initializer.
ns_decl = re.compile(r"^(?:static\s+|inline\s+)*(?!(?:const|constexpr|consteval|constinit|using|typedef|template|extern|struct|class|"
                     r"union|enum|namespace|friend|return|public|private|protected|static_assert|concept|requires)\b)"
                     r"[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*(=[^=].*|\{.*\})?;\s*(//.*)?$")
static_var = re.compile(r"^\s*(?:inline\s+)?static\s+(?!(?:const|constexpr|inline|void|bool\s+\w+\s*\(|_assert|cast)\b)"
                        r"(?:thread_local\s+)?[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*(=[^=].*|\{.*\})?;\s*(//.*)?$")
constant = re.compile(r"\b(const|constexpr|constinit|consteval)\b")

def strip(line):
    # drops string literals and trailing // comments (the marker is checked on the raw line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return re.sub(r"//.*", "", line).rstrip()

bad = []
for root in roots:
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            if not f.endswith(exts) or path.startswith(skip):
                continue
            in_block_comment = False
            for n, raw in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                if "process-wide:" in raw or ("thread_local" in raw and "per-thread:" in raw):
                    continue
                line = raw
                if in_block_comment:
                    if "*/" not in line:
                        continue
                    line = line.split("*/", 1)[1]
                    in_block_comment = False
                if "/*" in line and "*/" not in line.split("/*", 1)[1]:
                    in_block_comment = True
                    line = line.split("/*", 1)[0]
                code = strip(line)
                if not code.strip() or code.lstrip().startswith("#"):
                    continue
                why = None
                if getenv.search(code):
                    why = "reads the environment"
                else:
                    decl = code.split("=")[0]
                    while re.search(r"<[^<>]*>", decl):  # template arguments may name const types
                        decl = re.sub(r"<[^<>]*>", "", decl)
                    if "(" in decl or constant.search(decl):
                        pass  # a function, or a constant
                    elif ns_decl.match(code):
                        why = "mutable variable at namespace scope"
                    elif static_var.match(code):
                        why = "mutable static variable"
                if why:
                    bad.append(f"{path}:{n}: {why}: {raw.strip()}")
if bad:
    print("check_no_globals: library code must keep no process-wide mutable state and read no environment variable", file=sys.stderr)
    print("(options belong to the engine or backend given them; mark a contractual exception with `process-wide: why`):", file=sys.stderr)
    for b in bad:
        print("  " + b, file=sys.stderr)
    sys.exit(1)
print("check_no_globals: ok")
PY
