//! The sections of `tayga.toml`. Every struct rejects unknown keys and fills what is missing
//! from its `Default`, whose values are the numbers docs/design.md gives. A field here is a key in the file,
//! an environment variable and a line of `tayga config show`: there is no other list.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub kafka: KafkaConfig,
    pub clickhouse: ClickHouseConfig,
    pub retention: RetentionConfig,
    pub ingest: IngestConfig,
    pub writer: WriterConfig,
    pub assembler: AssemblerConfig,
    pub logminer: LogminerConfig,
    pub notifier: NotifierConfig,
    pub api: ApiConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Comma-separated bootstrap servers.
    pub brokers: String,
    /// Partitions of `signals` and `logs` when Tayga creates them (12: docs/design.md#topics).
    pub partitions: i32,
    /// Replication factor of topics Tayga creates (1 on a single broker).
    pub replication_factor: i32,
    /// `retention.ms` of topics Tayga creates, in hours (7 days: the signals topic is
    /// sized for a week). Applies only at creation, like the partition counts.
    pub retention_hours: u64,
    /// `compression.type` of topics Tayga creates: lz4 (what Tayga's producers send, so the
    /// broker never recompresses), `producer` (whatever a producer sent), none, gzip, snappy
    /// or zstd.
    pub compression: String,
    /// Every topic and consumer group name starts with this, so several installs (and the
    /// tests) can share one broker.
    pub topic_prefix: String,
    /// How every client reaches the brokers, in Kafka's words: `plaintext`, `ssl` (TLS),
    /// `sasl_plaintext` (a user and a password, no TLS) or `sasl_ssl` (both) (docs/security.md).
    pub security_protocol: String,
    /// With a `sasl_*` protocol: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub sasl_mechanism: String,
    pub sasl_username: String,
    pub sasl_password: String,
    /// A file holding the broker password (a Compose or Kubernetes secret); read at load time
    /// when `sasl_password` is empty. Its trailing newline is not part of the password.
    pub sasl_password_file: String,
    /// With `ssl` or `sasl_ssl`: a PEM file of the CA that signed the brokers' certificates,
    /// trusted beside the public roots; read at load time.
    pub ssl_ca_file: String,
    /// The certificates of `ssl_ca_file`, read and checked when the configuration is loaded.
    #[serde(skip)]
    pub ssl_ca: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// A client certificate (PEM, the chain after it) for brokers that ask for one (mutual
    /// TLS), with `ssl_key_file`, its unencrypted PEM key; both read at load time.
    pub ssl_certificate_file: String,
    pub ssl_key_file: String,
    /// The certificate chain and key of those two files, read and checked at load time.
    #[serde(skip)]
    pub ssl_client: Option<ClientIdentity>,
}

/// A client certificate chain and its private key, for mutual TLS; the key is never printed.
#[derive(Clone)]
pub struct ClientIdentity {
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    pub key: std::sync::Arc<rustls::pki_types::PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity").field("chain", &self.chain.len()).field("key", &super::redact::HIDDEN).finish()
    }
}

/// `kafka.security_protocol`: whether the connection is TLS and whether it authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// The name as the configuration and librdkafka's `security.protocol` spell it.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }

    /// Case aside, as Kafka's own clients accept it (`SASL_SSL`).
    pub fn parse(text: &str) -> Option<SecurityProtocol> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(text.trim()))
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// `kafka.sasl_mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 3] = [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512];

    /// The name as SASL (and librdkafka's `sasl.mechanism`) spells it.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn parse(text: &str) -> Option<SaslMechanism> {
        Self::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(text.trim()))
    }
}

impl KafkaConfig {
    /// The protocol `security_protocol` names; a name that is none is a problem of the
    /// configuration ([`Config::problems`]), so a daemon never starts with it, and a client
    /// asked to connect with it refuses.
    pub fn protocol(&self) -> Result<SecurityProtocol, String> {
        SecurityProtocol::parse(&self.security_protocol).ok_or_else(|| {
            let names: Vec<_> = SecurityProtocol::ALL.iter().map(|p| p.name()).collect();
            format!("kafka.security_protocol must be one of {}, is `{}`", names.join(", "), self.security_protocol)
        })
    }

    /// The mechanism `sasl_mechanism` names (only asked with a `sasl_*` protocol).
    pub fn mechanism(&self) -> Result<SaslMechanism, String> {
        SaslMechanism::parse(&self.sasl_mechanism).ok_or_else(|| {
            let names: Vec<_> = SaslMechanism::ALL.iter().map(|m| m.name()).collect();
            let protocol = self.security_protocol.to_ascii_lowercase();
            match self.sasl_mechanism.trim() {
                "" => {
                    format!("kafka.sasl_mechanism must be set with security_protocol {protocol}: {}", names.join(", "))
                }
                other => format!("kafka.sasl_mechanism must be one of {}, is `{other}`", names.join(", ")),
            }
        })
    }

