#!/usr/bin/env bash
# Builds and tests the Rust SDK against an installed DeepInfer, the way a Rust user meets it
# (the library found through pkg-config, or DEEPINFER_LIB_DIR), then checks formatting, lints,
# docs and packaging.
# Usage: bindings/rust/test.sh PREFIX   (PREFIX: where DeepInfer is installed, e.g. build/stage or /usr)
set -euo pipefail

prefix=$(cd "${1:?usage: bindings/rust/test.sh PREFIX}" && pwd)
cd "$(dirname "$0")"
repo=$(cd ../.. && pwd)
target=${CARGO_TARGET_DIR:-target}
step() { printf '\n== rust: %s\n' "$*"; }

if ! command -v cargo >/dev/null; then
  echo "rust: cargo not found: run scripts/setup.sh (Debian packages cargo rustc rustfmt rust-clippy) or install rustup" >&2
  exit 1
fi
cargo_minor=$(cargo --version | sed -E 's/^cargo 1\.([0-9]+).*/\1/')
echo "rust: $(cargo --version), $(rustc --version)"

# The library as users find it: pkg-config's file under PREFIX (multiarch folders too), and the
# loader path for a PREFIX outside the system's folders.
for dir in "$prefix/lib/pkgconfig" "$prefix/lib/$(gcc -dumpmachine 2>/dev/null || echo none)/pkgconfig" "$prefix/lib64/pkgconfig"; do
  if [ -f "$dir/deepinfer.pc" ]; then export PKG_CONFIG_PATH="$dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"; fi
done
pkg-config --exists deepinfer || { echo "rust: no deepinfer.pc under $prefix" >&2; exit 1; }
libdir=$(pkg-config --variable=libdir deepinfer)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_MODEL="${DEEPINFER_TEST_MODEL:-$repo/models/demo}"  # the demo model (its installed copy: install_test.sh)
export DEEPINFER_CLI="$prefix/bin/deepinfer"
export DEEPINFER_INCLUDE_DIR
DEEPINFER_INCLUDE_DIR=$(pkg-config --variable=includedir deepinfer)
[ -x "$DEEPINFER_CLI" ] || { echo "rust: $DEEPINFER_CLI is missing (the tests compare with it)" >&2; exit 1; }
unset DEEPINFER_LIB_DIR

step "format"
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all -- --check
else
  echo "rust: SKIPPED: cargo fmt is not installed (Debian: rustfmt)"
fi

step "lints"
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --offline --workspace --all-targets -- -D warnings
else
  echo "rust: SKIPPED: cargo clippy is not installed (Debian: rust-clippy)"
fi

step "tests (unit, integration, examples built, doc tests)"
cargo test --offline --workspace

step "examples"
cargo run --offline --quiet --example generate -- "$DEEPINFER_MODEL" "def fibonacci(n):"
printf 'How do I read a file?\nAnd write one?\n' | cargo run --offline --quiet --example chat -- "$DEEPINFER_MODEL"

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --offline --no-deps --workspace --quiet

step "library discovery: DEEPINFER_LIB_DIR, and the message when nothing finds it"
discovery=$target/discovery
DEEPINFER_LIB_DIR="$libdir" PKG_CONFIG=false CARGO_TARGET_DIR=$discovery cargo build --offline --quiet -p deepinfer-sys
if PKG_CONFIG=false CARGO_TARGET_DIR=$discovery cargo build --offline --quiet -p deepinfer-sys 2>$discovery.log; then
  echo "rust: the build succeeded without any way to find the library" >&2
  exit 1
fi
grep -q "apt-get install libdeepinfer-dev" $discovery.log && grep -q "DEEPINFER_LIB_DIR" $discovery.log ||
  { cat $discovery.log >&2; echo "rust: the failure does not say what to install or set" >&2; exit 1; }

step "package"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' deepinfer/Cargo.toml)
rm -rf $target/package
vendor=$target/package/vendor
resolve=()
if [ "$cargo_minor" -ge 90 ]; then
  # Cargo 1.90+ packages interdependent crates together: deepinfer is verified against the
  # packaged deepinfer-sys through a temporary local registry.
  cargo package --offline --allow-dirty --workspace
else
  # Older cargo resolves deepinfer's dependency on crates.io: serve the packaged deepinfer-sys
  # from a directory source instead, so that deepinfer is verified against it offline.
  cargo package --offline --allow-dirty -p deepinfer-sys
  mkdir -p $vendor
  tar -xzf $target/package/deepinfer-sys-$version.crate -C $vendor
  sum=$(sha256sum $target/package/deepinfer-sys-$version.crate | cut -d' ' -f1)
  printf '{"files":{},"package":"%s"}' "$sum" >$vendor/deepinfer-sys-$version/.cargo-checksum.json
  resolve=(--config 'source.crates-io.replace-with="packaged"' --config "source.packaged.directory=\"$(cd $vendor && pwd)\"")
  cargo package --offline --allow-dirty -p deepinfer "${resolve[@]}"
fi
for crate in deepinfer-sys deepinfer; do
  ls -l $target/package/$crate-$version.crate
  cargo package --offline --allow-dirty --list -p $crate "${resolve[@]}" | sed "s/^/  $crate: /"
done
echo "rust: all passed"
