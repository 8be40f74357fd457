// Sends traces and logs to a Tayga ingest with the stock OpenTelemetry JavaScript SDK, its
// exporters unchanged: `node otel_send.mjs ENCODING ENDPOINT SERVICE COUNT [gzip]`, where
// ENCODING is `json` (OTLP/HTTP JSON), `proto` (OTLP/HTTP protobuf) or `grpc`.
//
// The Node HTTP exporters send every body chunked, without Content-Length, and a traces
// exporter and a logs exporter run side by side; simple processors export each span and
// each log line as its own request, all at once, so this is the client that found ingest
// refusing concurrent chunked bodies. It prints one JSON document: the trace ids, span ids
// and log bodies it sent, and every export's result; it exits 1 when an export failed.
import { trace, context } from "@opentelemetry/api";
import { logs as logsApi, SeverityNumber } from "@opentelemetry/api-logs";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { LoggerProvider, SimpleLogRecordProcessor } from "@opentelemetry/sdk-logs";

const [encoding, endpoint, service, countText, compressionArg] = process.argv.slice(2);
const count = Number(countText ?? "6");
const compression = compressionArg === "gzip" ? "gzip" : "none";

async function exporters() {
  if (encoding === "json") {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    const { OTLPLogExporter } = await import("@opentelemetry/exporter-logs-otlp-http");
    return [
      new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, compression }),
      new OTLPLogExporter({ url: `${endpoint}/v1/logs`, compression }),
    ];
  }
  if (encoding === "proto") {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-proto");
    const { OTLPLogExporter } = await import("@opentelemetry/exporter-logs-otlp-proto");
    return [
      new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, compression }),
      new OTLPLogExporter({ url: `${endpoint}/v1/logs`, compression }),
    ];
  }
  if (encoding === "grpc") {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-grpc");
    const { OTLPLogExporter } = await import("@opentelemetry/exporter-logs-otlp-grpc");
    return [
      new OTLPTraceExporter({ url: endpoint, compression }),
      new OTLPLogExporter({ url: endpoint, compression }),
    ];
  }
  throw new Error(`unknown encoding ${encoding}: json, proto or grpc`);
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

const [spanExporter, logExporter] = await exporters();
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
const tracer = tracerProvider.getTracer("tayga-node-test");
const logger = loggerProvider.getLogger("tayga-node-test");

const sent = { traces: [], spans: [], logs: [] };
for (let i = 0; i < count; i++) {
  const root = tracer.startSpan(`GET /orders/${i}`);
  const ctx = trace.setSpan(context.active(), root);
  const child = tracer.startSpan("SELECT orders", {}, ctx);
  child.setAttribute("db.rows", i);
  child.end();
  const body = `order ${i} shipped by ${service}`;
  logger.emit({ body, severityNumber: SeverityNumber.INFO, severityText: "INFO", context: ctx });
  root.end();
  sent.traces.push(root.spanContext().traceId);
  sent.spans.push(root.spanContext().spanId, child.spanContext().spanId);
  sent.logs.push(body);
}

await tracerProvider.shutdown();
await loggerProvider.shutdown();
const failed = results.filter((r) => r.code !== 0);
console.log(JSON.stringify({ ...sent, exports: results.length, failed }));
process.exit(failed.length === 0 ? 0 : 1);
