"""What the SDK test scripts share: the stock SDK's providers with simple processors, the
stock OTLP exporters of a protocol, and an exporter wrapper that remembers each export's
result."""


def providers(protocol, endpoint, service):
    """A tracer provider and a logger provider for `service` exporting each span and log record
    by itself to `endpoint` over `protocol`, and the list every export's result goes to."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    span_exporter, log_exporter = exporters(protocol, endpoint)
    resource = Resource.create({"service.name": service})
    results = []
    tracing = TracerProvider(resource=resource)
    tracing.add_span_processor(SimpleSpanProcessor(Checked(span_exporter, results)))
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(Checked(log_exporter, results)))
    return tracing, logs, results


def exporters(protocol, endpoint):
    """The stock span and log exporters, unchanged but for the endpoint: `http` (OTLP/HTTP
    protobuf) or `grpc`."""
    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        return OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    # An https:// endpoint is TLS, trusting OTEL_EXPORTER_OTLP_CERTIFICATE when it is set.
    insecure = not endpoint.startswith("https://")
    return OTLPSpanExporter(endpoint=endpoint, insecure=insecure), OTLPLogExporter(endpoint=endpoint, insecure=insecure)


class Checked:
    """Wraps an exporter; appends the result of every export to `results`."""

    def __init__(self, inner, results):
        self.inner = inner
        self.results = results

    def export(self, batch):
        result = self.inner.export(batch)
        self.results.append(result)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True
