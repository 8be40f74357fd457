//! The command line: one clap definition drives the parser, `--help`, the man pages and the
//! shell completions (`tayga generate` writes the last two into `man/` and `completions/`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "tayga",
    version,
    about = "OpenTelemetry traces and logs into ClickHouse, with log templates, alerts and trace stories",
    long_about = "Tayga receives OpenTelemetry traces and logs (OTLP), keeps them in ClickHouse, mines log \
templates per service, raises alerts when a new kind of log line appears, a template spikes or goes \
silent, assembles traces into stories and delivers alerts to webhooks.\n\n\
Configuration comes from tayga.toml (or --config), overridden by TAYGA_<SECTION>_<KEY> environment \
variables; with neither, everything runs against localhost."
)]
pub struct Cli {
    /// Configuration file (default: ./tayga.toml when it exists)
    #[arg(long, global = true, value_name = "FILE", env = "TAYGA_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print data as JSON instead of tables
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show or check the effective configuration
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Create the ClickHouse database and tables, or upgrade them to the current schema
    Migrate(MigrateArgs),
    /// Create Tayga's Kafka topics, or show their partitions and consumer lag
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Run one daemon, or every daemon in one process (`all`)
    Serve(ServeArgs),
    /// Show the delivery state of an alert to each webhook target
    #[command(subcommand)]
    Deliveries(DeliveriesCommand),
    /// Send synthetic OTLP traffic to an ingest, at a set rate, and report what it achieved
    Loadgen(LoadgenArgs),
    /// Mine log templates from a plain log file, offline, with the logminer's engine
    Mine(crate::cmd::mine::MineArgs),
    /// Print a shell completion script
    Completions(CompletionsArgs),
    /// Print the man page, or write one page per subcommand into a directory
    Man(ManArgs),
    /// Regenerate the committed completions/ and man/ directories
    #[command(hide = true)]
    Generate(GenerateArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting with its value and where it came from (default, file, env)
    Show,
    /// Validate the configuration; exit 1 with one line per problem
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
    /// Requests per second, over all connections; 0 sends as fast as ingest answers
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// How long to send, in seconds
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub duration: f64,
    /// Requests in flight at once
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
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
}

#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// The (alert, target) delivery rows of one alert: status, attempts, last error
    Show {
        /// The alert's id, as printed by `tayga alerts list` and sent in webhook payloads
        #[arg(long, value_name = "ID")]
        alert_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Create the four topics (existing ones are reported and left as they are)
    Create,
    /// Show each topic's partitions, records, and each consumer group's committed offsets and lag
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
