#!/usr/bin/env python3
"""Throughput of `tayga mine` against Drain3 (default configuration) on the same file, in
the same run.

Usage:
  scripts/drain3_compare.py [--tayga PATH] [--repeat N] FILE
  scripts/drain3_compare.py [--tayga PATH] [--repeat N] --make-100k MESSAGES OUT

  --tayga PATH        the tayga binary (default: $CARGO_TARGET_DIR/release/tayga, else
                      target/release/tayga); run as `PATH mine FILE --stats --templates`
  --make-100k M OUT   first write OUT: the messages of M repeated and varied to 100,000
                      lines (every digit run replaced by a random one of the same length,
                      seeded, so the templates stay those of M), then compare on OUT
  --repeat N          best of N runs for each miner, alternating (default 3)
  --baseline PATH     also time another tayga binary in the same rounds (before/after)

Drain3 is run in-process with TemplateMiner() and no persistence (its defaults:
sim_th 0.4, depth 4, max_children 100, no masking), timing only the add_log_message loop
over lines already in memory. Tayga is timed by its own --stats (reading the file and
mining; output is not counted, and --templates keeps it small). Needs `pip install drain3`.
"""
import argparse
import logging
import os
import random
import re
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


def drain3_rate(path, repeat):
    logging.disable(logging.WARNING)  # TemplateMiner() warns that it has no drain3.ini
    from drain3 import TemplateMiner

    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip("\n") for l in f]
    best = None
    clusters = 0
    for _ in range(repeat):
        miner = TemplateMiner()
        start = time.perf_counter()
        for line in lines:
            miner.add_log_message(line)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
        clusters = len(miner.drain.clusters)
    return len(lines) / best, clusters


def tayga_rate(binary, path, repeat):
    best = 0.0
    templates = 0
    for _ in range(repeat):
        run = subprocess.run([binary, "mine", path, "--stats", "--templates"], capture_output=True, text=True, check=True)
        stats = dict(l.split(None, 1) for l in run.stderr.splitlines() if l.strip() and " " in l)
        best = max(best, float(stats["lines/s"]))
        templates = int(stats["templates"])
    return best, templates


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?")
    ap.add_argument("--tayga")
    ap.add_argument("--make-100k", nargs=2, metavar=("MESSAGES", "OUT"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="another tayga binary (e.g. the previous release), timed in the same rounds")
    args = ap.parse_args()
    binary = args.tayga or os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "tayga")
    path = args.file
    if not path and not args.make_100k:
        ap.error("give FILE or --make-100k")
    if args.make_100k:
        make_100k(*args.make_100k)
        path = args.make_100k[1]
    with open(path, "rb") as f:
        n = sum(1 for _ in f)
    # Alternate the two, so both see the same machine load.
    d3, ty, base = 0.0, 0.0, 0.0
    for _ in range(args.repeat):
        r, d3_clusters = drain3_rate(path, 1)
        d3 = max(d3, r)
        r, ty_templates = tayga_rate(binary, path, 1)
        ty = max(ty, r)
        if args.baseline:
            r, base_templates = tayga_rate(args.baseline, path, 1)
            base = max(base, r)
    print(f"file        {path} ({n} lines)")
    print(f"drain3      {d3:12,.0f} lines/s  {d3_clusters} clusters (drain3 {__import__('importlib.metadata').metadata.version('drain3')}, default config)")
    print(f"tayga mine  {ty:12,.0f} lines/s  {ty_templates} templates")
    print(f"ratio       {ty / d3:12.1f}x")
    if args.baseline:
        print(f"baseline    {base:12,.0f} lines/s  {base_templates} templates ({args.baseline}); ratio {base / d3:.1f}x, tayga/baseline {ty / base:.3f}")


if __name__ == "__main__":
    sys.exit(main())
