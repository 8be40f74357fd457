#!/usr/bin/env python3
"""Execute SQL statements in chdb-core (an in-process current ClickHouse engine), to prove
that the DDL and queries Tayga runs on ClickHouse 18.16 also run on current releases.

Reads a JSON list of statements on stdin; runs them in order in a fresh database; prints
one line per statement and exits 1 if any failed. An item may also be an object
{"sql": "...", "expect": "..."}: the statement must then also return exactly `expect`
(its CSV output, surrounding whitespace stripped), e.g. to check what a query counts.
"""
import json
import sys
import tempfile

try:
    from chdb import session
except ImportError:
    sys.exit("chdb-core is not installed: python3 -m pip install chdb-core (scripts/test.sh does it)")

statements = json.load(sys.stdin)
with tempfile.TemporaryDirectory() as path:
    s = session.Session(path)
    version = str(s.query("SELECT version()")).strip()
    s.query("CREATE DATABASE IF NOT EXISTS tayga_check")
    s.query("USE tayga_check")
    failed = 0
    for i, item in enumerate(statements, 1):
        sql, expect = (item["sql"], item.get("expect")) if isinstance(item, dict) else (item, None)
        first = " ".join(sql.split())[:70]
        try:
            got = str(s.query(sql)).strip()
            if expect is not None and got != expect:
                failed += 1
                print(f"FAIL {i:3} {first}\n     returned {got!r}, expected {expect!r}")
                continue
            print(f"ok   {i:3} {first}")
        except Exception as e:  # chdb raises its own error type; report every failure
            failed += 1
            print(f"FAIL {i:3} {first}\n     {e}")
    print(f"chdb {version}: {len(statements) - failed} of {len(statements)} statements ran")
    sys.exit(1 if failed else 0)