    /// The one line of each problem of the `[kafka]` security settings taken together.
    fn security_problems(&self) -> Vec<String> {
        let protocol = match self.protocol() {
            Ok(protocol) => protocol,
            Err(problem) => return vec![problem],
        };
        let name = protocol.name();
        let mut problems = Vec::new();
        if protocol.sasl() {
            if let Err(problem) = self.mechanism() {
                problems.push(problem);
            }
            if self.sasl_username.is_empty() {
                problems.push(format!("kafka.sasl_username must be set with security_protocol {name}"));
            }
            if self.sasl_password.is_empty() && self.sasl_password_file.is_empty() {
                problems.push(format!(
                    "kafka.sasl_password (or sasl_password_file) must be set with security_protocol {name}"
                ));
            }
        } else {
            let set = [
                ("sasl_mechanism", &self.sasl_mechanism),
                ("sasl_username", &self.sasl_username),
                ("sasl_password", &self.sasl_password),
                ("sasl_password_file", &self.sasl_password_file),
            ];
            if let Some((key, _)) = set.iter().find(|(_, v)| !v.is_empty()) {
                let instead = if protocol.tls() { "sasl_ssl" } else { "sasl_plaintext or sasl_ssl" };
                problems.push(format!(
                    "kafka.{key} is set but security_protocol {name} sends no credentials: use {instead}"
                ));
            }
        }
        let files = [
            ("ssl_ca_file", &self.ssl_ca_file),
            ("ssl_certificate_file", &self.ssl_certificate_file),
            ("ssl_key_file", &self.ssl_key_file),
        ];
        if !protocol.tls() {
            if let Some((key, _)) = files.iter().find(|(_, v)| !v.is_empty()) {
                let instead = if protocol.sasl() { "sasl_ssl" } else { "ssl or sasl_ssl" };
                problems.push(format!("kafka.{key} is set but security_protocol {name} is not TLS: use {instead}"));
            }
        } else if self.ssl_certificate_file.is_empty() != self.ssl_key_file.is_empty() {
            let (set, missing) = if self.ssl_key_file.is_empty() {
                ("ssl_certificate_file", "ssl_key_file")
            } else {
                ("ssl_key_file", "ssl_certificate_file")
            };
            problems.push(format!("kafka.{missing} must be set with {set}: a client certificate needs its key"));
        }
        problems
    }
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: "127.0.0.1:9092".into(),
            partitions: 12,
            replication_factor: 1,
            retention_hours: 168,
            compression: "lz4".into(),
            topic_prefix: "tayga".into(),
            security_protocol: SecurityProtocol::Plaintext.name().into(),
            sasl_mechanism: String::new(),
            sasl_username: String::new(),
            sasl_password: String::new(),
            sasl_password_file: String::new(),
            ssl_ca_file: String::new(),
            ssl_ca: Vec::new(),
            ssl_certificate_file: String::new(),
            ssl_key_file: String::new(),
            ssl_client: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClickHouseConfig {
    /// HTTP interface of the server.
    pub url: String,
    pub database: String,
    pub user: String,
    pub password: String,
    /// A file holding the password (a Compose or Kubernetes secret); read at load time when
    /// `password` is empty. Its trailing newline is not part of the password.
    pub password_file: String,
    /// A PEM file of the CA (one or more certificates) that signed the server's certificate,
    /// trusted for an `https://` URL beside the public roots; read at load time.
    pub ssl_ca_file: String,
    /// The certificates of `ssl_ca_file`, read and checked when the configuration is loaded
    /// ([`read_ssl_ca`](super::read_ssl_ca)).
    #[serde(skip)]
    pub ssl_ca: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// A cluster of `remote_servers` to lay the tables out on: each one a Replicated…MergeTree
    /// `<table>_local` on every server, created `ON CLUSTER`, behind a Distributed `<table>`
    /// (docs/scaling.md). Empty: one server, plain MergeTree tables.
    pub cluster: String,
}

impl Default for ClickHouseConfig {
    fn default() -> Self {
        ClickHouseConfig {
            url: "http://127.0.0.1:8123".into(),
            database: "tayga".into(),
            user: "default".into(),
            password: String::new(),
            password_file: String::new(),
            ssl_ca_file: String::new(),
            ssl_ca: Vec::new(),
            cluster: String::new(),
        }
    }
}

/// How long each table keeps its data. Tables are partitioned by day; the writer drops
/// whole partitions older than this once an hour (ARCHITECTURE.md, "Retention"). A value of
/// 0 keeps data forever.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    pub spans_days: u32,
    pub logs_days: u32,
    pub log_hits_days: u32,
    pub stories_days: u32,
    pub log_alerts_days: u32,
    /// Delivery rows are kept 30 days (docs/design.md#notifier-states).
    pub notifier_deliveries_days: u32,
    pub pipeline_metrics_days: u32,
    /// How often the sweep runs.
    pub interval_secs: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            spans_days: 7,
            logs_days: 7,
            log_hits_days: 7,
            stories_days: 30,
            log_alerts_days: 90,
            notifier_deliveries_days: 30,
            pipeline_metrics_days: 7,
            interval_secs: 3600,
        }
    }
}

