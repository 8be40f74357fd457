#!/usr/bin/env python3
"""`tayga mine` against Drain3 (default configuration) on the same file, in the same run,
per CPU-second: N alternating rounds after one warm-up round, each round's figures kept,
the median and the interquartile range printed.

Usage:
  scripts/drain3_compare.py [--tayga PATH] [--rounds N] [--one-core] [--json] FILE
  scripts/drain3_compare.py --make-loghub DIR OUT
  scripts/drain3_compare.py --make-synthetic LINES OUT
  scripts/drain3_compare.py --make-100k MESSAGES OUT

  --tayga PATH        the tayga binary (default: $CARGO_TARGET_DIR/release/tayga, else
                      target/release/tayga); run as `PATH mine FILE --templates`, with and
                      without `--no-memo`
  --rounds N          measured rounds (default 10), after one warm-up round; the three
                      miners take turns within a round, in an order that rotates
  --one-core          pin this process, Drain3 and every tayga it starts to one CPU
  --json              print the figures as one JSON object
  --make-loghub D O   write O: the messages (the Content column) of every
                      D/<set>/<set>_2k.log_structured.csv, concatenated and shuffled with
                      a fixed seed: real logs of eight systems, no line repeated on purpose
  --make-synthetic N O  write O: N lines of a made-up service fleet's log, about sixty
                      kinds of line whose values keep changing (ids, addresses, users,
                      durations, sizes, paths, pod names), kinds drawn with skewed
                      frequencies, seeded
  --make-100k M O     write O: the messages of M repeated and varied to 100,000 lines
                      (every digit run replaced by a random one of the same length, seeded)

Drain3 runs in this process with TemplateMiner() and no persistence (its defaults:
sim_th 0.4, depth 4, max_children 100, no masking); its CPU time is this process's
(time.process_time) over the add_log_message loop on lines already in memory. Tayga's is
the child's user + system time (getrusage), the whole command: start, reading the file,
masking on two threads, mining and printing its templates. Needs `pip install drain3`.
"""
import argparse
import csv
import glob
import json
import logging
import os
import random
import re
import resource
import statistics
import string
import subprocess
import sys
import time


