//! The command line: one clap definition drives the parser, `--help`, the man pages and the
//! shell completions (`tayga generate` writes the last two into `man/` and `completions/`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum, ValueHint};

/// `tayga --version`: the package version, the commit and the build date (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TAYGA_BUILD_COMMIT"),
    ", built ",
    env!("TAYGA_BUILD_DATE"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "tayga",
    version = VERSION,
    about = "OpenTelemetry traces and logs into ClickHouse, with log templates, alerts and trace stories",
    long_about = "Tayga receives OpenTelemetry traces and logs (OTLP), keeps them in ClickHouse, mines log \
templates per service, raises alerts when a new kind of log line appears, a template spikes or goes \
silent, assembles traces into stories and delivers alerts to webhooks.\n\n\
Configuration comes from tayga.toml (or --config), overridden by TAYGA_<SECTION>_<KEY> environment \
variables; with neither, everything runs against localhost.",
    after_long_help = "Examples:\n  \
tayga serve all                      # every daemon in one process (OTLP on :4318 and :4317)\n  \
tayga config check                   # validate tayga.toml and the environment\n  \
tayga topics list                    # partitions, records and each group's lag\n  \
tayga alerts list --active           # what is alerting now\n  \
tayga mine app.log --templates       # templates of a log file, offline\n\n\
Exit status: 0 success (also when the reader of a pipe went away), 1 failure (one line on stderr \
says what and what to do), 2 usage error."
)]
pub struct Cli {
    /// Configuration file (default: ./tayga.toml when it exists)
    #[arg(long, global = true, value_name = "FILE", env = "TAYGA_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print data as JSON instead of tables (commands that print no data refuse it)
    #[arg(long, global = true)]
    pub json: bool,

    /// Print tables whole, at any width, instead of cutting the widest columns to fit the terminal
    #[arg(long, global = true)]
    pub wide: bool,

    /// How long to wait for the broker or ClickHouse to answer before giving up, e.g. 500ms, 10s, 1m
    #[arg(long, global = true, value_name = "DURATION", env = "TAYGA_TIMEOUT", default_value = "10s",
          value_parser = parse_timeout)]
    pub timeout: Duration,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show or check the effective configuration
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga config show\n  tayga --json config show\n  \
TAYGA_KAFKA_BROKERS=kafka:9092 tayga config check"
    )]
    Config(ConfigCommand),
    /// Create the ClickHouse database and tables, or upgrade them to the current schema
    #[command(after_long_help = "Examples:\n  tayga migrate\n  tayga migrate --print > schema.sql")]
    Migrate(MigrateArgs),
    /// Create Tayga's Kafka topics, or show their partitions and consumer lag
    #[command(subcommand, after_long_help = "Examples:\n  tayga topics create\n  tayga topics list --timeout 3s")]
    Topics(TopicsCommand),
    /// Run one daemon, or every daemon in one process (`all`)
    #[command(after_long_help = "Examples:\n  tayga serve all\n  TAYGA_LOG=debug tayga serve writer\n\n\
Each service logs one `ready` line saying what listens where; SIGTERM or SIGINT stops it cleanly (exit 0).")]
    Serve(ServeArgs),
    /// Run the whole pipeline on this machine: start ClickHouse and the broker when none
    /// answers, migrate, create the topics, run every service; `--demo` adds a scenario
    #[command(after_long_help = "Examples:\n  tayga up --demo\n  tayga up --home /var/lib/tayga\n\n\