/// Which ingest path is tried first (docs/design.md#ingest). It orders the paths; it never disables one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PipelinePolicy {
    Auto,
    /// Prefer the broker; `redpanda`, its former name, is still accepted.
    #[serde(alias = "redpanda")]
    Broker,
    Direct,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// OTLP/HTTP listener; also serves `/health` and `/metrics`.
    pub http_addr: String,
    /// OTLP/gRPC listener.
    pub grpc_addr: String,
    /// `TAYGA_INGEST_PIPELINE`: auto, broker (or its former name, redpanda) or direct.
    pub pipeline: PipelinePolicy,
    /// Largest request body accepted, after decompression.
    pub max_body_bytes: u64,
    /// Largest record published to the broker (900,000 bytes: docs/design.md#topics).
    pub max_record_bytes: u64,
    /// How long a failed path is skipped before a probe may bring it back.
    pub breaker_cooldown_secs: u64,
    /// How often the background probe checks paths that are down.
    pub probe_interval_secs: u64,
    /// Value bytes the direct path's backlog may hold until replayed; past it, direct
    /// writes are still stored but no longer kept for the topics (docs/ingest.md).
    pub backlog_max_bytes: u64,
    /// Request bytes (after decompression) handled at once; more is refused with 503 and
    /// Retry-After until some finish.
    pub max_inflight_bytes: u64,
    /// Requests handled at once; more is refused with 503 and Retry-After.
    pub max_inflight_requests: u64,
    /// Longest a client may take to send a request's headers, and then its body.
    pub header_timeout_secs: u64,
    pub body_timeout_secs: u64,
    /// Open connections per listener; more wait in the kernel's accept queue.
    pub max_connections: u64,
    /// When any is set, every OTLP request must carry one of these tokens (HTTP 401 and
    /// gRPC `UNAUTHENTICATED` otherwise). An entry is a token, or `{ token = "…",
    /// services = ["…"] }` for a token that may send only those services' data. Give them
    /// in the environment (`TAYGA_INGEST_AUTH_TOKENS`) or in `auth_tokens_file`, not in a
    /// file others read; `config show` never shows them.
    pub auth_tokens: Vec<AuthToken>,
    /// A file of tokens, one per line: `TOKEN`, or `TOKEN service-a,service-b` for a token
    /// bound to services; `#` starts a comment. Read at start, added to `auth_tokens`.
    pub auth_tokens_file: String,
    /// The header that carries the token: `authorization` (as `Bearer <token>`, the
    /// default), or another header whose whole value is the token (as the OpenTelemetry
    /// Collector's `bearertokenauth` allows).
    pub auth_header: String,
    /// A PEM certificate chain and its private key: when both are set, the OTLP/HTTP and
    /// OTLP/gRPC receivers speak TLS only. Both files are read at start and again on
    /// SIGHUP or when either changes (docs/security.md).
    pub tls_cert_file: String,
    pub tls_key_file: String,
    /// Also serve `/health` and `/metrics` here, in plain HTTP (empty: only on the OTLP/HTTP
    /// port). With TLS on the receivers, this is where the API's recorder and a Prometheus
    /// on the internal network scrape ingest (`api.ingest_metrics` names it).
    pub metrics_addr: String,
}

/// One accepted OTLP token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AuthToken {
    Any(String),
    Bound {
        token: String,
        /// The service names (`service.name`) this token may send; empty: any.
        services: Vec<String>,
    },
}

impl AuthToken {
    pub fn token(&self) -> &str {
        match self {
            AuthToken::Any(token) | AuthToken::Bound { token, .. } => token,
        }
    }

