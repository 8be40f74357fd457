#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/seeds/<target>/) from the project's tests:
the OTLP shapes the ingest tests send (protobuf, JSON, gzip), the lines the masking tests
mask, the tayga.toml texts the config tests load. Run from anywhere; rewrites the seeds."""
import gzip, hashlib, os, re, shutil, pathlib

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue, AnyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"


def write(target, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def resource(service):
    return Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service))])


def traces():
    out = []
    r = ExportTraceServiceRequest()
    rs = r.resource_spans.add(resource=resource("checkout"))
    ss = rs.scope_spans.add()
    for t in range(3):
        for s in range(2):
            sp = ss.spans.add(trace_id=bytes([t + 1]) * 16, span_id=bytes([t + 1, s + 1]) * 4,
                              name=f"op{s}", start_time_unix_nano=1_700_000_000_000_000_000,
                              end_time_unix_nano=1_700_000_000_500_000_000)
            if s:
                sp.parent_span_id = bytes([t + 1, 1]) * 4
            sp.attributes.add(key="http.status", value=AnyValue(int_value=200 + s))
    out.append(r.SerializeToString())
    bad = ExportTraceServiceRequest()
    ss = bad.resource_spans.add(resource=resource("web")).scope_spans.add()
    ss.spans.add(trace_id=b"\x01\x02\x03", span_id=b"\x01" * 8, name="short-trace-id")
    ss.spans.add(trace_id=b"\x00" * 16, span_id=b"\x02" * 8, name="zero-trace-id",
                 start_time_unix_nano=2**64 - 1)
    ss.spans.add(trace_id=b"\x05" * 16, span_id=b"\x03" * 8, name="x" * 3000)
    out.append(bad.SerializeToString())
    return out


def logs():
    r = ExportLogsServiceRequest()
    for svc in ("api", "db"):
        sl = r.resource_logs.add(resource=resource(svc)).scope_logs.add()
        for i in range(3):
            lr = sl.log_records.add(time_unix_nano=1_700_000_000_000_000_000 + i,
                                    body=AnyValue(string_value=f"user {i} logged in from 10.0.0.{i}"))
            if i == 1:
                lr.trace_id = b"\x07" * 16
                lr.span_id = b"\x08" * 8
            lr.attributes.add(key="k", value=AnyValue(double_value=0.5))
    return [r.SerializeToString()]


def rich():
    """A trace request and a logs request with every kind of field and value."""
    from opentelemetry.proto.common.v1.common_pb2 import ArrayValue, KeyValueList, InstrumentationScope
    from opentelemetry.proto.trace.v1.trace_pb2 import Status
    def attrs(target):
        target.add(key="s", value=AnyValue(string_value="v"))
        target.add(key="b", value=AnyValue(bool_value=True))
        target.add(key="i", value=AnyValue(int_value=-3))
        target.add(key="d", value=AnyValue(double_value=1.5))
        target.add(key="y", value=AnyValue(bytes_value=b"\x00\xff"))
        target.add(key="a", value=AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(
            kvlist_value=KeyValueList(values=[KeyValue(key="x", value=AnyValue(string_value="y"))]))])))
        target.add(key="none", value=AnyValue())
    t = ExportTraceServiceRequest()
    rs = t.resource_spans.add(resource=resource("svc"), schema_url="r")
    attrs(rs.resource.attributes)
    ss = rs.scope_spans.add(scope=InstrumentationScope(name="lib", version="1.0"), schema_url="s")
    attrs(ss.scope.attributes)
    sp = ss.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x03" * 8, name="GET /",
                      kind=2, start_time_unix_nano=5, end_time_unix_nano=9, flags=1, trace_state="k=v",
                      status=Status(code=2, message="m"), dropped_attributes_count=1)
    attrs(sp.attributes)
    ev = sp.events.add(time_unix_nano=6, name="exception")
    attrs(ev.attributes)
    ln = sp.links.add(trace_id=b"\x04" * 16, span_id=b"\x05" * 8, flags=7)
    attrs(ln.attributes)
    lg = ExportLogsServiceRequest()
    rl = lg.resource_logs.add(resource=resource("svc"))
    sl = rl.scope_logs.add(scope=InstrumentationScope(name="lib"))
    lr = sl.log_records.add(time_unix_nano=0, observed_time_unix_nano=7, severity_number=17, severity_text="ERROR",
                            trace_id=b"\x01" * 16, span_id=b"\x02" * 8, event_name="e",
                            body=AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="m", value=AnyValue(string_value="x"))])))
    attrs(lr.attributes)
    return t, lg


def grpc_frame(message, compressed=False):
    return bytes([1 if compressed else 0]) + len(message).to_bytes(4, "big") + message


# Kafka answers, encoded from the protocol's message definitions (kafka-protocol only
# decodes answers): ints big-endian, non-flexible (int16/int32 lengths) or flexible
# (unsigned varints of length + 1, a tagged-field count closing each struct).
def i8(v): return v.to_bytes(1, "big", signed=True)
def i16(v): return v.to_bytes(2, "big", signed=True)
def i32(v): return v.to_bytes(4, "big", signed=True)
def i64(v): return v.to_bytes(8, "big", signed=True)
def uvarint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
def string(s, flexible=False):
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else i16(len(b))) + b
def array(items, flexible=False):
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)
TAGS = uvarint(0)


def produce_answer(version, partitions, correlation=7):
    flexible = version >= 9
    parts = []
    for index, code in partitions:
        p = i32(index) + i16(code) + i64(42) + i64(-1)
        if version >= 5:
            p += i64(0)
        if version >= 8:
            p += array([], flexible) + string(None, flexible)
        parts.append(p + (TAGS if flexible else b""))
    topic = string("tayga-signals", flexible) + array(parts, flexible) + (TAGS if flexible else b"")
    body = array([topic], flexible) + i32(0) + (TAGS if flexible else b"")
    return i32(correlation) + (TAGS if flexible else b"") + body


def metadata_answer(version, partitions, correlation=7):
    flexible = version >= 9
    t = TAGS if flexible else b""
    broker = i32(1) + string("127.0.0.1", flexible) + i32(9092) + string(None, flexible) + t
    parts = []
    for index, code, leader in partitions:
        p = i16(code) + i32(index) + i32(leader)
        if version >= 7:
            p += i32(0)
        p += array([i32(1)], flexible) + array([i32(1)], flexible)
        if version >= 5:
            p += array([], flexible)
        parts.append(p + t)
    topic = i16(0) + string("tayga-signals", flexible)
    if version >= 10:
        topic += b"\x00" * 16
    topic += i8(0) + array(parts, flexible)
    if version >= 8:
        topic += i32(-2147483648)
    topic += t
    missing = i16(3) + string("nope", flexible) + (b"\x00" * 16 if version >= 10 else b"") + i8(0) + array([], flexible)
    if version >= 8:
        missing += i32(-2147483648)
    missing += t
    body = i32(0) + array([broker], flexible) + string("cluster", flexible) + i32(1) + array([topic, missing], flexible)
    if 8 <= version <= 10:
        body += i32(-2147483648)
    return i32(correlation) + t + body + t


def rust_strings(path, pattern):
    text = (ROOT / path).read_text()
    for m in re.finditer(pattern, text, re.S):
        yield bytes(m.group(1), "utf-8").decode("unicode_escape").encode("utf-8")


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    # otlp_http_decode: selector byte (bits 0-2 content type, 3-4 encoding, 7 logs) + body.
    for body in traces():
        write("otlp_http_decode", bytes([0x00]) + body)
        write("otlp_http_decode", bytes([0x08]) + gzip.compress(body, mtime=0))
        write("otlp_http_decode", bytes([0x00]) + body[: len(body) // 2])  # truncated
        write("otlp_split", b"\x00\x01\x00" + body)
        write("otlp_split", b"\x40\x00\x02" + body)
    for body in logs():
        write("otlp_http_decode", bytes([0x80]) + body)
        write("otlp_http_decode", bytes([0x88]) + gzip.compress(body, mtime=0))
        write("otlp_split", b"\x00\x01\x01" + body)
        write("otlp_split", b"\x20\x00\x03" + body)
    json_bodies = list(rust_strings("src/otlp/decode.rs", r'r#"(\{"resource.*?)"#'))
    json_bodies += list(rust_strings("tests/it/ingest_limits.rs", r'r#"(\{"resource.*?)"#'))
    json_bodies.append(b'{"resourceSpans": "no"}')
    json_bodies.append(b"[" * 200 + b"]" * 200)
    for body in json_bodies:
        write("otlp_http_decode", bytes([0x01]) + body)
        write("otlp_http_decode", bytes([0x81]) + body)
        write("otlp_http_decode", bytes([0x09]) + gzip.compress(body, mtime=0))
    write("otlp_http_decode", bytes([0x08]) + gzip.compress(b"\x00" * 100_000, mtime=0))  # a small bomb
    # masking: the masking tests' lines, and a custom glob line first.
    for line in rust_strings("src/mine/masking/tests.rs", r'\bm\("((?:[^"\\]|\\.)*)"\)'):
        write("masking", line)
    write("masking", b"TCK-*\nclosed (TCK-1234), job 5")
    write("masking", b"*.log\nwrote /var/log/a.log in 12 ms")
    # config_load: the config tests' files, and one with an environment after a NUL.
    for path in ("src/config/mod.rs", "tests/it/cli.rs"):
        for text in rust_strings(path, r'"(\[(?:[^"\\]|\\.)*)"'):
            if b"\n" in text:
                write("config_load", text)
    write("config_load", b"[kafka]\nbrokers = \"b:9092\"\n\0TAYGA_KAFKA_BROKERS=x:1\nTAYGA_NOPE=1\n")
    write("config_load", b"\0TAYGA_LOGMINER_TICK_SECS=abc\nTAYGA_INGEST_MAX_BODY_BYTES=0\n")
    # otlp_grpc_request: selector (bit 0 logs, bits 1-2 grpc-encoding, bit 3 a small limit,
    # bits 4-7 the record limit), the cut, the body of gRPC frames.
    rich_traces, rich_logs = rich()
    for signal, bodies in ((0, traces() + [rich_traces.SerializeToString()]), (1, logs() + [rich_logs.SerializeToString()])):
        for body in bodies:
            write("otlp_grpc_request", bytes([0x60 | signal, 3]) + grpc_frame(body))
            write("otlp_grpc_request", bytes([0x62 | signal, 40]) + grpc_frame(gzip.compress(body, mtime=0), True))
        body = bodies[0]
        write("otlp_grpc_request", bytes([0x24 | signal, 0]) + grpc_frame(body))  # identity
        write("otlp_grpc_request", bytes([0x66 | signal, 9]) + grpc_frame(gzip.compress(body, mtime=0), True))  # br
        write("otlp_grpc_request", bytes([0x68 | signal, 9]) + grpc_frame(body))  # over a small limit
        write("otlp_grpc_request", bytes([0x60 | signal, 7]) + grpc_frame(body) + grpc_frame(b""))  # two frames
        write("otlp_grpc_request", bytes([0x60 | signal, 2]) + grpc_frame(body)[:-3])  # truncated
        write("otlp_grpc_request", bytes([0x60 | signal, 1]) + grpc_frame(body, True))  # flag, no encoding
        write("otlp_grpc_request", bytes([0x6a | signal, 5]) + grpc_frame(gzip.compress(b"\x00" * 5000, mtime=0), True))
    write("otlp_grpc_request", b"\x00\x00")
    # rowbinary_rows: selector (bit 0 logs, the rest the ingest time) + a record.
    for body in traces() + [rich_traces.SerializeToString()]:
        write("rowbinary_rows", b"\x10" + body)
    for body in logs() + [rich_logs.SerializeToString()]:
        write("rowbinary_rows", b"\x11" + body)
    # A span whose status comes twice (prost merges them; the fast path defers).
    doubled = bytearray(rich_traces.SerializeToString())
    status_twice = bytes([(15 << 3) | 2, 2, 0x18, 0x02, (15 << 3) | 2, 3, 0x12, 0x01, ord("m")])
    from opentelemetry.proto.trace.v1.trace_pb2 import Span
    span = Span(name="x").SerializeToString() + status_twice
    scope = bytes([0x12]) + bytes([len(span)]) + span
    rs = bytes([0x12]) + bytes([len(scope)]) + scope
    write("rowbinary_rows", b"\x00" + bytes([0x0a, len(rs)]) + rs)
    # otlp_schema: selector 0 traces, 1 logs, 4 * i + 2 message i of fuzz_checks' list.
    for body in traces() + [rich_traces.SerializeToString()]:
        write("otlp_schema", b"\x00" + body)
    for body in logs() + [rich_logs.SerializeToString()]:
        write("otlp_schema", b"\x01" + body)
    rs = rich_traces.resource_spans[0]
    sp = rs.scope_spans[0].spans[0]
    rl = rich_logs.resource_logs[0]
    inner = [(1, rs), (2, rs.scope_spans[0]), (3, sp), (4, sp.events[0]), (5, sp.links[0]), (6, sp.status),
             (8, rl), (9, rl.scope_logs[0]), (10, rl.scope_logs[0].log_records[0]), (11, rs.resource),
             (13, rs.scope_spans[0].scope), (14, sp.attributes[5]), (15, sp.attributes[5].value),
             (16, sp.attributes[5].value.array_value), (17, rl.scope_logs[0].log_records[0].body.kvlist_value)]
    for i, message in inner:
        write("otlp_schema", bytes([4 * i + 2]) + message.SerializeToString())
    # broker_answers: which answer (0 produce, 1 metadata, 2 ApiVersions, 3 InitProducerId,
    # 4 SaslHandshake, 5 SaslAuthenticate), the version byte, then the answer.
    for v in (3, 5, 8, 9):
        write("broker_answers", bytes([0, v - 3]) + produce_answer(v, [(0, 0), (1, 6), (2, 45), (3, 45 + 1)]))
        write("broker_answers", bytes([0, v - 3]) + produce_answer(v, [(0, 10), (1, 47), (2, 87)]))
    for v in (4, 5, 7, 8, 9, 10):
        write("broker_answers", bytes([1, v - 4]) + metadata_answer(v, [(0, 0, 1), (1, 0, 2), (2, 5, -1)]))
    write("broker_answers", b"\x02\x00" + i32(7) + i16(0) + array([i16(0) + i16(3) + i16(9), i16(3) + i16(4) + i16(12)]))
    write("broker_answers", b"\x03\x00" + i32(7) + i32(0) + i16(0) + i64(1000) + i16(0))
    write("broker_answers", b"\x04\x00" + i32(7) + i16(33) + array([string("PLAIN"), string("SCRAM-SHA-256")]))
    write("broker_answers", b"\x05\x00" + i32(7) + i16(58) + string("Authentication failed") + i32(0))
    write("broker_answers", b"\x00\x00" + i32(8) + i32(0))  # another request's answer
    for t in sorted(os.listdir(SEEDS)):
        print(t, len(os.listdir(SEEDS / t)))


main()
