#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a developer's: installs what is missing
# (ClickHouse 18.16, the Tansu broker and the soak's durable one, Chromium and chromedriver
# for the web app's browser tests, chdb-core for the portability test, the stock
# OpenTelemetry Python SDK exporters
# for the ingest compatibility test and the JavaScript SDK for the Node.js one, the
# Standard Webhooks and Slack SDK verifiers for the notifier's payloads, schemathesis for
# the API's contract), starts the services that are not already answering, runs every
# test, and stops what it started.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh --test it cli::).
set -euo pipefail
cd "$(dirname "$0")/.."

svc=scripts/services.sh
started=()
cleanup() {
  for s in "${started[@]}"; do "$svc" "stop-$s" || true; done
}
trap cleanup EXIT

"$svc" install # ClickHouse, the broker and stunnel, Chromium + chromedriver, ZooKeeper
# The soak's durable broker (nisshi, built by cargo once per machine: about 12 minutes).
"$svc" install-durable-broker
python3 -c 'import chdb' 2>/dev/null || python3 -m pip install -q chdb-core
python3 -c 'import opentelemetry.exporter.otlp.proto.grpc, opentelemetry.exporter.otlp.proto.http' 2>/dev/null ||
  python3 -m pip install -q opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-grpc
# Webhook receivers' own verifiers, which judge the notifier's payloads.
python3 -c 'import standardwebhooks, slack_sdk' 2>/dev/null || python3 -m pip install -q standardwebhooks slack-sdk
# Schemathesis, the API fuzzer that holds the server to its OpenAPI document
# (tests/it/api_contract.rs); pinned, so its checks and the fixed seed find the same cases.
schemathesis_version=4.32.5
python3 -c "import schemathesis, sys; sys.exit(schemathesis.__version__ != '$schemathesis_version')" 2>/dev/null ||
  python3 -m pip install -q "schemathesis==$schemathesis_version"

# The OpenTelemetry JavaScript SDK, for the Node.js client tests: the versions
# tests/sdk/node/package-lock.json pins, in that folder only.
[ -d tests/sdk/node/node_modules/@opentelemetry ] ||
  (cd tests/sdk/node && npm ci --no-audit --no-fund --loglevel=error)

status=$("$svc" status)
grep -q '^clickhouse: up' <<<"$status" || { "$svc" start-clickhouse; started+=(clickhouse); }
grep -q '^broker: up' <<<"$status" || { "$svc" start-broker; started+=(broker); }

# The Loghub-2k sets cannot ship with Tayga (research use only): the mining-accuracy tests
# read them from TAYGA_LOGHUB_2K and say they did not run without it. A checkout with the
# data beside it (../shared/data/loghub2k) runs them.
if [ -z "${TAYGA_LOGHUB_2K:-}" ] && [ -d ../shared/data/loghub2k ]; then
  TAYGA_LOGHUB_2K=$(cd ../shared/data/loghub2k && pwd)
  export TAYGA_LOGHUB_2K
fi

cargo test --locked "$@"