    /// The services it may send, or `None` for any.
    pub fn services(&self) -> Option<&[String]> {
        match self {
            AuthToken::Bound { services, .. } if !services.is_empty() => Some(services),
            _ => None,
        }
    }
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            http_addr: "127.0.0.1:4318".into(),
            grpc_addr: "127.0.0.1:4317".into(),
            pipeline: PipelinePolicy::Auto,
            max_body_bytes: 32 * 1024 * 1024,
            max_record_bytes: 900_000,
            breaker_cooldown_secs: 30,
            probe_interval_secs: 5,
            backlog_max_bytes: 4 << 30,
            max_inflight_bytes: 32 << 20,
            max_inflight_requests: 64,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_connections: 1024,
            auth_tokens: Vec::new(),
            auth_tokens_file: String::new(),
            auth_header: "authorization".into(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            metrics_addr: String::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriterConfig {
    /// `/health` and `/metrics`.
    pub metrics_addr: String,
    /// Rows buffered before an insert.
    pub batch_max_rows: u64,
    /// Longest a row waits in the buffer.
    pub batch_max_wait_ms: u64,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig { metrics_addr: "127.0.0.1:9401".into(), batch_max_rows: 50_000, batch_max_wait_ms: 500 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AssemblerConfig {
    pub metrics_addr: String,
    /// A trace closes after this long without a new span.
    pub idle_close_secs: u64,
    /// A trace with more spans closes at once and its story says it was truncated.
    pub max_spans_per_trace: u64,
    /// Caps on memory: past either, the oldest open traces close early.
    pub max_open_traces: u64,
    pub max_buffered_spans: u64,
}

impl Default for AssemblerConfig {
    fn default() -> Self {
        AssemblerConfig {
            metrics_addr: "127.0.0.1:9402".into(),
            idle_close_secs: 30,
            max_spans_per_trace: 10_000,
            max_open_traces: 100_000,
            max_buffered_spans: 1_000_000,
        }
    }
}

/// The most logminer replicas a deployment may run (1 to 12, the partitions of the logs topic
/// by default: docs/design.md#logminer-ownership).
pub const MAX_LOGMINER_REPLICAS: u32 = 12;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogminerConfig {
    pub metrics_addr: String,
    /// `LOGMINER_REPLICAS`: how many replicas the deployment runs (1 to 12).
    pub replicas: u32,
    /// This replica's id in heartbeats; empty means the hostname (the container's name).
    pub replica_id: String,
    /// A replica owns the services whose logs it mined within this window (60: docs/design.md#logminer-ownership).
    pub ownership_window_min: u64,
    /// Detection pass interval.
    pub tick_secs: u64,
    /// A line that can raise an alert (a new template, a minute reaching a spike threshold)
    /// starts a detection pass at once rather than at the next tick, debounced, and
    /// passes start at least `prompt_pass_min_gap_ms` apart (docs/logminer.md).
    pub prompt_passes: bool,
    pub prompt_pass_min_gap_ms: u64,
    /// Clean stop: flush bound, then the new-template pass bound (15 s, 20 s: docs/design.md#logminer-shutdown).
    pub shutdown_flush_timeout_secs: u64,
    pub shutdown_pass_timeout_secs: u64,
    /// The new-template pass after a revoke (30 s: docs/design.md#logminer-rebalances).
    pub revoke_pass_timeout_secs: u64,
    /// Reading pauses while this many mined hits wait to be stored (ClickHouse down or
    /// slow), so memory stays bounded; it resumes once a flush stores them
    /// (docs/logminer.md, "Ownership and rebalances").
    pub max_pending_hits: u64,
    /// Republication of unmarked alerts (24 h, 1,000 per pass: docs/design.md#republication).
    pub republish_window_hours: u64,
    pub republish_max_per_pass: u64,
    /// `remine` refuses while a heartbeat is younger than this (3 minutes: docs/design.md#watermarks).
    pub heartbeat_fresh_secs: u64,
    /// Heartbeat keys older than this are deleted at start-up (a day: docs/design.md#watermarks).
    pub heartbeat_expire_secs: u64,
    /// Spike: the minute count must reach `spike_factor` × the baseline and at least
    /// `spike_min_count`; the baseline is the mean of the previous `spike_baseline_min` minutes.
    pub spike_factor: f64,
    pub spike_min_count: u64,
    pub spike_baseline_min: u64,
    /// Silence: a template seen in at least `silence_min_active_minutes` of the last
    /// `silence_baseline_min` minutes, absent for `silence_after_min` while its service logs.
    pub silence_baseline_min: u64,
    pub silence_min_active_minutes: u64,
    pub silence_after_min: u64,
    /// Drain and masking (`[logminer.drain]`, `[logminer.masking]`): the same settings
    /// `tayga mine --mining-config` reads. Changing masking rules starts a new masking epoch.
    pub drain: crate::mine::DrainConfig,
    pub masking: crate::mine::MaskingConfig,
    /// The shape rules (`[logminer.shapes]`, docs/alerts.md "Shape alerts").
    pub shapes: ShapesConfig,
}

/// `[logminer.shapes]`: the `new_shape` and `shape_slowdown` rules, which the logminer
/// applies to the stored stories of the endpoints whose root service it owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShapesConfig {
    /// Judge shapes at all.
    pub enabled: bool,
    /// How far back a shape counts as seen: one not seen for longer is new again.
    pub history_hours: u64,
    /// An endpoint is warm (its new shapes are announced) once seen for this long …
    pub warmup_min: u64,
    /// … and for this many traces.
    pub warmup_traces: u64,
    /// A new shape must take at least `min_count` traces and `min_share` of its endpoint's
    /// traces within this window of its first sighting.
    pub evidence_window_min: u64,
    pub min_count: u64,
    pub min_share: f64,
    /// At most this many new shapes per endpoint within an hour; the rest wait.
    pub max_new_per_hour: u64,
    /// A slowdown: the window's p95 reaches `slowdown_factor` × the baseline p95 and is at
    /// least `slowdown_min_delta_ms` above it, with `slowdown_min_count` traces in each.
    pub slowdown_factor: f64,
    pub slowdown_min_delta_ms: u64,
    pub slowdown_window_min: u64,
    pub slowdown_baseline_min: u64,
    pub slowdown_min_count: u64,
}

impl Default for ShapesConfig {
    fn default() -> Self {
        ShapesConfig {
            enabled: true,
            history_hours: 24,
            warmup_min: 30,
            warmup_traces: 200,
            evidence_window_min: 10,
            min_count: 10,
            min_share: 0.05,
            max_new_per_hour: 3,
            slowdown_factor: 2.0,
            slowdown_min_delta_ms: 100,
            slowdown_window_min: 5,
            slowdown_baseline_min: 60,
            slowdown_min_count: 20,
        }
    }
}

impl LogminerConfig {
    pub fn mining(&self) -> crate::mine::MiningConfig {
        crate::mine::MiningConfig { drain: self.drain.clone(), masking: self.masking.clone() }
    }
}

impl Default for LogminerConfig {
    fn default() -> Self {
        LogminerConfig {
            metrics_addr: "127.0.0.1:9403".into(),
            replicas: 1,
            replica_id: String::new(),
            ownership_window_min: 60,
            tick_secs: 10,
            prompt_passes: true,
            prompt_pass_min_gap_ms: 500,
            shutdown_flush_timeout_secs: 15,
            shutdown_pass_timeout_secs: 20,
            revoke_pass_timeout_secs: 30,
            max_pending_hits: 200_000,
            republish_window_hours: 24,
            republish_max_per_pass: 1000,
            heartbeat_fresh_secs: 180,
            heartbeat_expire_secs: 86_400,
            spike_factor: 5.0,
            spike_min_count: 20,
            spike_baseline_min: 30,
            silence_baseline_min: 30,
            silence_min_active_minutes: 20,
            silence_after_min: 5,
            drain: Default::default(),
            masking: Default::default(),
            shapes: Default::default(),
        }
    }
}

/// A webhook that receives alerts (docs/design.md#notifier).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// The target's name in `notifier_deliveries`; must be unique.
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Alert kinds sent to this target; empty means every kind.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Services whose alerts are sent to this target, as globs (`*` any run of
    /// characters, `?` one); empty means every service.
    #[serde(default)]
    pub services: Vec<String>,
    /// The body: `json` (the alert document), `slack` (an incoming-webhook message) or
    /// `pagerduty` (an Events API v2 event).
    #[serde(default = "default_format")]
    pub format: String,
    /// A file, or the name of an environment variable, holding the Standard Webhooks
    /// signing secrets (`whsec_…`, several separated by white space during a rotation).
    /// Secrets never sit in the configuration itself, so `config show` has none to show.
    #[serde(default)]
    pub secrets_file: String,
    #[serde(default)]
    pub secrets_env: String,
    /// For `format = "pagerduty"`: a file or an environment variable holding the Events
    /// API v2 routing key.
    #[serde(default)]
    pub routing_key_file: String,
    #[serde(default)]
    pub routing_key_env: String,
    /// Also tell this target when an alert it was sent becomes inactive: one `resolved`
    /// delivery per alert (docs/notifier.md, "Resolved notices").
    #[serde(default)]
    pub send_resolved: bool,
}

fn default_format() -> String {
    "json".into()
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            name: String::new(),
            url: String::new(),
            headers: BTreeMap::new(),
            kinds: Vec::new(),
            services: Vec::new(),
            format: default_format(),
            secrets_file: String::new(),
            secrets_env: String::new(),
            routing_key_file: String::new(),
            routing_key_env: String::new(),
            send_resolved: false,
        }
    }
}

/// The payload formats a target may name.
pub const TARGET_FORMATS: [&str; 3] = ["json", "slack", "pagerduty"];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotifierConfig {
    pub metrics_addr: String,
    pub targets: Vec<TargetConfig>,
    /// Alerts whose `last_at` is older than this when read are skipped as stale.
    pub max_age_secs: u64,
    pub max_attempts: u32,
    pub timeout_secs: u64,
    pub breaker_cooldown_secs: u64,
    /// Backoff after the n-th failure: max(base × 2^(n−1), Retry-After), capped.
    pub backoff_base_secs: u64,
    pub backoff_cap_secs: u64,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        NotifierConfig {
            metrics_addr: "127.0.0.1:9404".into(),
            targets: Vec::new(),
            max_age_secs: 3600,
            max_attempts: 8,
            timeout_secs: 10,
            breaker_cooldown_secs: 300,
            backoff_base_secs: 1,
            backoff_cap_secs: 300,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// The HTTP API and the web app.
    pub listen_addr: String,
    /// The metric recorder scrapes every service this often.
    pub scrape_interval_secs: u64,
    /// Most samples the recorder stores from one scrape of one instance; the rest of the
    /// scrape is dropped and counted (`tayga_api_dropped_samples_total`), so a replica that
    /// exposes series without end cannot grow the recorder's ticks or its table without end.
    pub max_samples_per_scrape: u64,
    /// `host:port` of the logminer's metrics; resolved on every tick, each address scraped.
    pub logminer_metrics: String,
    /// Where the recorder scrapes the other services (`host:port`, resolved on every tick
    /// like the logminer's); empty means the service's own listen address in this
    /// configuration (single node). Containers set their service names.
    pub ingest_metrics: String,
    pub writer_metrics: String,
    pub assembler_metrics: String,
    pub notifier_metrics: String,
    /// When set, every request must carry `Authorization: Bearer <token>`. Required to
    /// listen on an address other than loopback. An operator token (see `operator_tokens`).
    pub token: String,
    /// Tokens that may read and act: retry a delivery, and every other write. With any
    /// token set (here, in `token`, in `viewer_tokens` or in a file), every request needs
    /// one. Give them in the environment (`TAYGA_API_OPERATOR_TOKENS='["…"]'`) or in
    /// `operator_tokens_file`, not in a file others read; `config show` never shows them.
    pub operator_tokens: Vec<String>,
    /// A file of operator tokens, one per line (`#` starts a comment); read at start.
    pub operator_tokens_file: String,
    /// Tokens that may only read: a write (any method but GET and HEAD) is refused with 403.
    pub viewer_tokens: Vec<String>,
    /// A file of viewer tokens, one per line (`#` starts a comment); read at start.
    pub viewer_tokens_file: String,
    /// A PEM certificate chain and its private key: when both are set, the API and the app
    /// are served over HTTPS only. Read at start and again on SIGHUP or when either changes.
    pub tls_cert_file: String,
    pub tls_key_file: String,
    /// Every ClickHouse query an API request makes is cut off after this long (503).
    pub query_timeout_secs: u64,
    /// The app's address as people reach it (`https://tayga.example.com`): webhook
    /// payloads link to an alert's page under it. Empty: no links.
    pub public_url: String,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen_addr: "127.0.0.1:8080".into(),
            scrape_interval_secs: 15,
            max_samples_per_scrape: 10_000,
            logminer_metrics: "127.0.0.1:9403".into(),
            ingest_metrics: String::new(),
            writer_metrics: String::new(),
            assembler_metrics: String::new(),
            notifier_metrics: String::new(),
            token: String::new(),
            operator_tokens: Vec::new(),
            operator_tokens_file: String::new(),
            viewer_tokens: Vec::new(),
            viewer_tokens_file: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            query_timeout_secs: 10,
            public_url: String::new(),
        }
    }
}

