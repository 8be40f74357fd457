#!/usr/bin/env python3
"""What the same rows cost in current ClickHouse (chdb-core, in-process): copies tables of a
database on the ClickHouse 18.16 server into chdb twice, once with the DDL 18.16 has
(`SHOW CREATE TABLE`: every column LZ4, the server default) and once with per-column codecs
18.16 cannot declare, merges each (OPTIMIZE … FINAL) and prints, as JSON, the active parts'
rows and compressed and uncompressed bytes per table and variant. Used by the storage
section of scripts/bench.sh.

    scripts/storage_chdb.py --url http://127.0.0.1:8123 --database DB TABLE...

The codecs (docs/benchmarks.md says the same):
- a `*_ns` UInt64/Int64 column holding a time (not `duration_ns`): CODEC(Delta, ZSTD(1));
- a String column, or an Array(String) column's elements, with fewer than 10,000 distinct
  values in the copied rows: LowCardinality(String) (a dictionary per part), ZSTD(1);
- every other column: CODEC(ZSTD(1)).
"""
import argparse
import json
import os
import sys
import tempfile
import urllib.parse
import urllib.request

try:
    from chdb import session
except ImportError:
    sys.exit("chdb-core is not installed: python3 -m pip install chdb-core")

LOW_CARDINALITY_BELOW = 10_000


def ch(url, sql):
    req = urllib.request.Request(f"{url}/?" + urllib.parse.urlencode({"query": sql}), method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read()


def rows_json(url, sql):
    return [json.loads(line) for line in ch(url, sql + " FORMAT JSONEachRow").decode().splitlines() if line]


def codec_column(url, db, table, col):
    name, typ = col["name"], col["type"]
    default = f" {col['default_kind']} {col['default_expression']}" if col["default_kind"] else ""
    if name.endswith("_ns") and name != "duration_ns" and typ in ("UInt64", "Int64"):
        return f"`{name}` {typ}{default} CODEC(Delta, ZSTD(1))"
    if typ in ("String", "Array(String)") and not col["default_kind"]:
        expr = f"`{name}`" if typ == "String" else f"arrayJoin(`{name}`)"
        distinct = int(ch(url, f"SELECT uniq({expr}) FROM {db}.{table}").decode().strip() or 0)
        if distinct < LOW_CARDINALITY_BELOW:
            lc = "LowCardinality(String)" if typ == "String" else "Array(LowCardinality(String))"
            return f"`{name}` {lc}{default} CODEC(ZSTD(1))"
    return f"`{name}` {typ}{default} CODEC(ZSTD(1))"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default=os.environ.get("TAYGA_CLICKHOUSE_URL", "http://127.0.0.1:8123"))
    p.add_argument("--database", required=True)
    p.add_argument("tables", nargs="+")
    a = p.parse_args()
    out = {"version": None, "tables": {}}
    with tempfile.TemporaryDirectory() as path:
        s = session.Session(path)
        out["version"] = str(s.query("SELECT version()")).strip().strip('"')
        for variant in ("as_18_16", "codecs"):
            s.query(f"CREATE DATABASE IF NOT EXISTS {variant}")
        for table in a.tables:
            create = ch(a.url, f"SHOW CREATE TABLE {a.database}.{table} FORMAT TabSeparatedRaw").decode()
            engine = create[create.index(") ENGINE = ") + 2:]
            columns = rows_json(a.url, f"SELECT name, type, default_kind, default_expression FROM system.columns "
                                       f"WHERE database = '{a.database}' AND table = '{table}'")
            data = os.path.join(path, f"{table}.native")
            with open(data, "wb") as f:
                f.write(ch(a.url, f"SELECT * FROM {a.database}.{table} FORMAT Native"))
            plain = ", ".join(f"`{c['name']}` {c['type']}"
                              + (f" {c['default_kind']} {c['default_expression']}" if c["default_kind"] else "")
                              for c in columns)
            with_codecs = ", ".join(codec_column(a.url, a.database, table, c) for c in columns)
            names = ", ".join(f"`{c['name']}`" for c in columns if c["default_kind"] not in ("MATERIALIZED", "ALIAS"))
            out["tables"][table] = {}
            for variant, cols in (("as_18_16", plain), ("codecs", with_codecs)):
                s.query(f"CREATE TABLE {variant}.{table} ({cols}) {engine}")
                s.query(f"INSERT INTO {variant}.{table} ({names}) SELECT {names} FROM file('{data}', Native)")
                s.query(f"OPTIMIZE TABLE {variant}.{table} FINAL")
                got = json.loads(str(s.query(
                    f"SELECT sum(rows) AS rows, sum(data_compressed_bytes) AS compressed, "
                    f"sum(data_uncompressed_bytes) AS uncompressed FROM system.parts "
                    f"WHERE database = '{variant}' AND table = '{table}' AND active", "JSONEachRow")).strip())
                out["tables"][table][variant] = {k: int(v) for k, v in got.items()}
            out["tables"][table]["codecs_ddl"] = with_codecs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