A ClickHouse or broker that already answers at the configured address is used and left alone; one that \
tayga up starts keeps its data under --home and stops with it (Ctrl-C or SIGTERM; also when tayga up is killed). \
docs/demo.md says what the demo shows.")]
    Up(UpArgs),
    /// Show the delivery state of an alert to each webhook target
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga deliveries show --alert-id 9f3c2a1b4d5e6f70\n  \
tayga deliveries retry --alert-id 9f3c2a1b4d5e6f70 --dry-run"
    )]
    Deliveries(DeliveriesCommand),
    /// Hold back the delivery of matching alerts for a while (silences), list them, expire them
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga silences add --service checkout --for 2h --comment \"deploy 4.2\"\n  \
tayga silences list\n  tayga silences expire 9f3c2a1b4d5e6f70"
    )]
    Silences(SilencesCommand),
    /// Re-mine the stored logs with the current masking rules, rebuilding templates and hits
    #[command(
        long_about = "Re-mine the stored logs with the current masking rules, rebuilding templates and hits.\n\n\
If the masking rules changed since the stored templates were mined (a new masking version), every stored \
log is re-mined and a new masking epoch begins; otherwise the logs since the start of the current epoch are \
re-mined. The new-template watermarks are raised to the end of the re-mine, so no re-mined template is \
announced as new.\n\n\
Refuses to run while any logminer replica has written a heartbeat in the last \
logminer.heartbeat_fresh_secs (3 minutes): stop every logminer first. Safe to run again after an \
interruption; start the logminers only after a run that finished.",
        after_long_help = "Examples:\n  tayga remine --dry-run\n  tayga remine"
    )]
    Remine(RemineArgs),
    /// List alerts, or republish them to the alerts topic
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga alerts list --active\n  \
tayga alerts list --service checkout --kind spike --limit 0\n  tayga alerts republish --since 2h"
    )]
    Alerts(AlertsCommand),
    /// Search the stored logs, newest first, or follow new lines as they arrive (`--follow`)
    #[command(
        long_about = "Search the stored logs, newest first, or follow new lines as they arrive.\n\n\
The query is the app's (the Logs page): words and \"quoted phrases\" match the line, key=value an \
attribute or a resource attribute, service:NAME, severity>=warn, template:ID, trace:ID; every term narrows. \
One line per log: time, service, severity, template id, the line. To a pipe the columns are tab-separated; \
--json prints one JSON object per line (JSON lines). With --follow, the lines of the window are printed \
oldest first, then each new line as it is stored, until interrupted or the reader goes away.",
        after_long_help = "Examples:\n  tayga logs 'payment declined' --since 15m\n  \
tayga logs --service checkout 'severity>=error' --follow\n  \
tayga logs 'http.route=/pay trace:4bf92f3577b34da6a3ce929d0e0e4736'\n  \
tayga --json logs --follow | jq -r .body"
    )]
    Logs(LogsArgs),
    /// Search the stored traces by service, operation, duration, status and attributes
    #[command(after_long_help = "Examples:\n  tayga traces --service checkout --min-duration 500ms\n  \
tayga traces --status error --since 24h\n  tayga traces --attr http.route=/pay --limit 20")]
    Traces(TracesArgs),
    /// One trace: its spans as a waterfall that fits the terminal, and its logs
    #[command(after_long_help = "Examples:\n  tayga trace 4bf92f3577b34da6a3ce929d0e0e4736\n  \
tayga --json trace 4bf92f3577b34da6a3ce929d0e0e4736 | jq '.spans | length'")]
    Trace(TraceArgs),
    /// Log templates: list them with counts and the last hour's sparkline, or show one and its lines
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga templates list --service checkout\n  \
tayga templates show 9f3c2a1b4d5e6f70 --lines 20"
    )]
    Templates(TemplatesCommand),
    /// Trace shapes: list an hour's shapes by count, or diff two (edges added and removed, calls and self time)
    #[command(
        subcommand,
        after_long_help = "Examples:\n  tayga shapes list --service checkout\n  \
tayga shapes diff 1a2b3c4d5e6f7081 8e3f0a5b1c2d3e4f"
    )]
    Shapes(ShapesCommand),
    /// Change how many replicas of a scalable daemon run (the logminer)
    #[command(subcommand, after_long_help = "Examples:\n  tayga scale logminer 3 --dry-run\n  tayga scale logminer 3")]
    Scale(ScaleCommand),
    /// Send synthetic OTLP traffic to an ingest, at a set rate, and report what it achieved
    #[command(after_long_help = "Examples:\n  tayga loadgen --rate 20 --duration 30s --logs-per-request 20\n  \
