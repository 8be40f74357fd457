#!/usr/bin/env bash
# The soak (docs/reliability.md): the whole pipeline as separate `tayga serve` processes on a
# ClickHouse 18.16 and a durable broker (nisshi on SQLite) of its own, fed by the harness's
# OTLP/HTTP client, `tayga loadgen` and the OpenTelemetry Python SDK, with faults on a
# schedule; at the end it reconciles what the clients were acknowledged and prints one table.
#   scripts/soak.sh [--minutes N]      (default 30)
# Exits non-zero, naming each discrepancy, when anything acknowledged is lost or doubled.
# The same harness runs as tests/it/soak.rs's short profile in the suite. Needs what
# scripts/test.sh installs (ClickHouse, nisshi, the OpenTelemetry SDK); the shared services
# are never touched. The table and every daemon's log are kept in /tmp/tayga-soak-*.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (use --minutes N)" >&2; exit 2 ;;
  esac
done

scripts/services.sh install
scripts/services.sh install-durable-broker
python3 -c 'import opentelemetry.exporter.otlp.proto.grpc' 2>/dev/null ||
  python3 -m pip install -q opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-grpc

TAYGA_SOAK_MINUTES="$minutes" TAYGA_SOAK_KEEP=1 \
  exec cargo test --locked --test it soak::soak -- --exact --ignored --nocapture
