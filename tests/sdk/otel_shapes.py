#!/usr/bin/env python3
"""Send an endpoint's traffic with the standard OpenTelemetry Python SDK, unchanged, to a
Tayga ingest: `otel_shapes.py http|grpc ENDPOINT [recover SECONDS]`.

The endpoint is `shop` `GET /item`. For the 20 minutes before now (backdated, as the SDK
allows with explicit start and end times) it takes noisy conditional branches, 12 requests a
minute: a cache hit (60 %) or a miss that reads the database, an optional price quote
(15 %), and a fan-out of 1 to 4 recommendation fetches. In the last 3 minutes its most
frequent shape (a hit, no quote) is 20 times slower. Then, in the last 30 seconds, half the
requests take a new path (the database locks the item row) on a hit and on a miss, and one
request takes a rare new branch (an audit write) once. Prints one JSON document of what it
sent; exits non-zero when an export fails. Used by tests/it/logminer_shapes.rs."""
import json
import random
import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_checked import Checked, exporters

protocol, endpoint = sys.argv[1], sys.argv[2]
recover_secs = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "recover" else None
results = []
tracers = {}
providers = []
for service in ["shop", "cache", "db", "pricing", "reco", "audit"]:
    span_exporter, _ = exporters(protocol, endpoint)
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(Checked(span_exporter, results), schedule_delay_millis=200))
    providers.append(provider)
    tracers[service] = provider.get_tracer("tayga-shapes")

MS = 1_000_000
rng = random.Random(7)
now = time.time_ns()
sent = {"traces": 0, "slow": 0, "lock": 0, "rare": 0, "usual": 0, "last_slow_ns": 0}


def request(start, slow=False, lock=False, rare=False):
    root = tracers["shop"].start_span("GET /item", start_time=start)
    ctx = trace.set_span_in_context(root)
    cursor = start + MS

    def call(service, name, ms):
        nonlocal cursor
        span = tracers[service].start_span(name, context=ctx, start_time=cursor)
        cursor += ms * MS
        span.end(end_time=cursor)

    hit = rng.random() < 0.6
    quote = rng.random() < 0.15
    call("cache", "get", 2)
    if not hit:
        call("db", "SELECT item", 8)
    if lock:
        call("db", "SELECT item FOR UPDATE", 30)
    if quote:
        call("pricing", "quote", 5)
    for _ in range(rng.randint(1, 4)):
        call("reco", "fetch", 3)
    if rare:
        call("audit", "write", 2)
    if slow and hit and not quote and not lock:
        cursor += 400 * MS
        sent["slow"] += 1
        sent["last_slow_ns"] = max(sent["last_slow_ns"], start)
    elif hit and not quote and not lock:
        sent["usual"] += 1
    root.end(end_time=cursor + MS)
    sent["traces"] += 1


if recover_secs is None:
    for minutes_ago in range(20, 0, -1):
        for i in range(12):
            request(now - minutes_ago * 60_000_000_000 + i * 5_000_000_000, slow=minutes_ago <= 3)
    for i in range(12):
        lock = i % 2 == 0
        sent["lock"] += lock
        request(now - 30_000_000_000 + i * 2_000_000_000, slow=True, lock=lock)
    request(now - 5_000_000_000, rare=True)
    sent["rare"] = 1
else:
    # Real time: each request when it happens, so it falls in the pass's current window.
    for i in range(recover_secs * 2 // 5):
        time.sleep(max(0.0, (now + i * 2_500_000_000 - time.time_ns()) / 1e9))
        request(time.time_ns())

for provider in providers:
    provider.force_flush()
    provider.shutdown()
failed = [str(r) for r in results if getattr(r, "name", str(r)) != "SUCCESS"]
sent["exports"] = len(results)
sent["failed"] = failed
print(json.dumps(sent))
sys.exit(1 if failed or not results else 0)
