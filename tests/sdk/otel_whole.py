#!/usr/bin/env python3
"""Send one error trace, with everything an application puts on its spans, and two logs with
the standard OpenTelemetry Python SDK exporters, unchanged, to a Tayga ingest:
`otel_whole.py http|grpc ENDPOINT SERVICE`.

The trace: a root span with a typed attribute and two links (one to a trace sent just
before, one to a trace never sent), and a child span with an event of typed attributes and
an exception raised, caught and recorded (`span.record_exception`), in error. The logs: one
with a text body and typed attributes, one with a map body and an event name. Prints one
JSON document saying what it sent (ids, the exception's type, message and stack trace);
exits non-zero when an export fails. Used by tests/it/fidelity.rs."""
import json
import random
import sys
import traceback

from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

from otel_checked import providers

protocol, endpoint, service = sys.argv[1], sys.argv[2], sys.argv[3]
provider, logs, results = providers(protocol, endpoint, service)
tracer = provider.get_tracer("tayga-whole", "1.2.3")
logger = logs.get_logger("tayga-whole")

# The trace a link points at, sent first.
with tracer.start_as_current_span("publish orders") as producer:
    pass
never_sent = SpanContext(
    trace_id=random.getrandbits(128) | 1,
    span_id=random.getrandbits(64) | 1,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
)
links = [
    Link(producer.get_span_context(), {"messaging.operation": "receive"}),
    Link(never_sent, {"link.why": "never sent"}),
]
message = f"card declined for {service}"


def charge():
    raise ValueError(message)


def checkout():
    charge()


with tracer.start_as_current_span(
    "POST /checkout", links=links, attributes={"http.response.status_code": 402}
) as root:
    with tracer.start_as_current_span("charge card", record_exception=False, set_status_on_exception=False) as child:
        child.add_event("card.checked", {"card.brand": "visa", "attempt": 2, "ratio": 0.5, "tags": ["a", "b"]})
        try:
            checkout()  # raises two calls deep, so the stack trace has several frames
        except ValueError as error:
            stacktrace = traceback.format_exc()
            child.record_exception(error)
            child.set_status(Status(StatusCode.ERROR, message))
        logger.emit(
            body="payment failed",
            severity_number=SeverityNumber.ERROR,
            severity_text="ERROR",
            attributes={"order.id": 42, "retry": True},
        )
        logger.emit(
            body={"order": 42, "status": "declined", "items": ["a", "b"]},
            event_name="order.declined",
            severity_number=SeverityNumber.WARN,
        )

provider.shutdown()
logs.shutdown()
ok = all(getattr(r, "name", "") == "SUCCESS" for r in results)
hex_id = lambda v, width: format(v, f"0{width}x")
print(
    json.dumps(
        {
            "trace": hex_id(root.get_span_context().trace_id, 32),
            "spans": [hex_id(root.get_span_context().span_id, 16), hex_id(child.get_span_context().span_id, 16)],
            "error_span": hex_id(child.get_span_context().span_id, 16),
            "linked": {
                "trace": hex_id(producer.get_span_context().trace_id, 32),
                "span": hex_id(producer.get_span_context().span_id, 16),
            },
            "never_sent": {"trace": hex_id(never_sent.trace_id, 32), "span": hex_id(never_sent.span_id, 16)},
            "exception": {"type": "ValueError", "message": message, "stacktrace": stacktrace},
            "exports": len(results),
            "failed": [str(r) for r in results if getattr(r, "name", "") != "SUCCESS"],
        }
    )
)
sys.exit(0 if ok and len(results) == 5 else 1)
