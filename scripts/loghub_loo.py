#!/usr/bin/env python3
"""Leave-one-out validation of mining settings on the Loghub-2k sets ($TAYGA_LOGHUB_2K, else ../shared).

Usage:
  scripts/loghub_loo.py [--tayga PATH] [--data DIR] [--score PATH] [--grid NAME=V1,V2 ...]

Every combination of the --grid values (keys of [drain], e.g. merge_siblings=0,2,3,4) is
run on every set with `tayga mine --mining-config`. Then, for each set in turn, the
combination with the best average GA on the *other* sets (then PA, then the most
templates there, i.e. the one that merged least, then the later listed) is chosen and scored on that set: the
figure a setting chosen without a set would get on it. Printed: every combination's
per-set GA, and the leave-one-out per-set GA, PA, groups, spurious counts and averages.

Spurious counts are templates beyond the true number of events: `final` counts what is
left at the end, `born` counts every template born (what a logminer whose new-template
pass ran between a birth and the merge that retired it would have announced).
"""
import argparse
import itertools
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def run_set(tayga, score, structured, messages, config_path, work):
    csv_path = os.path.join(work, "out.csv")
    args = [tayga, "mine", messages, "--stats"]
    if config_path:
        args += ["--mining-config", config_path]
    with open(csv_path, "w") as out:
        p = subprocess.run(args, stdout=out, stderr=subprocess.PIPE, text=True, check=True)
    stats = dict(l.split(None, 1) for l in p.stderr.splitlines() if l.strip() and len(l.split(None, 1)) == 2)
    r = subprocess.run(["python3", score, "score", structured, csv_path], capture_output=True, text=True, check=True)
    w = r.stdout.split()
    ours, truth = (int(x) for x in w[7].split("/"))
    return {"ga": float(w[1]), "pa": float(w[3]), "groups": ours, "truth": truth, "born": int(stats.get("born", ours))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tayga", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "tayga"))
    ap.add_argument(
        "--data",
        default=os.environ.get("TAYGA_LOGHUB_2K") or os.path.join(here, "..", "..", "shared", "data", "loghub2k"),
    )
    ap.add_argument("--score", default=os.path.join(here, "..", "..", "shared", "tools", "loghub_score.py"))
    ap.add_argument("--grid", nargs="*", default=[])
    a = ap.parse_args()

    keys, values = [], []
    for g in a.grid:
        k, v = g.split("=", 1)
        keys.append(k)
        values.append(v.split(","))
    combos = [dict(zip(keys, c)) for c in itertools.product(*values)] or [{}]

    work = tempfile.mkdtemp()
    sets = sorted(d for d in os.listdir(a.data) if os.path.isdir(os.path.join(a.data, d)))
    msgs = {}
    for s in sets:
        structured = os.path.join(a.data, s, f"{s}_2k.log_structured.csv")
        m = os.path.join(work, f"{s}.txt")
        with open(m, "w") as f:
            subprocess.run(["python3", a.score, "extract", structured], stdout=f, check=True)
        msgs[s] = (structured, m)

    results = []
    for c in combos:
        cfg = None
        if c:
            cfg = os.path.join(work, "cfg.toml")
            with open(cfg, "w") as f:
                f.write("[drain]\n" + "".join(f"{k} = {v}\n" for k, v in c.items()))
        results.append({s: run_set(a.tayga, a.score, *msgs[s], cfg, work) for s in sets})

    def name(c):
        return " ".join(f"{k}={v}" for k, v in c.items()) or "default"

    print("GA per combination:")
    print("%-40s %s  avgGA  avgPA" % ("", " ".join("%9s" % s[:9] for s in sets)))
    for c, r in zip(combos, results):
        ga = sum(r[s]["ga"] for s in sets) / len(sets)
        pa = sum(r[s]["pa"] for s in sets) / len(sets)
        print("%-40s %s  %.4f %.4f" % (name(c), " ".join("%9.4f" % r[s]["ga"] for s in sets), ga, pa))

    print("\nleave-one-out (setting chosen on the other sets):")
    print("%-10s %7s %7s %8s %6s %6s  %s" % ("set", "GA", "PA", "groups", "spur", "born+", "chosen"))
    tot_ga = tot_pa = 0.0
    for s in sets:
        others = [o for o in sets if o != s]

        def key(i):
            r = results[i]
            # Ties go to the setting that merged least on the other sets (most templates),
            # then to the later in the grid (list values from loose to strict).
            return (sum(r[o]["ga"] for o in others), sum(r[o]["pa"] for o in others),
                    sum(r[o]["groups"] for o in others), i)

        best = max(range(len(combos)), key=key)
        r = results[best][s]
        tot_ga += r["ga"]
        tot_pa += r["pa"]
        print("%-10s %7.4f %7.4f %8s %6d %6d  %s" % (s, r["ga"], r["pa"], f"{r['groups']}/{r['truth']}",
              max(0, r["groups"] - r["truth"]), max(0, r["born"] - r["truth"]), name(combos[best])))
    print("%-10s %7.4f %7.4f" % ("average", tot_ga / len(sets), tot_pa / len(sets)))


if __name__ == "__main__":
    main()
