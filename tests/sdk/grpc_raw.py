#!/usr/bin/env python3
"""Send raw bytes as an OTLP/gRPC trace export with grpcio (what the Python exporter is
built on) and print the status code the server answered: `grpc_raw.py ENDPOINT HEX` or
`grpc_raw.py ENDPOINT zeros:N` (N zero bytes). Used by tests/it/ingest_limits.rs."""
import sys

import grpc

endpoint, payload = sys.argv[1], sys.argv[2]
body = bytes(int(payload[6:])) if payload.startswith("zeros:") else bytes.fromhex(payload)
channel = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", 1 << 30)])
export = channel.unary_unary(
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    request_serializer=None,
    response_deserializer=None,
)
try:
    export(body, timeout=30)
    print("OK")
except grpc.RpcError as e:
    print(e.code().name)