tayga loadgen --protocol grpc --rate 0 --duration 1m")]
    Loadgen(LoadgenArgs),
    /// Mine log templates from a plain log file, offline, with the logminer's engine
    #[command(after_long_help = "Examples:\n  tayga mine app.log --templates --format table\n  \
journalctl -f -o cat | tayga mine --online -")]
    Mine(MineArgs),
    /// Print a shell completion script
    #[command(after_long_help = "Examples:\n  source <(tayga completions bash)\n  \
tayga completions fish > ~/.config/fish/completions/tayga.fish")]
    Completions(CompletionsArgs),
    /// Print the man page (through `man` on a terminal), or write one page per subcommand into a directory
    #[command(after_long_help = "Examples:\n  tayga man\n  tayga man --dir /usr/local/share/man/man1")]
    Man(ManArgs),
    /// Regenerate the committed completions/ and man/ directories
    #[command(hide = true, after_long_help = "Examples:\n  cargo run -- generate")]
    Generate(GenerateArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting with its value and where it came from (default, file, env)
    #[command(after_long_help = "Examples:\n  tayga config show\n  tayga config show | grep '^kafka'\n  \
tayga --json config show | jq '.values[\"kafka.brokers\"]'")]
    Show,
    /// Validate the configuration; exit 1 with one line per problem
    #[command(
        after_long_help = "Examples:\n  tayga config check\n  tayga --config /etc/tayga/tayga.toml config check\n  \
TAYGA_KAFKA_PARTITIONS=0 tayga config check   # exit 1: kafka.partitions must be at least 1"
    )]
    Check,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Print the DDL statements instead of running them
    #[arg(long)]
    pub print: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Service {
    Ingest,
    Writer,
    Assembler,
    Logminer,
    Notifier,
    Api,
    /// Every service in one process (single-node install, demo)
    All,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The daemon to run
    pub service: Service,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Send the built-in scenario (four services, then an error, a burst, a silence and a
    /// slow path) and receive the alerts on a webhook inside the process; shortens the
    /// detection windows
    #[arg(long)]
    pub demo: bool,
    /// Where a ClickHouse and a broker that tayga up starts keep their data and PID files
    #[arg(long, value_name = "DIR", default_value = ".tayga")]
    pub home: std::path::PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies
    Http,
    /// OTLP/gRPC
    Grpc,
}

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// OTLP/HTTP or OTLP/gRPC
    #[arg(long, value_enum, default_value = "http")]
    pub protocol: Protocol,
    /// Ingest's address (default: http://127.0.0.1:4318 for http, http://127.0.0.1:4317 for grpc)
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Requests per second, over all connections (0.001 to 1000000); 0 sends as fast as ingest answers
    #[arg(long, default_value = "10", value_parser = parse_rate)]
    pub rate: f64,
    /// How long to send: 90s, 5m, 1h, or a number of seconds
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_loadgen_duration)]
    pub duration: Duration,
    /// Requests in flight at once (with --open-loop: at most; a request due while this many
    /// are in flight is not sent, and counted as not sent)
    #[arg(long, default_value_t = 4, value_parser = parse_concurrency)]
    pub concurrency: usize,
    /// Send each request at its due time whether or not earlier ones were answered (needs
    /// --rate above 0), and time each from its due time, so a slow answer is not hidden by
    /// sending less
    #[arg(long)]
    pub open_loop: bool,
    /// Distinct services the traffic comes from
    #[arg(long, default_value_t = 3)]
    pub services: usize,
    /// Traces in each traces request (0: send no traces)
    #[arg(long, default_value_t = 10)]
    pub traces_per_request: usize,
    /// Spans in each trace
    #[arg(long, default_value_t = 10)]
    pub spans_per_trace: usize,
    /// Logs in each logs request (0: send no logs)
    #[arg(long, default_value_t = 0)]
    pub logs_per_request: usize,
    /// Every this many spans, one records an exception event with a stack trace, as SDKs do
    /// (0: none)
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub exception_every: usize,
    /// Write the identity of every span and log line an acknowledged request carried to
    /// FILE, one per line (`span TRACE_ID SPAN_ID`, `log LOG_ID`), to reconcile what was
    /// stored with what was acknowledged
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub acked_ids: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// The (alert, target) delivery rows of one alert: status, attempts, last error
    #[command(after_long_help = "Examples:\n  tayga deliveries show --alert-id 9f3c2a1b4d5e6f70\n  \
