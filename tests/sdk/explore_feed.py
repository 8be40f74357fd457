#!/usr/bin/env python3
"""What the Explore browser test searches for, sent with the stock OpenTelemetry Python SDK
exporters (OTLP/HTTP) by a service with a `service.instance.id`:

  explore_feed.py seed ENDPOINT SERVICE TAG   ten numbered lines `step N of batch TAG` (attribute
      tenant=acme on even steps, globex on odd ones), one error line `checkout refused: card
      expired TAG` inside a span, three fast traces (20 ms) and two slow ones (800 ms, their
      times set, not slept); prints {"slow": [...], "fast": [...], "with_line": ID} as JSON.
  explore_feed.py line ENDPOINT SERVICE TEXT  one more line.

Exits non-zero when an export fails."""
import json
import logging
import sys
import time

from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import format_trace_id, set_span_in_context

from otel_checked import Checked, exporters

mode, endpoint, service, text = sys.argv[1:5]
resource = Resource.create({"service.name": service, "service.instance.id": "explore-1"})
span_exporter, log_exporter = exporters("http", endpoint)
results = []
tracing = TracerProvider(resource=resource)
tracing.add_span_processor(SimpleSpanProcessor(Checked(span_exporter, results)))
logs = LoggerProvider(resource=resource)
logs.add_log_record_processor(SimpleLogRecordProcessor(Checked(log_exporter, results)))
logger = logging.getLogger("explore")
logger.propagate = False
logger.addHandler(LoggingHandler(logger_provider=logs))
logger.setLevel(logging.INFO)
tracer = tracing.get_tracer("tayga-explore")
out = {}

if mode == "seed":
    for n in range(1, 11):
        logger.info("step %d of batch %s", n, text, extra={"tenant": "acme" if n % 2 == 0 else "globex"})
        # Distinct times, so the context's order is the order sent.
        time.sleep(0.005)
    with tracer.start_as_current_span("refuse") as span:
        logger.error("checkout refused: card expired %s", text, extra={"tenant": "acme"})
        out["with_line"] = format_trace_id(span.get_span_context().trace_id)
    now = time.time_ns()
    for kind, ms, count in (("fast", 20, 3), ("slow", 800, 2)):
        out[kind] = []
        for i in range(count):
            start = now - (i + 1) * 2_000_000_000
            root = tracer.start_span(f"{kind}-op", start_time=start)
            child = tracer.start_span("db", context=set_span_in_context(root), start_time=start + 1_000_000)
            child.end(end_time=start + ms * 1_000_000 - 1_000_000)
            root.end(end_time=start + ms * 1_000_000)
            out[kind].append(format_trace_id(root.get_span_context().trace_id))
elif mode == "line":
    logger.warning("%s", text)
else:
    sys.exit(f"unknown mode {mode}")

tracing.shutdown()
logs.shutdown()
ok = all(getattr(r, "name", "") == "SUCCESS" for r in results)
print(json.dumps(out))
sys.exit(0 if ok and results else 1)
