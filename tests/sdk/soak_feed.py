#!/usr/bin/env python3
"""The soak's OpenTelemetry SDK client (tests/it/soak.rs): the stock Python exporters,
unchanged, send a two-span trace and one log line every STEP seconds for SECONDS seconds:
`soak_feed.py http|grpc ENDPOINT SERVICE SECONDS STEP OUT`. Every export's outcome is
appended to OUT as it happens, one line each: `span OK|FAIL <trace hex> <span hex>` and
`log OK|FAIL <body>`, so the soak reconciles only what the exporter was acknowledged."""
import logging
import sys
import time

from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import set_span_in_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

protocol, endpoint, service, seconds, step, out_path = sys.argv[1:7]
seconds, step = float(seconds), float(step)
if protocol == "http":
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    span_exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10)
    log_exporter = OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=10)
else:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    span_exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10)
    log_exporter = OTLPLogExporter(endpoint=endpoint, insecure=True, timeout=10)

out = open(out_path, "a", buffering=1)


class Recorded:
    """Wraps an exporter; writes each item of every export with the export's outcome."""

    def __init__(self, inner, describe):
        self.inner, self.describe = inner, describe

    def export(self, batch):
        try:
            result = self.inner.export(batch)
        except Exception:  # an exporter that raises has not delivered the batch
            result = None
        # Span and log exporters answer with enums of their own (LogRecordExportResult in
        # newer SDKs): SUCCESS by name.
        ok = getattr(result, "name", "") == "SUCCESS"
        for item in batch:
            out.write(self.describe(item, "OK" if ok else "FAIL") + "\n")
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


def span_line(span, outcome):
    ctx = span.get_span_context()
    return f"span {outcome} {ctx.trace_id:032x} {ctx.span_id:016x}"


def log_line(data, outcome):
    record = getattr(data, "log_record", data)
    return f"log {outcome} {record.body}"


resource = Resource.create({"service.name": service})
provider = TracerProvider(resource=resource)
provider.add_span_processor(SimpleSpanProcessor(Recorded(span_exporter, span_line)))
tracer = provider.get_tracer("tayga-soak")
logs = LoggerProvider(resource=resource)
logs.add_log_record_processor(SimpleLogRecordProcessor(Recorded(log_exporter, log_line)))
logger = logging.getLogger("tayga-soak")
logger.propagate = False
logger.addHandler(LoggingHandler(logger_provider=logs))
logger.setLevel(logging.INFO)

start = time.monotonic()
i = 0
while time.monotonic() - start < seconds:
    # The spans' times are given, not read when each ends: the simple processor exports a
    # span synchronously as it ends, so a child's export waiting on a restarting ingest
    # would be part of its parent, and the endpoint would slow down for real (a
    # shape_slowdown the soak does not script).
    t0 = time.time_ns()
    parent = tracer.start_span("sdk-checkout", start_time=t0)
    child = tracer.start_span("sdk-charge", context=set_span_in_context(parent), start_time=t0 + 1_000)
    child.end(end_time=t0 + 2_000)
    parent.end(end_time=t0 + 3_000)
    logger.warning("sdk step %d charged card in %d ms", i, 10 + i % 90)
    i += 1
    next_at = start + i * step
    time.sleep(max(0.0, next_at - time.monotonic()))
provider.shutdown()
logs.shutdown()
