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


def rust_strings(path, pattern):
    text = (ROOT / path).read_text()
    for m in re.finditer(pattern, text, re.S):
        yield bytes(m.group(1), "utf-8").decode("unicode_escape").encode("utf-8")


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    # otlp_http_decode: selector byte (bits 0-2 content type, 3-4 encoding, 7 logs) + body.
    for body in traces():
        write("otlp_http_decode", bytes([0x00]) + body)
        write("otlp_http_decode", bytes([0x08]) + gzip.compress(body))
        write("otlp_http_decode", bytes([0x00]) + body[: len(body) // 2])  # truncated
        write("otlp_split", b"\x00\x01\x00" + body)
        write("otlp_split", b"\x40\x00\x02" + body)
    for body in logs():
        write("otlp_http_decode", bytes([0x80]) + body)
        write("otlp_http_decode", bytes([0x88]) + gzip.compress(body))
        write("otlp_split", b"\x00\x01\x01" + body)
        write("otlp_split", b"\x20\x00\x03" + body)
    json_bodies = list(rust_strings("src/otlp/decode.rs", r'r#"(\{"resource.*?)"#'))
    json_bodies += list(rust_strings("tests/it/ingest_limits.rs", r'r#"(\{"resource.*?)"#'))
    json_bodies.append(b'{"resourceSpans": "no"}')
    json_bodies.append(b"[" * 200 + b"]" * 200)
    for body in json_bodies:
        write("otlp_http_decode", bytes([0x01]) + body)
        write("otlp_http_decode", bytes([0x81]) + body)
        write("otlp_http_decode", bytes([0x09]) + gzip.compress(body))
    write("otlp_http_decode", bytes([0x08]) + gzip.compress(b"\x00" * 100_000))  # a small bomb
    # masking: the masking tests' lines, and a custom glob line first.
    for line in rust_strings("src/mine/masking.rs", r'\bm\("((?:[^"\\]|\\.)*)"\)'):
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
    for t in sorted(os.listdir(SEEDS)):
        print(t, len(os.listdir(SEEDS / t)))


main()