tayga --json deliveries show --alert-id 9f3c2a1b4d5e6f70")]
    Show {
        /// The alert's id, as printed by `tayga alerts list` and sent in webhook payloads
        #[arg(long, value_name = "ID", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
        alert_id: u64,
    },
    /// Retry a failed delivery: reset it to pending and republish the alert, once
    #[command(
        long_about = "Retry a failed delivery: an operator's explicit action.\n\nResets the alert's failed (alert, target) row (with --target) or every failed row of the alert (without) to \
pending, with the attempts starting over and the retry recorded in the row (manual_retries, retried_ns, \
retried_by), then republishes the alert's stored document to the alerts topic with a tayga-manual-retry-ns \
header. The notifier then delivers it exactly once more to those targets; a retried pair's age is judged by \
the retry's time, so an alert older than notifier.max_age_secs can be retried. A delivered or pending row is \
refused, as is an alert with no rows: exit 1, nothing changed. The notifier never retries a failed delivery \
by itself.",
        after_long_help = "Examples:\n  tayga deliveries retry --alert-id 9f3c2a1b4d5e6f70 --dry-run\n  \
tayga deliveries retry --alert-id 9f3c2a1b4d5e6f70 --target ops"
    )]
    Retry(DeliveriesRetryArgs),
}

#[derive(Debug, Args)]
pub struct DeliveriesRetryArgs {
    /// The alert's id, as printed by `tayga deliveries show` and sent in webhook payloads
    #[arg(long, value_name = "ID", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
    pub alert_id: u64,
    /// Only this target (default: every failed target of the alert)
    #[arg(long, value_name = "NAME", value_hint = ValueHint::Other)]
    pub target: Option<String>,
    /// Check and print what would be retried; change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum SilencesCommand {
    /// Silence a service's alerts (optionally one kind, one template) from now for a duration
    #[command(
        long_about = "Silence a service's alerts from now for a duration.\n\nWhile the silence runs, the notifier \
sends no matching alert to any target: each (alert, target) row reads `silenced` and names the silence. \
The alerts are still stored and shown. A matching alert that is still active when the silence ends is \
delivered with its next update; one that ended under the silence is never sent. Every notifier replica \
honours a silence within 5 seconds of its start.",
        after_long_help = "Examples:\n  tayga silences add --service checkout --for 2h --comment \"deploy 4.2\"\n  \
tayga silences add --service web --kind spike --template fedcba9876543210 --for 30m --comment \"known batch job\""
    )]
    Add(SilencesAddArgs),
    /// The running silences (with --all, every silence ever made), newest first
    #[command(after_long_help = "Examples:\n  tayga silences list\n  tayga --json silences list --all")]
    List {
        /// Every silence, also those that ended or were expired
        #[arg(long)]
        all: bool,
    },
    /// End a silence now: matching alerts are delivered again from their next update
    #[command(after_long_help = "Examples:\n  tayga silences expire 9f3c2a1b4d5e6f70")]
    Expire {
        /// The silence's id, as `tayga silences list` prints it
        #[arg(value_name = "ID", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
        id: u64,
    },
}

#[derive(Debug, Args)]
pub struct SilencesAddArgs {
    /// The service whose alerts are held back
    #[arg(long, value_hint = ValueHint::Other)]
    pub service: String,
    /// Only alerts of this kind (default: every kind)
    #[arg(long, value_name = "KIND", value_parser = alert_kind_parser())]
    pub kind: Option<crate::wire::alert::AlertKind>,
    /// Only alerts of this template, its id as `tayga alerts list` prints it (default: every template)
    #[arg(long, value_name = "ID", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
    pub template: Option<u64>,
    /// How long the silence runs from now, e.g. 30m, 2h, 7d
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_silence_duration)]
    pub duration: Duration,
    /// Why: shown with the silence and on every row it holds back
    #[arg(long, value_hint = ValueHint::Other)]
    pub comment: String,
}