def make_100k(messages, out, n=100_000, seed=5):
    rng = random.Random(seed)
    with open(messages, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    digits = re.compile(r"\d+")
    with open(out, "w", encoding="utf-8") as f:
        for i in range(n):
            line = lines[i % len(lines)]
            if i >= len(lines):
                line = digits.sub(lambda m: "".join(rng.choice("0123456789") for _ in m.group()), line)
            f.write(line + "\n")


def make_loghub(root, out, seed=11):
    lines = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*_2k.log_structured.csv"))):
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            lines += [row["Content"].replace("\n", " ") for row in csv.DictReader(f) if row.get("Content", "").strip()]
    if not lines:
        sys.exit(f"no */*_2k.log_structured.csv under {root}")
    random.Random(seed).shuffle(lines)
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(l + "\n" for l in lines)


def make_synthetic(n, out, seed=17):
    """A fleet's log: each kind of line a template with values that change on every line."""
    rng = random.Random(seed)
    users = [f"{rng.choice(['alice', 'bob', 'carol', 'dan', 'erin', 'svc', 'batch'])}{rng.randrange(10_000)}" for _ in range(5_000)]
    hosts = [f"{rng.choice(['web', 'db', 'cache', 'queue', 'auth'])}-{rng.randrange(200):03d}.{rng.choice(['eu', 'us', 'ap'])}.internal" for _ in range(600)]
    tables = ["orders", "payments", "users", "sessions", "items", "carts", "invoices", "events"]
    verbs = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    routes = ["/api/v1/items/{}", "/api/v1/users/{}/orders", "/checkout/{}", "/static/js/app.{}.js", "/health", "/api/v2/search"]

    def ip():
        return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"

    def hexid(k=16):
        return "".join(rng.choice("0123456789abcdef") for _ in range(k))

    def uuid():
        h = hexid(32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def pod():
        return f"{rng.choice(['checkout', 'cart', 'search', 'payments'])}-{hexid(10)}-{''.join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))}"

    def ms():
        return f"{rng.expovariate(1 / 40):.2f}"

    def ts():
        return f"2026-12-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z"

    def route():
        return rng.choice(routes).format(rng.randrange(1_000_000))

    kinds = [
        lambda: f"{rng.choice(verbs)} {route()} {rng.choice([200, 200, 200, 201, 204, 304, 400, 404, 500])} {ms()}ms from {ip()}",
        lambda: f"request {uuid()} served in {ms()} ms by {pod()}",
        lambda: f"user {rng.choice(users)} logged in from {ip()} using {rng.choice(['password', 'sso', 'token'])}",
        lambda: f"user {rng.choice(users)} logged out after {rng.randrange(1, 7200)} s",
        lambda: f"session {hexid(24)} expired for user {rng.choice(users)}",
        lambda: f"cache miss for key {rng.choice(tables)}:{rng.randrange(10_000_000)} on {rng.choice(hosts)}",
        lambda: f"cache hit ratio {rng.random():.3f} over last {rng.randrange(10, 600)} s",
        lambda: f"query on {rng.choice(tables)} took {ms()} ms rows={rng.randrange(10_000)}",
        lambda: f"slow query on {rng.choice(tables)}: {rng.randrange(1000, 30000)} ms, plan {hexid(8)}",
        lambda: f"connection to {rng.choice(hosts)}:{rng.choice([5432, 6379, 9092, 8123])} established in {ms()} ms",
        lambda: f"connection to {rng.choice(hosts)}:{rng.choice([5432, 6379, 9092])} lost: {rng.choice(['timeout', 'reset by peer', 'refused'])}",
        lambda: f"retrying {rng.choice(['charge', 'refund', 'capture'])} for order {rng.randrange(10**9)} attempt {rng.randrange(1, 6)} of 5",
        lambda: f"payment {uuid()} authorized amount={rng.randrange(100, 100000) / 100:.2f} {rng.choice(['EUR', 'USD', 'GBP'])}",
        lambda: f"payment {uuid()} declined: {rng.choice(['insufficient funds', 'card expired', 'fraud suspected'])}",
        lambda: f"order {rng.randrange(10**9)} shipped to {rng.choice(['DE', 'FR', 'US', 'JP', 'BR'])} via {rng.choice(['dhl', 'ups', 'fedex'])} tracking {hexid(12).upper()}",
        lambda: f"worker {rng.randrange(64)} picked job {uuid()} from queue {rng.choice(['emails', 'exports', 'thumbnails'])}",
        lambda: f"job {uuid()} finished in {ms()} ms status={rng.choice(['ok', 'ok', 'ok', 'failed'])}",
        lambda: f"uploaded {rng.randrange(1, 50_000_000)} bytes to s3://bucket-{rng.randrange(20)}/{hexid(8)}/{hexid(8)}.bin",
        lambda: f"GC pause {ms()} ms heap {rng.randrange(100, 4000)}MB -> {rng.randrange(50, 2000)}MB",
        lambda: f"pod {pod()} restarted, exit code {rng.choice([0, 1, 137, 143])}",
        lambda: f"scheduled pod {pod()} on node {rng.choice(hosts)}",
        lambda: f"certificate for {rng.choice(hosts)} expires in {rng.randrange(1, 90)} days",
        lambda: f"rate limit exceeded for api key {hexid(20)} ({rng.randrange(100, 10000)} req/min)",
        lambda: f"feature flag {rng.choice(['new-checkout', 'dark-mode', 'search-v2'])} evaluated to {rng.choice(['true', 'false'])} for {rng.choice(users)}",
        lambda: f"kafka consumer lag {rng.randrange(0, 100000)} on partition {rng.randrange(12)} of topic {rng.choice(['orders', 'events', 'logs'])}",
        lambda: f"committed offset {rng.randrange(10**8)} for partition {rng.randrange(12)}",
        lambda: f"deadlock detected on table {rng.choice(tables)}, transaction {rng.randrange(10**7)} rolled back",
        lambda: f"email sent to {rng.choice(users)}@example.com template={rng.choice(['welcome', 'receipt', 'reset'])} id={hexid(12)}",
        lambda: f"webhook delivery to https://hooks.example.com/{hexid(10)} returned {rng.choice([200, 202, 500, 503])} in {ms()} ms",
        lambda: f"disk usage on {rng.choice(hosts)} at {rng.randrange(40, 99)}% ({rng.randrange(10, 900)}G free)",
        lambda: f"{ts()} checkpoint complete: wrote {rng.randrange(100, 100000)} buffers ({rng.random() * 10:.1f}%)",
        lambda: f"thread pool {rng.choice(['io', 'cpu', 'blocking'])} size {rng.randrange(4, 256)} active {rng.randrange(0, 256)} queued {rng.randrange(0, 10000)}",
        lambda: f"token refresh for client {hexid(16)} succeeded, ttl {rng.randrange(60, 86400)}s",
        lambda: f"invalid token from {ip()}: {rng.choice(['signature mismatch', 'expired', 'malformed'])}",
        lambda: f"search query {rng.choice(['shoes', 'red dress', 'laptop 16gb', 'gift card'])!r} returned {rng.randrange(0, 5000)} hits in {ms()} ms",
        lambda: f"inventory for sku {hexid(6).upper()}-{rng.randrange(100)} dropped to {rng.randrange(0, 50)}",
        lambda: f"price update for {rng.randrange(1, 5000)} items applied in {ms()} ms",
        lambda: f"backup of {rng.choice(tables)} completed: {rng.randrange(1, 100000)} MB in {rng.randrange(1, 3600)} s",
        lambda: f"dns lookup for {rng.choice(hosts)} took {ms()} ms ({ip()})",
        lambda: f"tls handshake with {ip()}:{rng.randrange(1024, 65535)} failed: {rng.choice(['unknown ca', 'bad certificate', 'protocol version'])}",
    ]
    # Skewed: a few kinds are most of the lines, as in a real service's log.
    weights = [1 / (i + 1) ** 1.1 for i in range(len(kinds))]
    with open(out, "w", encoding="utf-8") as f:
        for kind in rng.choices(kinds, weights, k=n):
            f.write(kind() + "\n")


def drain3_cpu(lines):
    logging.disable(logging.WARNING)  # TemplateMiner() warns that it has no drain3.ini
    from drain3 import TemplateMiner

    miner = TemplateMiner()
    start = time.process_time()
    for line in lines:
        miner.add_log_message(line)
    return time.process_time() - start, len(miner.drain.clusters)


def tayga_cpu(binary, path, memo):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    args = [binary, "mine", path, "--templates", "--format", "csv"] + ([] if memo else ["--no-memo"])
    run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    templates = max(0, run.stdout.count(b"\n") - 1)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), templates


def spread(values):
    """Median and interquartile range."""
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2], "min": min(values), "max": max(values)}