/// The `compression.type` values a Kafka topic accepts.
pub const TOPIC_COMPRESSIONS: &[&str] = &["producer", "none", "gzip", "snappy", "lz4", "zstd"];

/// Alert kinds (docs/logminer.md, "The alert rules"); `notifier.targets[].kinds` may name only these.
pub const ALERT_KINDS: &[&str] = &["new_template", "spike", "silence", "new_shape", "shape_slowdown"];

/// One semantic problem of a configuration: the key it is about and what is wrong, in a
/// sentence that names the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl Config {
    /// Problems a well-typed configuration can still have, one line each.
    pub fn validate(&self) -> Vec<String> {
        self.problems().into_iter().map(|p| p.message).collect()
    }

    /// [`Config::validate`]'s problems with the key each is about.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut check = |ok: bool, message: String| {
            if !ok {
                // Every message starts with its key (`kafka.partitions must …`).
                let key = message.split([' ', ':']).next().unwrap_or_default().to_string();
                problems.push(Problem { key, message });
            }
        };
        check(!self.kafka.brokers.trim().is_empty(), "kafka.brokers is empty".into());
        check(self.kafka.partitions >= 1, format!("kafka.partitions must be at least 1, is {}", self.kafka.partitions));
        check(self.kafka.replication_factor >= 1, "kafka.replication_factor must be at least 1".into());
        check(self.kafka.retention_hours >= 1, "kafka.retention_hours must be at least 1".into());
        check(
            TOPIC_COMPRESSIONS.contains(&self.kafka.compression.as_str()),
            format!(
                "kafka.compression must be one of {}, is `{}`",
                TOPIC_COMPRESSIONS.join(", "),
                self.kafka.compression
            ),
        );
        check(
            is_identifier(&self.kafka.topic_prefix.replace(['.', '-'], "_")),
            format!(
                "kafka.topic_prefix: `{}` may hold only letters, digits, `.`, `_` and `-`",
                self.kafka.topic_prefix
            ),
        );
        for problem in self.kafka.security_problems() {
            check(false, problem);
        }
        check(
            self.clickhouse.url.starts_with("http://") || self.clickhouse.url.starts_with("https://"),
            format!(
                "clickhouse.url: `{}` must start with http:// or https://",
                super::redact::url(&self.clickhouse.url)
            ),
        );
        check(
            is_identifier(&self.clickhouse.database),
            format!(
                "clickhouse.database: `{}` must be a plain identifier (letters, digits, _)",
                self.clickhouse.database
            ),
        );
        check(
            self.clickhouse.cluster.is_empty() || is_identifier(&self.clickhouse.cluster),
            format!(
                "clickhouse.cluster: `{}` must be empty (one server) or a plain identifier naming a cluster of the servers' remote_servers",
                self.clickhouse.cluster
            ),
        );
        for (key, addr) in [
            ("ingest.http_addr", &self.ingest.http_addr),
            ("ingest.grpc_addr", &self.ingest.grpc_addr),
            ("writer.metrics_addr", &self.writer.metrics_addr),
            ("assembler.metrics_addr", &self.assembler.metrics_addr),
            ("logminer.metrics_addr", &self.logminer.metrics_addr),
            ("notifier.metrics_addr", &self.notifier.metrics_addr),
            ("api.listen_addr", &self.api.listen_addr),
        ] {
            check(addr.parse::<SocketAddr>().is_ok(), format!("{key}: `{addr}` is not an ip:port address"));
        }
        check(
            self.ingest.max_record_bytes >= 1024 && self.ingest.max_record_bytes <= 900_000,
            format!("ingest.max_record_bytes must be between 1024 and 900000, is {}", self.ingest.max_record_bytes),
        );
        check(self.ingest.max_body_bytes >= 1024, "ingest.max_body_bytes must be at least 1024".into());
        check(self.ingest.probe_interval_secs >= 1, "ingest.probe_interval_secs must be at least 1".into());
        check(
            self.ingest.max_inflight_bytes >= self.ingest.max_body_bytes,
            "ingest.max_inflight_bytes must be at least ingest.max_body_bytes (a largest request must fit)".into(),
        );
        for (key, value) in [
            ("ingest.max_inflight_requests", self.ingest.max_inflight_requests),
            ("ingest.header_timeout_secs", self.ingest.header_timeout_secs),
            ("ingest.body_timeout_secs", self.ingest.body_timeout_secs),
            ("ingest.max_connections", self.ingest.max_connections),
        ] {
            check(value >= 1, format!("{key} must be at least 1"));
        }
        check(self.writer.batch_max_rows >= 1, "writer.batch_max_rows must be at least 1".into());
        check(self.assembler.idle_close_secs >= 1, "assembler.idle_close_secs must be at least 1".into());
        check(
            (1..=MAX_LOGMINER_REPLICAS).contains(&self.logminer.replicas),
            format!(
                "logminer.replicas (LOGMINER_REPLICAS) must be 1 to {MAX_LOGMINER_REPLICAS}, is {}",
                self.logminer.replicas
            ),
        );
        check(self.logminer.tick_secs >= 1, "logminer.tick_secs must be at least 1".into());
        check(
            self.logminer.prompt_pass_min_gap_ms >= 100,
            "logminer.prompt_pass_min_gap_ms must be at least 100 (set logminer.prompt_passes = false to run passes only on the tick)".into(),
        );
        check(self.logminer.ownership_window_min >= 1, "logminer.ownership_window_min must be at least 1".into());
        check(self.logminer.spike_factor > 1.0, "logminer.spike_factor must be above 1".into());
        let shapes = &self.logminer.shapes;
        check(
            shapes.slowdown_factor > 1.0,
            format!("logminer.shapes.slowdown_factor must be above 1, is {}", shapes.slowdown_factor),
        );
        check(
            (0.0..=1.0).contains(&shapes.min_share),
            format!("logminer.shapes.min_share must be between 0 and 1, is {}", shapes.min_share),
        );
        check(
            self.logminer.silence_min_active_minutes <= self.logminer.silence_baseline_min,
            "logminer.silence_min_active_minutes cannot exceed logminer.silence_baseline_min".into(),
        );
        check(self.notifier.max_attempts >= 1, "notifier.max_attempts must be at least 1".into());
        check(self.notifier.timeout_secs >= 1, "notifier.timeout_secs must be at least 1".into());
        check(
            self.notifier.backoff_cap_secs >= self.notifier.backoff_base_secs,
            "notifier.backoff_cap_secs must be at least notifier.backoff_base_secs".into(),
        );
        check(
            reqwest::header::HeaderName::from_bytes(self.ingest.auth_header.trim().as_bytes()).is_ok(),
            format!("ingest.auth_header: `{}` is not a header name", self.ingest.auth_header),
        );
        let mut names = std::collections::BTreeSet::new();
        for (i, target) in self.notifier.targets.iter().enumerate() {
            let at = format!("notifier.targets[{i}]");
            check(!target.name.trim().is_empty(), format!("{at}.name is empty"));
            check(names.insert(target.name.clone()), format!("{at}.name: `{}` is used twice", target.name));
            check(
                reqwest::Url::parse(&target.url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")),
                format!("{at}.url: `{}` is not an http(s) URL", super::redact::target_url(&target.url)),
            );
            for kind in &target.kinds {
                check(
                    ALERT_KINDS.contains(&kind.as_str()),
                    format!("{at}.kinds: `{kind}` is not one of {}", ALERT_KINDS.join(", ")),
                );
            }
            check(
                TARGET_FORMATS.contains(&target.format.as_str()),
                format!("{at}.format: `{}` is not one of {}", target.format, TARGET_FORMATS.join(", ")),
            );
            check(
                target.secrets_file.is_empty() || target.secrets_env.is_empty(),
                format!("{at}: set secrets_file or secrets_env, not both"),
            );
            check(
                target.routing_key_file.is_empty() || target.routing_key_env.is_empty(),
                format!("{at}: set routing_key_file or routing_key_env, not both"),
            );
            check(
                target.format != "pagerduty"
                    || !(target.routing_key_file.is_empty() && target.routing_key_env.is_empty()),
                format!("{at}: a pagerduty target needs its routing key in routing_key_file or routing_key_env"),
            );
        }
        let d = &self.logminer.drain;
        check(
            d.sim_th > 0.0 && d.sim_th <= 1.0,
            format!("logminer.drain.sim_th must be above 0 and at most 1, is {}", d.sim_th),
        );
        check(d.depth >= 3, format!("logminer.drain.depth must be at least 3, is {}", d.depth));
        check(d.max_children >= 1, format!("logminer.drain.max_children must be at least 1, is {}", d.max_children));
        check(d.max_clusters >= 1, format!("logminer.drain.max_clusters must be at least 1, is {}", d.max_clusters));
        check(d.max_services >= 1, format!("logminer.drain.max_services must be at least 1, is {}", d.max_services));
        check(
            (1..=2).contains(&d.merge_positions),
            format!("logminer.drain.merge_positions must be 1 or 2, is {}", d.merge_positions),
        );
        check(
            d.merge_ratio > 0.0 && d.merge_ratio <= 1.0,
            format!("logminer.drain.merge_ratio must be above 0 and at most 1, is {}", d.merge_ratio),
        );
        check(self.logminer.spike_min_count >= 1, "logminer.spike_min_count must be at least 1".into());
        check(self.logminer.spike_baseline_min >= 1, "logminer.spike_baseline_min must be at least 1".into());
        check(self.logminer.silence_after_min >= 1, "logminer.silence_after_min must be at least 1".into());
        check(self.logminer.max_pending_hits >= 1, "logminer.max_pending_hits must be at least 1".into());
        check(self.logminer.republish_max_per_pass >= 1, "logminer.republish_max_per_pass must be at least 1".into());
        check(self.logminer.heartbeat_fresh_secs >= 1, "logminer.heartbeat_fresh_secs must be at least 1".into());
        check(self.writer.batch_max_wait_ms >= 1, "writer.batch_max_wait_ms must be at least 1".into());
        check(self.assembler.max_spans_per_trace >= 1, "assembler.max_spans_per_trace must be at least 1".into());
        check(self.assembler.max_open_traces >= 1, "assembler.max_open_traces must be at least 1".into());
        check(self.assembler.max_buffered_spans >= 1, "assembler.max_buffered_spans must be at least 1".into());
        check(self.retention.interval_secs >= 1, "retention.interval_secs must be at least 1".into());
        check(self.api.scrape_interval_secs >= 1, "api.scrape_interval_secs must be at least 1".into());
        check(self.api.max_samples_per_scrape >= 1, "api.max_samples_per_scrape must be at least 1".into());
        check(self.api.query_timeout_secs >= 1, "api.query_timeout_secs must be at least 1".into());
        for (section, cert, key) in [
            ("api", &self.api.tls_cert_file, &self.api.tls_key_file),
            ("ingest", &self.ingest.tls_cert_file, &self.ingest.tls_key_file),
        ] {
            check(
                cert.is_empty() == key.is_empty(),
                format!("{section}.tls_cert_file and {section}.tls_key_file: set both (TLS) or neither (plain)"),
            );
        }
        problems
    }

    /// The topic and group names of this install (docs/design.md#topics).
    pub fn names(&self) -> super::Names {
        super::Names::new(&self.kafka.topic_prefix)
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_target_may_name_every_alert_kind() {
        let kinds: Vec<&str> = crate::wire::alert::AlertKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(ALERT_KINDS, kinds.as_slice());
    }

    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(Config::default().validate(), Vec::<String>::new());
    }

    #[test]
    fn a_certificate_needs_its_key() {
        let mut config = Config::default();
        config.api.tls_cert_file = "/etc/tayga/api.pem".into();
        config.ingest.tls_key_file = "/etc/tayga/ingest.key".into();
        let problems = config.problems();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["api.tls_cert_file", "ingest.tls_cert_file"], "{problems:?}");
        assert!(problems[0].message.contains("set both (TLS) or neither"), "{problems:?}");
        config.api.tls_key_file = "/etc/tayga/api.key".into();
        config.ingest.tls_cert_file = "/etc/tayga/ingest.pem".into();
        assert_eq!(config.validate(), Vec::<String>::new());
    }

    #[test]
    fn validation_names_each_problem() {
        let mut config = Config::default();
        config.logminer.replicas = 13;
        config.clickhouse.database = "my-db".into();
        config.notifier.targets.push(TargetConfig {
            name: "ops".into(),
            url: "ftp://x".into(),
            headers: BTreeMap::new(),
            kinds: vec!["panic".into()],
            ..Default::default()
        });
        let problems = config.validate();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("LOGMINER_REPLICAS")));
        assert!(problems.iter().any(|p| p.contains("`panic` is not one of")));
    }
}