/// `silences add --for`: a [`parse_window`] form above 0.
pub fn parse_silence_duration(text: &str) -> Result<Duration, String> {
    let d = parse_window(text)?;
    if d.is_zero() {
        return Err(format!("`{text}` is out of range: a silence runs for more than 0"));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct RemineArgs {
    /// Check the heartbeat rule and print what would be re-mined; change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// The newest version of each alert, most recently active first
    #[command(after_long_help = "Examples:\n  tayga alerts list --active\n  \
tayga alerts list --service checkout --kind spike --limit 0\n  tayga --wide alerts list\n  \
tayga alerts list | cut -f1,3,4   # to a pipe: tab-separated, every column whole")]
    List(AlertsListArgs),
    /// Publish alerts again to the alerts topic: every unmarked one of a window, or one by id
    #[command(
        long_about = "Publish alerts again to the alerts topic.\n\n\
Without --alert-id: every alert (of every service) updated within the window whose newest version has no \
publication mark, oldest first, in chunks of logminer.republish_max_per_pass, stopping at the first failed \
send. With --alert-id: that alert's newest version, even if it was already published. Each published \
version is marked in log_alert_publications. Exits 1 when a send failed.",
        after_long_help = "Examples:\n  tayga alerts republish --since 2h\n  \
tayga alerts republish --alert-id 9f3c2a1b4d5e6f70"
    )]
    Republish(AlertsRepublishArgs),
}

#[derive(Debug, Args)]
pub struct AlertsListArgs {
    /// Only alerts of this service
    #[arg(long, value_hint = ValueHint::Other)]
    pub service: Option<String>,
    /// Only alerts of this kind
    #[arg(long, value_name = "KIND", value_parser = alert_kind_parser())]
    pub kind: Option<crate::wire::alert::AlertKind>,
    /// Only active alerts: refreshed (last_at) within the last 5 minutes
    #[arg(long)]
    pub active: bool,
    /// At most this many alerts (0: no limit)
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: u64,
}

/// `new_template`, `spike` or `silence`, read by `AlertKind`'s `FromStr` (and offered as
/// completions).
fn alert_kind_parser() -> impl clap::builder::TypedValueParser<Value = crate::wire::alert::AlertKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        crate::wire::alert::AlertKind::ALL.map(crate::wire::alert::AlertKind::as_str),
    )
    .try_map(|s| s.parse::<crate::wire::alert::AlertKind>())
}

#[derive(Debug, Args)]
pub struct AlertsRepublishArgs {
    /// Republish this alert's newest version, even if it was already published
    #[arg(long, value_name = "ID", value_parser = crate::wire::alert::parse_id, conflicts_with = "since",
          value_hint = ValueHint::Other)]
    pub alert_id: Option<u64>,
    /// Republish unmarked alerts updated within this window, e.g. 30m, 24h, 7d
    /// (default: logminer.republish_window_hours, 24h)
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub since: Option<Duration>,
}

/// The time range a search covers: the last `--since`, or `--from` to `--to`.
#[derive(Debug, Clone, Args)]
pub struct RangeArgs {
    /// Search this far back from now, e.g. 15m, 1h, 7d (default 1h)
    #[arg(long, value_name = "DURATION", value_parser = parse_window, conflicts_with = "from")]
    pub since: Option<Duration>,
    /// Search from this time: RFC 3339 UTC (2026-12-04T03:00:00Z), `YYYY-MM-DD HH:MM[:SS]` in UTC, or Unix ns
    #[arg(long, value_name = "TIME", value_parser = parse_instant, value_hint = ValueHint::Other)]
    pub from: Option<u64>,
    /// Search up to this time (default: now); same forms as --from
    #[arg(long, value_name = "TIME", value_parser = parse_instant, value_hint = ValueHint::Other)]
    pub to: Option<u64>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The query, as on the Logs page: words, "phrases", key=value, service:, severity>=, template:, trace:
    #[arg(value_name = "QUERY", num_args = 0.., value_hint = ValueHint::Other)]
    pub query: Vec<String>,
    /// Only lines of this service (the same as service:NAME in the query)
    #[arg(long, value_hint = ValueHint::Other)]
    pub service: Option<String>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Keep printing new lines as they are stored, like `tail -f`
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// At most this many lines (newest first; with --follow, the newest of the window before following)
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
}