def compare(binary, path, rounds):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip("\n") for l in f]
    n = len(lines)
    sides = ["drain3", "tayga", "tayga_no_memo"]
    rates = {s: [] for s in sides}
    counts = {}
    for r in range(rounds + 1):
        order = sides[r % 3:] + sides[:r % 3]
        taken = {}
        for side in order:
            if side == "drain3":
                cpu, counts[side] = drain3_cpu(lines)
            else:
                cpu, counts[side] = tayga_cpu(binary, path, side == "tayga")
            taken[side] = n / max(cpu, 1e-9)
        if r == 0:
            continue  # warm-up: caches, page cache, CPU frequency
        for side in sides:
            rates[side].append(taken[side])
    ratio = [t / d for t, d in zip(rates["tayga"], rates["drain3"])]
    ratio_no_memo = [t / d for t, d in zip(rates["tayga_no_memo"], rates["drain3"])]
    return {
        "file": path,
        "lines": n,
        "rounds": rounds,
        "cpus": sorted(os.sched_getaffinity(0)),
        "lines_per_cpu_second": {s: spread(v) for s, v in rates.items()},
        "ratio": spread(ratio),
        "ratio_no_memo": spread(ratio_no_memo),
        "ratios": ratio,
        "ratios_no_memo": ratio_no_memo,
        "clusters": counts["drain3"],
        "templates": counts["tayga"],
        "templates_no_memo": counts["tayga_no_memo"],
        "drain3_version": __import__("importlib.metadata").metadata.version("drain3"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?")
    ap.add_argument("--tayga")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--one-core", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--make-loghub", nargs=2, metavar=("DIR", "OUT"))
    ap.add_argument("--make-synthetic", nargs=2, metavar=("LINES", "OUT"))
    ap.add_argument("--make-100k", nargs=2, metavar=("MESSAGES", "OUT"))
    args = ap.parse_args()
    if args.make_loghub:
        return make_loghub(*args.make_loghub)
    if args.make_synthetic:
        return make_synthetic(int(args.make_synthetic[0]), args.make_synthetic[1])
    if args.make_100k:
        return make_100k(*args.make_100k)
    if not args.file:
        ap.error("give FILE, or one of the --make-* options")
    if args.one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    binary = args.tayga or os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "tayga")
    result = compare(binary, args.file, args.rounds)
    if args.json:
        print(json.dumps(result))
        return
    per = result["lines_per_cpu_second"]
    print(f"file          {result['file']} ({result['lines']:,} lines), {result['rounds']} rounds, CPUs {result['cpus']}")
    for side, label in (("drain3", f"drain3 {result['drain3_version']}"), ("tayga", "tayga mine"), ("tayga_no_memo", "tayga, no memo")):
        s = per[side]
        print(f"{label:<16} {s['median']:12,.0f} lines/CPU-s (IQR {s['q1']:,.0f}–{s['q3']:,.0f})")
    for key, label in (("ratio", "ratio"), ("ratio_no_memo", "ratio, no memo")):
        s = result[key]
        print(f"{label:<16} {s['median']:12.2f}x (IQR {s['q1']:.2f}–{s['q3']:.2f}, min {s['min']:.2f}, max {s['max']:.2f})")
    print(f"templates     tayga {result['templates']} (no memo {result['templates_no_memo']}), drain3 {result['clusters']} clusters")


if __name__ == "__main__":
    sys.exit(main())
