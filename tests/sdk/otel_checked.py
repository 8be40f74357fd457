"""What the SDK test scripts share: the stock OTLP exporters of a protocol, and an exporter
wrapper that remembers each export's result."""


def exporters(protocol, endpoint):
    """The stock span and log exporters, unchanged but for the endpoint: `http` (OTLP/HTTP
    protobuf) or `grpc`."""
    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        return OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    return OTLPSpanExporter(endpoint=endpoint, insecure=True), OTLPLogExporter(endpoint=endpoint, insecure=True)


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
