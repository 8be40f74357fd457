// What the SDK test clients share (otel_send.mjs, otel_whole.mjs): the stock SDK's tracer
// and logger providers with simple processors and the stock OTLP exporters of an encoding,
// each export's result recorded.
import { resourceFromAttributes } from "@opentelemetry/resources";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { LoggerProvider, SimpleLogRecordProcessor } from "@opentelemetry/sdk-logs";

// A tracer provider and a logger provider for `service`, exporting each span and each log
// record by itself to `endpoint`; `results` gathers every export's result.
export async function providers(encoding, endpoint, service, compression = "none") {
  const [spanExporter, logExporter] = await exporters(encoding, endpoint, compression);
  const results = [];
  const resource = resourceFromAttributes({ "service.name": service });
  const tracerProvider = new NodeTracerProvider({
    resource,
    spanProcessors: [new SimpleSpanProcessor(recorded(spanExporter, results))],
  });
  const loggerProvider = new LoggerProvider({
    resource,
    processors: [new SimpleLogRecordProcessor({ exporter: recorded(logExporter, results) })],
  });
  return { tracerProvider, loggerProvider, results };
}

// The traces and logs exporters of `encoding`: `json` (OTLP/HTTP JSON), `proto` (OTLP/HTTP
// protobuf) or `grpc`, unchanged but for the endpoint and compression (`none` or `gzip`).
async function exporters(encoding, endpoint, compression = "none") {
  const modules = {
    json: ["@opentelemetry/exporter-trace-otlp-http", "@opentelemetry/exporter-logs-otlp-http"],
    proto: ["@opentelemetry/exporter-trace-otlp-proto", "@opentelemetry/exporter-logs-otlp-proto"],
    grpc: ["@opentelemetry/exporter-trace-otlp-grpc", "@opentelemetry/exporter-logs-otlp-grpc"],
  }[encoding];
  if (!modules) throw new Error(`unknown encoding ${encoding}: json, proto or grpc`);
  const { OTLPTraceExporter } = await import(modules[0]);
  const { OTLPLogExporter } = await import(modules[1]);
  if (encoding === "grpc") {
    return [new OTLPTraceExporter({ url: endpoint, compression }), new OTLPLogExporter({ url: endpoint, compression })];
  }
  return [
    new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, compression }),
    new OTLPLogExporter({ url: `${endpoint}/v1/logs`, compression }),
  ];
}

// Records every export's result on its way through, so a failure is seen (the SDK itself
// only logs it).
function recorded(exporter, results) {
  return {
    export(items, done) {
      exporter.export(items, (result) => {
        results.push({ code: result.code, items: items.length, error: result.error ? String(result.error) : null });
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => (exporter.forceFlush ? exporter.forceFlush() : Promise.resolve()),
  };
}
