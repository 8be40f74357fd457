#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ (docs/reliability.md, *Fuzzing*): `scripts/fuzz.sh
# [--seconds N] [TARGET...]`, N seconds per target (default 30: the eight targets in four
# minutes), every target when none is named. Needs the nightly toolchain; installs
# cargo-fuzz when it is missing (about 5 minutes). Each run starts from the committed seeds
# (fuzz/seeds/<target>, made from the tests by fuzz/make_seeds.py), the kept crashes
# (fuzz/regressions/<target>) and the corpus grown by earlier runs (target/fuzz-corpus/<target>,
# not committed). A crash stops the run with a non-zero exit; its input is in
# fuzz/artifacts/<target>/: copy it into fuzz/regressions/<target>/, where the suite's
# stable replay (tests/it/fuzz_replay.rs, the same checks from tayga::fuzz_checks) keeps it.
# Not part of scripts/test.sh or .ci/run: a new machine has no nightly toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(otlp_http_decode otlp_split masking config_load otlp_grpc_request rowbinary_rows otlp_schema broker_answers)

rustup toolchain list | grep -q '^nightly' || { echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2; exit 2; }
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked

cargo +nightly fuzz build --sanitizer none
for t in "${targets[@]}"; do
  corpus="$root/target/fuzz-corpus/$t"
  mkdir -p "$corpus"
  echo "fuzz.sh: $t for ${seconds}s"
  kept="$root/fuzz/regressions/$t"
  mkdir -p "$kept"
  # broker_answers' RSS grows about 120 bytes a run without a leak of Tayga's: kafka-protocol
  # reserves what a garbage answer's array counts claim, and mimalloc keeps page-map blocks
  # for those reservations (docs/reliability.md, *Fuzzing*); 600 s of it pass 2 GB.
  rss=2048
  [ "$t" = broker_answers ] && rss=4096
  cargo +nightly fuzz run --sanitizer none "$t" "$corpus" "$root/fuzz/seeds/$t" "$kept" -- \
    -max_total_time="$seconds" -rss_limit_mb="$rss" -timeout=10 -print_final_stats=1
done
