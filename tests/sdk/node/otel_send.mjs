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
import { providers } from "./sdk.mjs";

const [encoding, endpoint, service, countText, compressionArg] = process.argv.slice(2);
const count = Number(countText ?? "6");
const compression = compressionArg === "gzip" ? "gzip" : "none";

const { tracerProvider, loggerProvider, results } = await providers(encoding, endpoint, service, compression);
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