/// A span status a trace search asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceStatus {
    /// Traces with an error span
    Error,
    /// Traces without an error span
    Ok,
}

#[derive(Debug, Args)]
pub struct TracesArgs {
    /// A query, as on the Traces page: service:, operation:, duration>=250ms, status:error, key=value, trace:
    #[arg(value_name = "QUERY", num_args = 0.., value_hint = ValueHint::Other)]
    pub query: Vec<String>,
    /// Traces with a span of this service
    #[arg(long, value_hint = ValueHint::Other)]
    pub service: Option<String>,
    /// Traces with a span of this name (the operation)
    #[arg(long, value_hint = ValueHint::Other)]
    pub operation: Option<String>,
    /// Traces with a matching span at least this long, e.g. 250ms, 1.5s, 2m
    #[arg(long, value_name = "DURATION", value_parser = parse_span_duration)]
    pub min_duration: Option<Duration>,
    /// Traces whose matching spans are at most this long
    #[arg(long, value_name = "DURATION", value_parser = parse_span_duration)]
    pub max_duration: Option<Duration>,
    /// Only traces with an error span, or only those without
    #[arg(long, value_enum)]
    pub status: Option<TraceStatus>,
    /// A span (or resource) attribute the matching span has, key=value; repeatable
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_key_value, value_hint = ValueHint::Other)]
    pub attrs: Vec<(String, String)>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// At most this many traces, the most recent first
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The trace id: 32 hex digits, as in the app's addresses and `tayga traces`
    #[arg(value_name = "TRACE_ID", value_parser = parse_trace_id, value_hint = ValueHint::Other)]
    pub trace_id: String,
}

#[derive(Debug, Subcommand)]
pub enum TemplatesCommand {
    /// Templates, the most frequent first: count, first and last seen, the last hour's lines per minute
    #[command(
        after_long_help = "Examples:\n  tayga templates list\n  tayga templates list --service checkout --limit 0\n  \
tayga templates list | sort -t$'\\t' -k3 -n   # to a pipe: tab-separated, counts as plain digits"
    )]
    List {
        /// Only templates of this service
        #[arg(long, value_hint = ValueHint::Other)]
        service: Option<String>,
        /// At most this many templates (0: every one)
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u64,
    },
    /// One template: its text, counts, the last hour per minute, and its most recent lines
    #[command(after_long_help = "Examples:\n  tayga templates show 9f3c2a1b4d5e6f70\n  \
