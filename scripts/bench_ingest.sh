#!/usr/bin/env bash
# Ingest throughput: spans per ingest CPU-second for OTLP/HTTP protobuf (10 spans per
# trace, 100 spans per request) against the local broker. Needs the local services
# (scripts/services.sh start). Prints a Markdown table row set for docs/ingest.md.
#   scripts/bench_ingest.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
cargo build --release --quiet --bin tayga
bin=target/release/tayga
prefix="bench_$$"
export TAYGA_KAFKA_TOPIC_PREFIX=$prefix TAYGA_CLICKHOUSE_DATABASE=$prefix
export TAYGA_INGEST_HTTP_ADDR=127.0.0.1:14318 TAYGA_INGEST_GRPC_ADDR=127.0.0.1:14317 TAYGA_LOG=warn
"$bin" serve ingest >/tmp/tayga-bench-ingest.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; curl -s "http://127.0.0.1:8123/?query=DROP+DATABASE+IF+EXISTS+$prefix" >/dev/null' EXIT
until curl -sf http://127.0.0.1:14318/health | grep -q '"using":"broker"'; do sleep 0.2; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
ticks_per_sec=$(getconf CLK_TCK)
for protocol in http grpc; do
  before=$(cpu_ticks)
  report=$("$bin" loadgen --protocol "$protocol" --endpoint "http://127.0.0.1:$([ "$protocol" = http ] && echo 14318 || echo 14317)" \
    --rate 0 --concurrency 8 --duration "$seconds" --traces-per-request 10 --spans-per-trace 10 --json)
  after=$(cpu_ticks)
  python3 - "$protocol" "$report" "$before" "$after" "$ticks_per_sec" <<'PY'
import json, sys
protocol, report, before, after, hz = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cpu = (after - before) / hz
print(f"| OTLP/{protocol} protobuf | {report['spans']:,} | {report['seconds']:.1f} | {report['spans_per_sec']:,.0f} | {cpu:.2f} | {report['spans'] / cpu:,.0f} | {sum(report['errors'].values())} |")
PY
done
