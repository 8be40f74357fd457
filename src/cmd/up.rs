//! `tayga up [--demo]`: the whole pipeline on one machine in one command (docs/demo.md).
//! Uses the ClickHouse and broker that answer at the configured addresses, or starts them
//! (`up/local.rs`); migrates; creates the topics; runs every service in this process through
//! the same path as `serve all`; prints where the app and OTLP listen. With `--demo`, the
//! built-in scenario is sent to ingest and a webhook inside the process receives the
//! notifier's deliveries. SIGINT/SIGTERM stop the services first, then what `up` started.

mod local;

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;

use crate::bus::topics::{ensure_topics, TopicOutcome};
use crate::cli::UpArgs;
use crate::config::{Config, Loaded, Source, TargetConfig};
use crate::daemon::Shutdown;
use crate::demo::scenario::{Scenario, Timeline};
use crate::demo::{self, sink};
use crate::store::{migrate, now_ns, Store};

use super::serve;

/// The services get this long to stop after a signal, and the processes `up` started the
/// rest of the 40 s a supervisor allows (docs/design.md#shutdown).
const SERVICES_STOP: Duration = Duration::from_secs(28);
const CHILD_STOP: Duration = Duration::from_secs(5);

pub async fn run(loaded: Loaded, args: &UpArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<()> {
    serve::refuse_problems(&loaded, err)?;
    let mut config = loaded.config.clone();
    let shutdown = Shutdown::new();
    shutdown.trigger_on_signals()?;
    std::fs::create_dir_all(&args.home).with_context(|| format!("creating {}", args.home.display()))?;
    let home = std::fs::canonicalize(&args.home).with_context(|| format!("reading {}", args.home.display()))?;

    // Children are started here, in `up`'s own future (local.rs says why).
    let mut owned = Vec::new();
    let mut notes = local::Notes::new();
    let started = start_local(&home, &config, &mut owned, &mut notes, out).await;
    for note in &notes {
        writeln!(out, "{note}")?;
    }
    let outcome = match started {
        Ok(()) if !shutdown.is_triggered() => serve_until_stopped(&loaded, &mut config, args, &shutdown, out).await,
        Ok(()) => Ok(()),
        Err(e) => Err(e),
    };
    shutdown.trigger();
    // The services are stopped (or failed): now what `up` started, the broker first.
    for child in owned.into_iter().rev() {
        let (name, pid) = (child.name, child.pid);
        let clean = child.stop(CHILD_STOP).await;
        let how = if clean { "stopped" } else { "killed (it did not stop on SIGTERM)" };
        writeln!(out, "{name}: {how} (pid {pid})")?;
    }
    outcome
}

async fn start_local(
    home: &std::path::Path,
    config: &Config,
    owned: &mut Vec<local::Owned>,
    notes: &mut local::Notes,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let url = crate::config::redact::url(&config.clickhouse.url);
    match local::clickhouse(home, &config.clickhouse, notes).await? {
        local::Found::Answering => writeln!(out, "clickhouse: using the server that answers at {url}")?,
        local::Found::Owned(o) => {
            writeln!(out, "clickhouse: running at {url} (pid {}, data in {}/clickhouse)", o.pid, home.display())?;
            owned.push(o);
        }
    }
    let brokers = &config.kafka.brokers;
    match local::broker(home, brokers, notes).await? {
        local::Found::Answering => writeln!(out, "broker: using the broker that answers at {brokers}")?,
        local::Found::Owned(o) => {
            writeln!(out, "broker: running at {brokers} (pid {}, Tansu, data in memory)", o.pid)?;
            owned.push(o);
        }
    }
    Ok(())
}

async fn serve_until_stopped(
    loaded: &Loaded,
    config: &mut Config,
    args: &UpArgs,
    shutdown: &Shutdown,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let store = Store::new(&config.clickhouse);
    let report = migrate::migrate(&store).await.context("migrating the schema")?;
    writeln!(
        out,
        "schema: database {} at version {} ({} migration(s) applied, ClickHouse {})",
        report.database,
        report.version,
        report.applied.len(),
        report.server_version
    )?;
    let topics = ensure_topics(&config.kafka, &config.names()).await.context("creating the topics")?;
    let created = topics.iter().filter(|t| matches!(t, TopicOutcome::Created { .. })).count();
    writeln!(out, "topics: {} ready ({created} created)", topics.len())?;

    let (lines, mut rx) = mpsc::unbounded_channel::<String>();
    if args.demo {
        let is_set = |key: &str| loaded.values.get(key).is_some_and(|(_, source)| !matches!(source, Source::Default));
        let shortcuts = demo::shorten(config, is_set);
        if !shortcuts.is_empty() {
            let list: Vec<String> = shortcuts.iter().map(|s| format!("{} {} → {}", s.key, s.was, s.now)).collect();
            writeln!(out, "demo: detection shortened so every alert kind shows within 2 minutes: {}", list.join(", "))?;
        }
        let tell = lines.clone();
        let sink = sink::start(shutdown.clone(), move |line| {
            let _ = tell.send(format!("webhook: received {line}"));
        })
        .await
        .context("starting the demo's webhook sink")?;
        if !config.notifier.targets.iter().any(|t| t.name == sink::TARGET) {
            config.notifier.targets.push(TargetConfig {
                name: sink::TARGET.into(),
                url: sink.url(),
                ..Default::default()
            });
        }
        writeln!(out, "demo: the notifier delivers every alert to {} ({})", sink::TARGET, sink.url())?;
    }

    let mut services = tokio::spawn(serve::run_services(config.clone(), serve::AVAILABLE.to_vec(), shutdown.clone()));
    let ingest = config.ingest.http_addr.replace("0.0.0.0", "127.0.0.1");
    let api = config.api.listen_addr.replace("0.0.0.0", "127.0.0.1");
    let ready = async {
        for addr in [&ingest, &api] {
            while tokio::net::TcpStream::connect(addr.as_str()).await.is_err() {
                if !shutdown.sleep(Duration::from_millis(100)).await {
                    return;
                }
            }
        }
    };
    tokio::select! {
        joined = &mut services => return joined.context("the services' task failed")?,
        () = ready => {}
    }
    if shutdown.is_triggered() {
        return wait_stopped(services).await;
    }
    writeln!(out, "\nTayga is up:")?;
    writeln!(out, "  app        http://{api}")?;
    writeln!(out, "  OTLP/HTTP  http://{ingest}  (POST /v1/traces, /v1/logs)")?;
    writeln!(out, "  OTLP/gRPC  http://{}", config.ingest.grpc_addr.replace("0.0.0.0", "127.0.0.1"))?;
    writeln!(out, "Ctrl-C stops it.\n")?;

    let sender = args.demo.then(|| {
        let tell = lines.clone();
        let stop = shutdown.clone();
        let base = format!("http://{ingest}");
        tokio::spawn(async move {
            let start = now_ns();
            let (timeline, origin) = Timeline::default().aligned(start);
            demo::send::run(Scenario::new(timeline, start), &base, origin, stop, move |m| {
                let _ = tell.send(format!("demo: {m}"));
            })
            .await
        })
    });
    if args.demo {
        writeln!(
            out,
            "demo: watch http://{api}/alerts (every kind within 2 minutes), /stories, /pipeline and /deliveries"
        )?;
    }
    drop(lines);

    let outcome = loop {
        tokio::select! {
            joined = &mut services => break joined.context("the services' task failed")?,
            Some(line) = rx.recv() => writeln!(out, "{line}")?,
            () = shutdown.triggered() => {
                writeln!(out, "stopping: the services first (at most {} s)", SERVICES_STOP.as_secs())?;
                break wait_stopped(services).await;
            }
        }
    };
    shutdown.trigger();
    if let Some(sender) = sender {
        if let Ok(Ok(Ok(sent))) = tokio::time::timeout(Duration::from_secs(5), sender).await {
            writeln!(
                out,
                "demo: sent {} s of scenario: {} spans, {} logs ({} request(s) not accepted)",
                sent.seconds, sent.spans, sent.logs, sent.failed_requests
            )?;
        }
    }
    outcome
}

async fn wait_stopped(services: tokio::task::JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    match tokio::time::timeout(SERVICES_STOP, services).await {
        Ok(joined) => joined.context("the services' task failed")?,
        Err(_) => anyhow::bail!("the services did not stop within {} s", SERVICES_STOP.as_secs()),
    }
}