tayga templates show 9f3c2a1b4d5e6f70 --service checkout --lines 50")]
    Show {
        /// The template's id, as `tayga templates list` and `tayga logs` print it
        #[arg(value_name = "ID", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
        id: u64,
        /// The template's service (needed only when two services have a template of this id)
        #[arg(long, value_hint = ValueHint::Other)]
        service: Option<String>,
        /// How many of its most recent lines to print
        #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=1000))]
        lines: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum ShapesCommand {
    /// The shapes of a window, the most frequent first: count, p50 and p95 duration, errors, root, edges
    #[command(after_long_help = "Examples:\n  tayga shapes list\n  tayga shapes list --service checkout --since 24h")]
    List {
        /// Only shapes whose stories pass through this service
        #[arg(long, value_hint = ValueHint::Other)]
        service: Option<String>,
        /// The window: this far back from now, e.g. 15m, 1h, 7d (default 1h)
        #[arg(long, value_name = "DURATION", value_parser = parse_window, default_value = "1h")]
        since: Duration,
        /// At most this many shapes
        #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
        limit: u64,
    },
    /// What differs between two shapes: B's edges added and removed against A, and per edge the calls and
    /// self time in each shape's newest trace of the window
    #[command(after_long_help = "Examples:\n  tayga shapes diff 1a2b3c4d5e6f7081 8e3f0a5b1c2d3e4f\n  \
tayga shapes diff 1a2b3c4d5e6f7081 8e3f0a5b1c2d3e4f --since 7d")]
    Diff {
        /// The shape compared against (usually the endpoint's usual one), as `tayga shapes list` prints it
        #[arg(value_name = "A", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
        a: u64,
        /// The shape shown (a new or slower one)
        #[arg(value_name = "B", value_parser = crate::wire::alert::parse_id, value_hint = ValueHint::Other)]
        b: u64,
        /// Each side's newest story within this far back from now (default 24h)
        #[arg(long, value_name = "DURATION", value_parser = parse_window, default_value = "24h")]
        since: Duration,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScaleCommand {
    /// Set the number of logminer replicas (1 to the partitions of the logs topic, at most 12)
    #[command(
        long_about = "Set the number of logminer replicas.\n\n\
N must be at least 1 and at most the partition count of the logs topic (a replica beyond the Nth \
partition gets no partition and idles) and 12. First gives every partition of the logs topic its own \
new-template watermark key (the value it resolves to now), so after a scale-down each survivor resumes \
from the slowest partition it takes over. Then sets LOGMINER_REPLICAS=N in the Compose env file and runs \
`docker compose up -d --scale logminer=N` when docker is on PATH (otherwise prints that command).",
        after_long_help = "Examples:\n  tayga scale logminer 3 --dry-run\n  tayga scale logminer 3 --env-file deploy/.env"
    )]
    Logminer(ScaleLogminerArgs),
}

#[derive(Debug, Args)]
pub struct ScaleLogminerArgs {
    /// The number of replicas (1 to 12)
    #[arg(value_name = "N", value_parser = clap::value_parser!(u32).range(1..=crate::config::MAX_LOGMINER_REPLICAS as i64))]
    pub replicas: u32,
    /// Print the plan; change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The Compose env file to set LOGMINER_REPLICAS in (created if absent)
    #[arg(long, value_name = "PATH", default_value = ".env")]
    pub env_file: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Create the four topics (existing ones are reported and left as they are)
    #[command(
        after_long_help = "Examples:\n  tayga topics create\n  TAYGA_KAFKA_BROKERS=kafka:9092 tayga topics create"
    )]
    Create,
    /// Show each topic's partitions, records, and each consumer group's committed offsets and lag
    #[command(after_long_help = "Examples:\n  tayga topics list\n  tayga --json topics list --timeout 3s")]
    List,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write tayga.1 and a page per subcommand into this directory
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The repository root: completions/ and man/ are written below it
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
}

pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// How `tayga mine` prints what it mined.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MineFormat {
    #[default]
    Csv,
    Json,
    Table,
}

/// `tayga mine`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MineArgs {
    /// Log file, one message per line; `-` reads standard input.
    #[arg(value_name = "FILE|-", default_value = "-")]
    pub file: String,
    /// Service the lines belong to (templates ids are per service).
    #[arg(long, default_value = "default")]
    pub service: String,
    /// Output format: csv (header `line,template_id,template`), json (one object per
    /// line) or table.
    #[arg(long, value_enum, default_value_t = MineFormat::Csv)]
    pub format: MineFormat,
    /// Print the templates with their counts, most frequent first, instead of one row
    /// per line.
    #[arg(long)]
    pub templates: bool,
    /// Print lines, templates, lines/s and peak memory to stderr.
    #[arg(long)]
    pub stats: bool,
    /// Print each line as soon as it is mined, with its template as it was then, instead
    /// of the final templates at the end (for pipes that never end).
    #[arg(long, conflicts_with = "templates")]
    pub online: bool,
    /// TOML file with `[drain]` and `[masking]` tables (the keys of `[logminer.drain]`
    /// and `[logminer.masking]` in tayga.toml). Without it, the logminer's own settings
    /// (tayga.toml and environment) are used, so offline ids match the logminer's.
    #[arg(long, value_name = "FILE")]
    pub mining_config: Option<PathBuf>,
    /// Search the template tree for every line, without remembering the masked lines
    /// already matched (slower on repetitive files; the templates are the same)
    #[arg(long)]
    pub no_memo: bool,
}

