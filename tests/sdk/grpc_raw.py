#!/usr/bin/env python3
"""Send raw bytes as an OTLP/gRPC export with grpcio (what the Python exporter is built on)
and print the status code the server answered: `grpc_raw.py ENDPOINT HEX [METHOD]` or
`grpc_raw.py ENDPOINT zeros:N [METHOD]` (N zero bytes). METHOD defaults to the trace
export; when given, the status's message follows the code (`CODE: message`). Used by
tests/it/ingest_limits.rs and tests/it/ingest_clients.rs."""
import sys

import grpc

endpoint, payload = sys.argv[1], sys.argv[2]
method = sys.argv[3] if len(sys.argv) > 3 else None
body = bytes(int(payload[6:])) if payload.startswith("zeros:") else bytes.fromhex(payload)
channel = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", 1 << 30)])
export = channel.unary_unary(
    method or "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    request_serializer=None,
    response_deserializer=None,
)
try:
    export(body, timeout=30)
    print("OK")
except grpc.RpcError as e:
    print(f"{e.code().name}: {e.details()}" if method else e.code().name)
