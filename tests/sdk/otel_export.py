#!/usr/bin/env python3
"""Send one trace and one log with the standard OpenTelemetry Python SDK exporters, unchanged,
to a Tayga ingest: `otel_export.py http|grpc ENDPOINT SERVICE`. Exits non-zero when an export
fails. Used by tests/it/ingest.rs to prove that stock exporters work against Tayga."""
import logging
import sys

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggingHandler
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_checked import providers

protocol, endpoint, service = sys.argv[1], sys.argv[2], sys.argv[3]
provider, logs, results = providers(protocol, endpoint, service)
tracer = provider.get_tracer("tayga-test")
with tracer.start_as_current_span("checkout") as parent:
    with tracer.start_as_current_span("charge-card"):
        pass

logger = logging.getLogger("tayga-test")
logger.propagate = False
logger.addHandler(LoggingHandler(logger_provider=logs))
logger.setLevel(logging.INFO)
with tracer.start_as_current_span("with-log"):
    logger.warning("payment declined for order %s", 42)

provider.shutdown()
logs.shutdown()
ok = all(r in (SpanExportResult.SUCCESS,) or getattr(r, "name", "") == "SUCCESS" for r in results)
print(f"{len(results)} exports, {'all succeeded' if ok else 'some failed'}: {results}")
sys.exit(0 if ok and len(results) == 4 else 1)