/// A window on the command line: a whole number and a unit, `s`, `m`, `h` or `d`
/// (`30m`, `24h`, `7d`).
pub fn parse_window(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration: expected a number and a unit (s, m, h, d), as in 30m, 24h or 7d");
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => None,
    };
    secs.map(Duration::from_secs).ok_or_else(bad)
}

/// `--from`/`--to`: an instant, read by [`crate::time::parse_instant`].
pub fn parse_instant(text: &str) -> Result<u64, String> {
    crate::time::parse_instant(text)
}

/// A span duration: a number (decimals allowed) and a unit, `ns`, `us`, `ms`, `s`, `m` or `h`
/// (`250ms`, `1.5s`, `2m`).
pub fn parse_span_duration(text: &str) -> Result<Duration, String> {
    crate::search::duration_ns(text.trim()).map(Duration::from_nanos).ok_or_else(|| {
        format!("`{text}` is not a duration: expected a number and a unit (ns, us, ms, s, m, h), as in 250ms or 1.5s")
    })
}

/// `--attr`: `key=value`, the key not empty.
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{text}` is not key=value")),
    }
}

/// A trace id: 32 hex digits (either case), kept lowercase as the tables hold it.
pub fn parse_trace_id(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(t.to_ascii_lowercase())
    } else {
        Err(format!("`{text}` is not a trace id: expected 32 hex digits"))
    }
}

/// `--timeout`: a [`parse_window`] form or milliseconds (`500ms`), above 0 and at most a day.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let d = match t.strip_suffix("ms") {
        Some(ms) if !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit()) => {
            Duration::from_millis(ms.parse().map_err(|_| format!("`{text}` is too large"))?)
        }
        _ => parse_window(t)?,
    };
    if d.is_zero() || d > Duration::from_secs(86_400) {
        return Err(format!("`{text}` is out of range: a timeout is above 0 and at most 1d"));
    }
    Ok(d)
}

/// `loadgen --duration`: the forms `--since` takes (30m, 24h), or a number of seconds as
/// before; above 0 and at most 7 days.
pub fn parse_loadgen_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let d = if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !t.is_empty() {
        let secs: f64 =
            t.parse().map_err(|_| format!("`{text}` is not a duration: expected 90s, 5m, 1h or seconds"))?;
        Duration::try_from_secs_f64(secs).map_err(|_| format!("`{text}` is out of range"))?
    } else {
        parse_window(t)?
    };
    if d.is_zero() || d > Duration::from_secs(7 * 86_400) {
        return Err(format!("`{text}` is out of range: a duration is above 0 and at most 7d"));
    }
    Ok(d)
}

/// `loadgen --concurrency`: 1 to 1024 requests in flight.
pub fn parse_concurrency(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("`{text}` is not a number from 1 to 1024")),
    }
}

/// `loadgen --rate`: 0 (as fast as ingest answers) or 0.001 to 1,000,000 requests per second.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    if rate == 0.0 || (0.001..=1_000_000.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("`{text}` is out of range: 0, or 0.001 to 1000000 requests per second"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_durations_and_rates_refuse_what_is_out_of_range() {
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("10s"), Ok(Duration::from_secs(10)));
        for bad in ["0s", "0ms", "2d", "ms", "10"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse_loadgen_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_loadgen_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_loadgen_duration("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["inf", "1e20", "NaN", "-1", "0", "", "8d", "99999999999999999999999"] {
            assert!(parse_loadgen_duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse_rate("0"), Ok(0.0));
        assert_eq!(parse_rate("20"), Ok(20.0));
        for bad in ["1e-300", "inf", "NaN", "-1", "1e7", "x"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn windows_read_with_a_unit() {
        assert_eq!(parse_window("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_window("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_window("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_window("90s"), Ok(Duration::from_secs(90)));
        for bad in ["", "h", "24", "1.5h", "-1h", "2w", "1h30m", "99999999999999999999d"] {
            assert!(parse_window(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
