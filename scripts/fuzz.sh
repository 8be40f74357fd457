#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ (docs/reliability.md): `scripts/fuzz.sh [--seconds N]
# [TARGET...]`, N seconds per target (default 30: the four targets in two minutes), every
# target when none is named. Needs the nightly toolchain; installs cargo-fuzz when it is
# missing (about 5 minutes). Each run starts from the committed seeds (fuzz/seeds/<target>,
# made from the tests by fuzz/make_seeds.py) and the corpus grown by earlier runs
# (target/fuzz-corpus/<target>, not committed). A crash stops the run with a non-zero exit;
# its input is in fuzz/artifacts/<target>/: add it as a regression test beside the code.
# Not part of scripts/test.sh or .ci/run: the nightly build of the crate alone takes longer
# on a fresh 2-core machine than the suite can spare.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(otlp_http_decode otlp_split masking config_load)

rustup toolchain list | grep -q '^nightly' || { echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2; exit 2; }
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked

cargo +nightly fuzz build --sanitizer none
for t in "${targets[@]}"; do
  corpus="$root/target/fuzz-corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz.sh: $t for ${seconds}s"
  cargo +nightly fuzz run --sanitizer none "$t" "$corpus" "$root/fuzz/seeds/$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
done
