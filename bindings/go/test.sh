#!/usr/bin/env bash
# Tests the Go SDK against an installed DeepInfer, the way users build it: pkg-config finds the
# library. go vet, then go test -race over the package (with its runnable examples) and the
# example OpenAI server, whose end-to-end test drives it with the official OpenAI client.
# Usage: bindings/go/test.sh PREFIX     (the install prefix: build/stage, /usr, ...)
set -euo pipefail
prefix=$(cd "${1:?usage: $0 PREFIX}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

libdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix/lib/$(gcc -print-multiarch 2>/dev/null || true)"; do
  if [ -e "$d/libdeepinfer.so.0" ]; then libdir=$d; break; fi
done
[ -n "$libdir" ] || { echo "test.sh: no libdeepinfer.so.0 under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CGO_ENABLED=1 GOPROXY=off GOFLAGS=
# Go's build cache is the user's; a CI user without a home gets one in the (ignored) build tree.
if [ "$(go env GOCACHE)" = off ]; then export GOCACHE="$repo/build/go-cache"; fi
export DEEPINFER_MODEL="${DEEPINFER_TEST_MODEL:-$repo/models/demo}" DEEPINFER_CLI="$prefix/bin/deepinfer" DEEPINFER_REQUIRE_E2E=1

# The OpenAI client, pinned by package-lock.json (scripts/setup.sh installs it too).
e2e="$here/examples/openai-server/e2e"
if [ ! -e "$e2e/node_modules/openai/package.json" ]; then
  (cd "$e2e" && npm ci --prefer-offline --no-audit --no-fund)
fi

cd "$here"
echo "== go vet"
go vet ./...
echo "== go test -race (library $(pkg-config --modversion deepinfer) in $libdir)"
go test -race -count=1 ./...
