#!/usr/bin/env python3
"""Send TRACES traces of 3 spans each with the stock OpenTelemetry Python SDK and its
SimpleSpanProcessor (one export request per span, sent the moment the span ends), over
OTLP/HTTP: `otel_simple_traces.py ENDPOINT SERVICE TRACES`. Prints each trace id (hex) on a
line; exits non-zero when an export fails. Used by tests/it/ingest_backlog.rs: a client that
sends as soon as ingest listens."""
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from otel_checked import Checked

endpoint, service, traces = sys.argv[1], sys.argv[2], int(sys.argv[3])
results = []

provider = TracerProvider(resource=Resource.create({"service.name": service}))
provider.add_span_processor(SimpleSpanProcessor(Checked(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), results)))
tracer = provider.get_tracer("tayga-test")
ids = []
for i in range(traces):
    with tracer.start_as_current_span("checkout") as root:
        with tracer.start_as_current_span("charge-card"):
            pass
        with tracer.start_as_current_span("ship"):
            pass
        ids.append(format(root.get_span_context().trace_id, "032x"))
provider.shutdown()
for trace_id in ids:
    print(trace_id)
ok = len(results) == 3 * traces and all(r == SpanExportResult.SUCCESS for r in results)
if not ok:
    print(f"exports: {results}", file=sys.stderr)
sys.exit(0 if ok else 1)
