// Sends one error trace, with everything an application puts on its spans, and two logs to
// a Tayga ingest with the stock OpenTelemetry JavaScript SDK, its exporters unchanged:
// `node otel_whole.mjs ENCODING ENDPOINT SERVICE`, where ENCODING is `json` (OTLP/HTTP
// JSON), `proto` (OTLP/HTTP protobuf) or `grpc`.
//
// The trace: a root span with a typed attribute and two links (one to a trace sent just
// before, one to a trace never sent), and a child span with an event of typed attributes
// and a recorded exception (`span.recordException(new Error(..))`), in error. The logs: one
// with a text body and typed attributes, one with a map body and an event name. It prints
// one JSON document saying what it sent (ids, the exception's type, message and stack
// trace); it exits 1 when an export failed.
import { randomBytes } from "node:crypto";
import { trace, context, SpanStatusCode, TraceFlags } from "@opentelemetry/api";
import { SeverityNumber } from "@opentelemetry/api-logs";
import { providers } from "./sdk.mjs";

const [encoding, endpoint, service] = process.argv.slice(2);

const { tracerProvider, loggerProvider, results } = await providers(encoding, endpoint, service);
const tracer = tracerProvider.getTracer("tayga-whole", "1.2.3");
const logger = loggerProvider.getLogger("tayga-whole");

// The trace a link points at, sent first.
const producer = tracer.startSpan("publish orders");
producer.end();
const neverSent = { traceId: randomBytes(16).toString("hex"), spanId: randomBytes(8).toString("hex"), traceFlags: TraceFlags.SAMPLED };

const root = tracer.startSpan("POST /checkout", {
  attributes: { "http.response.status_code": 402 },
  links: [
    { context: producer.spanContext(), attributes: { "messaging.operation": "receive" } },
    { context: neverSent, attributes: { "link.why": "never sent" } },
  ],
});
const ctx = trace.setSpan(context.active(), root);
const child = tracer.startSpan("charge card", {}, ctx);
child.addEvent("card.checked", { "card.brand": "visa", attempt: 2, ratio: 0.5, tags: ["a", "b"] });
// Thrown two calls deep, so the stack trace has several frames.
function charge() {
  throw new Error(`card declined for ${service}`);
}
function checkout() {
  charge();
}
let error;
try {
  checkout();
} catch (caught) {
  error = caught;
}
// File paths relative to this folder, so a screenshot of the trace shows no machine's path.
error.stack = error.stack.replaceAll(new URL(".", import.meta.url).href, "./");
child.recordException(error);
child.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
child.end();
// The logs belong to the failed span, as a log written while it ran does.
const childCtx = trace.setSpan(ctx, child);
logger.emit({
  body: "payment failed",
  severityNumber: SeverityNumber.ERROR,
  severityText: "ERROR",
  attributes: { "order.id": 42, retry: true },
  context: childCtx,
});
logger.emit({
  body: { order: 42, status: "declined", items: ["a", "b"] },
  eventName: "order.declined",
  severityNumber: SeverityNumber.WARN,
  context: childCtx,
});
root.end();

await tracerProvider.shutdown();
await loggerProvider.shutdown();
const failed = results.filter((r) => r.code !== 0);
console.log(
  JSON.stringify({
    trace: root.spanContext().traceId,
    spans: [root.spanContext().spanId, child.spanContext().spanId],
    error_span: child.spanContext().spanId,
    linked: { trace: producer.spanContext().traceId, span: producer.spanContext().spanId },
    never_sent: { trace: neverSent.traceId, span: neverSent.spanId },
    exception: { type: error.name, message: error.message, stacktrace: error.stack },
    exports: results.length,
    failed,
  }),
);
process.exit(failed.length === 0 ? 0 : 1);
