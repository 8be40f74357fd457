//! Tayga's configuration: `tayga.toml`, overridden key by key from the environment.
//!
//! Loading is layered so that `tayga config show` can say where every value came from:
//! the built-in defaults, then the file, then the environment (`TAYGA_<SECTION>_<KEY>`, plus
//! the names Compose files use, such as `LOGMINER_REPLICAS`). Every layer is merged as a TOML
//! tree before anything is deserialised, so an unknown key or a wrongly typed value is
//! reported by its dotted path, every problem at once, instead of one serde error at a time.

mod names;
pub mod redact;
mod sections;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Value;

pub use names::Names;
pub use sections::*;

/// Environment names Compose files use, beside the generic `TAYGA_<SECTION>_<KEY>` form.
/// The generic name wins when both are set.
const ENV_ALIASES: &[(&str, &str)] = &[("LOGMINER_REPLICAS", "logminer.replicas")];

/// The file read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "tayga.toml";

/// `TAYGA_*` variables that are not configuration keys: the binary's own (`--config`,
/// logging, `--timeout`, forced terminal output, the commands' test clock), the local
/// services script's, and the suite's Loghub data (`tests/it/mine_loghub.rs`), which
/// `scripts/test.sh` exports to every process it starts. Any other `TAYGA_*` name is a
/// misspelt key and an error.
pub const OTHER_VARIABLES: &[&str] = &[
    "TAYGA_CONFIG",
    "TAYGA_LOG",
    "TAYGA_TIMEOUT",
    "TAYGA_FORCE_TTY",
    "TAYGA_NOW_NS",
    "TAYGA_HOME",
    "TAYGA_CH_HTTP_PORT",
    "TAYGA_CH_TCP_PORT",
    "TAYGA_CH_HTTPS_PORT",
    "TAYGA_CH_PASSWORD",
    "TAYGA_BROKER_PORT",
    "TAYGA_LOGHUB_2K",
];

/// Prefixes of variables the test suite and CI read, and the build's own (`build.rs`; cargo
/// sets them for test runs too): never configuration.
const OTHER_VARIABLE_PREFIXES: &[&str] = &["TAYGA_TEST_", "TAYGA_BUILD_"];

/// Where a value in the effective configuration came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Default,
    File,
    Env,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Env => "env",
        })
    }
}

/// A configuration that could not be loaded: every problem found, one per line.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl ConfigError {
    fn one(problem: String) -> Self {
        ConfigError { problems: vec![problem] }
    }
}

/// The effective configuration and, for every leaf key, where its value came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// Dotted key → (value, source), for every leaf of the effective configuration.
    pub values: BTreeMap<String, (Value, Source)>,
    /// Dotted key → the variable that set it, for values whose source is the environment.
    pub env_vars: BTreeMap<String, String>,
}

impl Loaded {
    /// Loads from `explicit` (an error if missing) or from `./tayga.toml` when present,
    /// then applies the process environment.
    pub fn load(explicit: Option<&Path>) -> Result<Loaded, ConfigError> {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let file = match explicit {
            Some(path) => Some(path.to_path_buf()),
            None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
        };
        let text = match &file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| ConfigError::one(format!("{}: cannot read the config file: {e}", path.display())))?,
            ),
            None => None,
        };
        let label = file.as_ref().map(|f| f.display().to_string());
        let mut loaded = Self::build(label.as_deref().zip(text.as_deref()), &env)?;
        loaded.file = file;
        Ok(loaded)
    }

    /// Builds the configuration from a file's text (if any) and an environment. Pure, so
    /// tests need not touch the process environment.
    pub fn from_parts(file_text: Option<&str>, env: &BTreeMap<String, String>) -> Result<Loaded, ConfigError> {
        Self::build(file_text.map(|t| ("tayga.toml", t)), env)
    }

    /// `file` is (the name problems are reported under, its text). Every problem is
    /// collected, each on its own line naming the file or variable it comes from: the wrong
    /// value is left at its default so the rest can still be checked, and the semantic
    /// checks ([`Config::validate`]) run too whenever the configuration still deserialises.
    fn build(file: Option<(&str, &str)>, env: &BTreeMap<String, String>) -> Result<Loaded, ConfigError> {
        let defaults = Value::try_from(Config::default()).expect("the default configuration serialises to TOML");
        let mut merged = defaults.clone();
        let mut sources = BTreeMap::new();
        let mut env_vars = BTreeMap::new();
        let mut problems = Vec::new();
        collect_leaves(&defaults, "", &mut |path, _| {
            sources.insert(path.to_string(), Source::Default);
        });

        if let Some((label, text)) = file {
            match text.parse::<toml::Table>() {
                Ok(table) => collect_leaves(&Value::Table(table), "", &mut |path, value| match set_checked(
                    &mut merged,
                    &defaults,
                    path,
                    value.clone(),
                ) {
                    Ok(()) => {
                        sources.insert(path.to_string(), Source::File);
                    }
                    Err(problem) => problems.push(format!("{label}: {problem}")),
                }),
                Err(e) => problems.push(format!("{label}: {}", toml_error_line(text, &e))),
            }
        }

        let names = env_names(&defaults);
        for (path, env_name) in &names {
            let alias = ENV_ALIASES.iter().find(|(_, target)| target == path).map(|(alias, _)| *alias);
            let (var, raw) = match (env.get(env_name), alias.and_then(|a| env.get(a).map(|v| (a, v)))) {
                (Some(raw), _) => (env_name.as_str(), raw),
                (None, Some((alias, raw))) => (alias, raw),
                (None, None) => continue,
            };
            let default = lookup(&defaults, path).expect("env names come from the defaults");
            match parse_env_value(raw, default) {
                Ok(value) => match set_checked(&mut merged, &defaults, path, value) {
                    Ok(()) => {
                        sources.insert(path.clone(), Source::Env);
                        env_vars.insert(path.clone(), var.to_string());
                    }
                    Err(problem) => problems.push(format!("${var}: {problem}")),
                },
                Err(why) => problems.push(format!("${var}: {why}")),
            }
        }
        let known: Vec<&str> = names.iter().map(|(_, n)| n.as_str()).collect();
        for var in env.keys().filter(|k| k.starts_with("TAYGA_")) {
            if known.contains(&var.as_str())
                || OTHER_VARIABLES.contains(&var.as_str())
                || OTHER_VARIABLE_PREFIXES.iter().any(|p| var.starts_with(p))
            {
                continue;
            }
            let hint = nearest(var, known.iter().chain(OTHER_VARIABLES).copied())
                .map_or(String::new(), |n| format!("; did you mean ${n}?"));
            problems.push(format!("${var}: not a Tayga variable{hint}"));
        }

        let config = match serde_path_to_error::deserialize::<_, Config>(merged.clone()) {
            Ok(config) => config,
            Err(e) => {
                let path = e.path().to_string();
                let leaf = path.split('[').next().unwrap_or(&path);
                let problem = format!("{path}: {}", e.inner());
                problems.push(match (sources.get(leaf), env_vars.get(leaf), file) {
                    (Some(Source::Env), Some(var), _) => format!("${var}: {problem}"),
                    (_, _, Some((label, _))) => format!("{label}: {problem}"),
                    _ => problem,
                });
                return Err(ConfigError { problems });
            }
        };
        let mut config = config;
        // What set a key whose file cannot be read: its variable, else the file, else the key.
        let set_by = |key: &str| match env_vars.get(key) {
            Some(var) => format!("${var}"),
            None => file.map_or(key.to_string(), |(label, _)| label.to_string()),
        };
        if config.clickhouse.password.is_empty() && !config.clickhouse.password_file.is_empty() {
            let path = &config.clickhouse.password_file;
            match std::fs::read_to_string(path) {
                Ok(text) => config.clickhouse.password = text.trim_end_matches(['\n', '\r']).to_string(),
                Err(e) => {
                    let from = set_by("clickhouse.password_file");
                    problems.push(format!("{from}: cannot read the ClickHouse password file {path}: {e}"));
                }
            }
        }
        if !config.clickhouse.ssl_ca_file.is_empty() {
            match read_ssl_ca(&config.clickhouse.ssl_ca_file) {
                Ok(certificates) => config.clickhouse.ssl_ca = certificates,
                Err(why) => {
                    problems.push(format!("{}: {why}", set_by("clickhouse.ssl_ca_file")));
                }
            }
        }
        problems.extend(read_kafka_files(&mut config.kafka, &set_by));
        for (section, cert, key) in [
            ("api", &config.api.tls_cert_file, &config.api.tls_key_file),
            ("ingest", &config.ingest.tls_cert_file, &config.ingest.tls_key_file),
        ] {
            problems.extend(check_server_tls_files(section, cert, key, &set_by));
        }
        let mut values = BTreeMap::new();
        collect_leaves(&merged, "", &mut |path, value| {
            let source = sources.get(path).cloned().unwrap_or(Source::File);
            values.insert(path.to_string(), (value.clone(), source));
        });
        let loaded = Loaded { config, file: None, values, env_vars };
        if !problems.is_empty() {
            let label = file.map(|(label, _)| label);
            problems.extend(loaded.problems_in(label));
            return Err(ConfigError { problems });
        }
        Ok(loaded)
    }

    /// The semantic problems of the loaded configuration ([`Config::validate`]), each line
    /// naming the variable or the file its value came from.
    pub fn problems(&self) -> Vec<String> {
        let label = self.file.as_ref().map(|f| f.display().to_string());
        self.problems_in(label.as_deref())
    }

    fn problems_in(&self, file: Option<&str>) -> Vec<String> {
        self.config
            .problems()
            .into_iter()
            .map(|p| {
                // A problem of `notifier.targets[0].url` is a problem of the `notifier.targets` leaf.
                let leaf = p.key.split('[').next().unwrap_or(&p.key);
                match (self.source_of(leaf), self.env_vars.get(leaf), file) {
                    (Some(Source::Env), Some(var), _) => format!("${var}: {}", p.message),
                    (Some(Source::File), _, Some(file)) => format!("{file}: {}", p.message),
                    _ => p.message,
                }
            })
            .collect()
    }

    /// Where the value at `path` came from.
    pub fn source_of(&self, path: &str) -> Option<&Source> {
        self.values.get(path).map(|(_, s)| s)
    }
}

/// The certificates of a PEM CA file (`[clickhouse] ssl_ca_file`), each checked to be usable
/// as a trust anchor, so a file that cannot serve is reported when the configuration is
/// loaded, naming the file, rather than at the first connection.
pub fn read_ssl_ca(path: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    read_ca_file(path, "ClickHouse")
}

/// [`read_ssl_ca`] for the CA file of `server` (`ClickHouse`, `broker`).
pub fn read_ca_file(path: &str, server: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    let certificates = read_certificates(path, &format!("{server} CA file"))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in &certificates {
        roots
            .add(certificate.clone())
            .map_err(|e| format!("the {server} CA file {path} holds a certificate that cannot be a CA: {e}"))?;
    }
    Ok(certificates)
}

/// The PEM certificates of `path`, at least one; `what` names the file in the error.
fn read_certificates(path: &str, what: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let pem = std::fs::read(path).map_err(|e| format!("cannot read the {what} {path}: {e}"))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the {what} {path} is not PEM: {e}"))?;
    if certificates.is_empty() {
        return Err(format!("the {what} {path} holds no PEM certificate"));
    }
    Ok(certificates)
}

/// Reads what `[kafka]` names by file (the password, the CA, the client certificate and key)
/// into `kafka`, as `[clickhouse]`'s are: a file that cannot serve is one problem at load
/// time, naming it and what set it.
fn read_kafka_files(kafka: &mut KafkaConfig, set_by: &dyn Fn(&str) -> String) -> Vec<String> {
    use rustls::pki_types::{pem::PemObject, PrivateKeyDer};
    let mut problems = Vec::new();
    if kafka.sasl_password.is_empty() && !kafka.sasl_password_file.is_empty() {
        let path = &kafka.sasl_password_file;
        match std::fs::read_to_string(path) {
            Ok(text) => kafka.sasl_password = text.trim_end_matches(['\n', '\r']).to_string(),
            Err(e) => problems.push(format!(
                "{}: cannot read the broker password file {path}: {e}",
                set_by("kafka.sasl_password_file")
            )),
        }
    }
    if !kafka.ssl_ca_file.is_empty() {
        match read_ca_file(&kafka.ssl_ca_file, "broker") {
            Ok(certificates) => kafka.ssl_ca = certificates,
            Err(why) => problems.push(format!("{}: {why}", set_by("kafka.ssl_ca_file"))),
        }
    }
    if !kafka.ssl_certificate_file.is_empty() && !kafka.ssl_key_file.is_empty() {
        let chain = read_certificates(&kafka.ssl_certificate_file, "broker client certificate file")
            .map_err(|why| format!("{}: {why}", set_by("kafka.ssl_certificate_file")));
        let path = &kafka.ssl_key_file;
        let key = PrivateKeyDer::from_pem_file(path).map_err(|e| {
            format!(
                "{}: the broker client key file {path} holds no unencrypted PEM private key: {e}",
                set_by("kafka.ssl_key_file")
            )
        });
        match (chain, key) {
            (Ok(chain), Ok(key)) => match client_identity_usable(&chain, &key) {
                Ok(()) => kafka.ssl_client = Some(ClientIdentity { chain, key: std::sync::Arc::new(key) }),
                Err(e) => problems.push(format!(
                    "{}: the broker client key file {path} cannot sign for the certificate of {}: {e}",
                    set_by("kafka.ssl_key_file"),
                    kafka.ssl_certificate_file
                )),
            },
            (chain, key) => problems.extend(chain.err().into_iter().chain(key.err())),
        }
    }
    problems
}

/// Whether a listener's certificate and key files (`[api]`, `[ingest]` `tls_cert_file` and
/// `tls_key_file`) can serve: readable PEM, and a key that goes with the certificate. Read
/// here only to say so at load time (`config check`, a daemon's start), naming the file; the
/// listener reads them again, and again on each change (`daemon::tls`).
fn check_server_tls_files(section: &str, cert: &str, key: &str, set_by: &dyn Fn(&str) -> String) -> Vec<String> {
    use rustls::pki_types::{pem::PemObject, PrivateKeyDer};
    if cert.is_empty() || key.is_empty() {
        return Vec::new();
    }
    let cert_key = format!("{section}.tls_cert_file");
    let key_key = format!("{section}.tls_key_file");
    let chain = read_certificates(cert, "certificate file").map_err(|why| format!("{}: {why}", set_by(&cert_key)));
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{}: the key file {key} holds no unencrypted PEM private key: {e}", set_by(&key_key)));
    match (chain, private) {
        (Ok(chain), Ok(private)) => {
            let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
            let usable = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private));
            match usable {
                Ok(_) => Vec::new(),
                Err(e) => vec![format!(
                    "{}: the key in {key} does not go with the certificate in {cert}: {e}",
                    set_by(&key_key)
                )],
            }
        }
        (chain, private) => chain.err().into_iter().chain(private.err()).collect(),
    }
}

/// Whether rustls (with ring, as the broker clients use it) takes `key` for `chain`.
fn client_identity_usable(
    chain: &[rustls::pki_types::CertificateDer<'static>],
    key: &rustls::pki_types::PrivateKeyDer<'static>,
) -> Result<(), rustls::Error> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain.to_vec(), key.clone_key())
        .map(drop)
}

/// Keys whose values are never printed.
pub fn is_secret(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or(path);
    matches!(
        last,
        "password" | "sasl_password" | "token" | "secret" | "auth_tokens" | "operator_tokens" | "viewer_tokens"
    ) || path.contains(".headers")
}

/// Calls `f` for every leaf of a TOML tree. Arrays are leaves: their elements have no
/// defaults to compare against, so they are checked whole by serde.
fn collect_leaves(value: &Value, prefix: &str, f: &mut dyn FnMut(&str, &Value)) {
    match value {
        Value::Table(table) => {
            for (key, child) in table {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                collect_leaves(child, &path, f);
            }
        }
        leaf => f(prefix, leaf),
    }
}

fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(root, |node, key| node.as_table()?.get(key))
}

/// Sets `path` in `merged` after checking that the defaults know the key and that the value
/// has the default's type.
fn set_checked(merged: &mut Value, defaults: &Value, path: &str, value: Value) -> Result<(), String> {
    let Some(default) = lookup(defaults, path) else {
        return Err(format!("unknown key `{path}`"));
    };
    if !same_kind(default, &value) {
        return Err(format!("`{path}` must be {}, found {}", kind_name(default), kind_name(&value)));
    }
    let (parent, key) = match path.rsplit_once('.') {
        Some((parent, key)) => (lookup_mut(merged, parent), key),
        None => (Some(&mut *merged), path),
    };
    parent
        .and_then(Value::as_table_mut)
        .expect("merged has every table the defaults have")
        .insert(key.to_string(), value);
    Ok(())
}

fn lookup_mut<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.').try_fold(root, |node, key| node.as_table_mut()?.get_mut(key))
}

fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b) || matches!((a, b), (Value::Float(_), Value::Integer(_)))
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "true or false",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// The environment variable for every leaf: `kafka.topic_prefix` → `TAYGA_KAFKA_TOPIC_PREFIX`.
fn env_names(defaults: &Value) -> Vec<(String, String)> {
    let mut names = Vec::new();
    collect_leaves(defaults, "", &mut |path, _| {
        names.push((path.to_string(), env_name(path)));
    });
    names
}

pub fn env_name(path: &str) -> String {
    format!("TAYGA_{}", path.replace('.', "_").to_uppercase())
}

/// Environment values are text; they take the type of the key's default. Arrays and tables
/// are written as TOML (`TAYGA_NOTIFIER_TARGETS='[{name="ops", url="http://…"}]'`).
fn parse_env_value(raw: &str, default: &Value) -> Result<Value, String> {
    match default {
        Value::String(_) => Ok(Value::String(raw.to_string())),
        Value::Integer(_) => {
            raw.trim().parse::<i64>().map(Value::Integer).map_err(|_| format!("`{raw}` is not an integer"))
        }
        Value::Float(_) => raw.trim().parse::<f64>().map(Value::Float).map_err(|_| format!("`{raw}` is not a number")),
        Value::Boolean(_) => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Value::Boolean(true)),
            "false" | "0" | "no" | "off" => Ok(Value::Boolean(false)),
            _ => Err(format!("`{raw}` is not true or false")),
        },
        _ => format!("v = {raw}")
            .parse::<toml::Table>()
            .map_err(|e| format!("not a TOML value: {e}"))
            .and_then(|mut t| t.remove("v").ok_or_else(|| "empty value".to_string())),
    }
}

/// A TOML syntax error as one line: where, then what (toml's own text spans several lines).
fn toml_error_line(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("not valid TOML at line {line}, column {column}: {what}")
        }
        None => format!("not valid TOML: {what}"),
    }
}

/// The known name closest to a misspelt one, if one is close enough to be what was meant.
fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|(d, _)| *d <= 3.max(name.len() / 5))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Keys whose values are URLs shown through [`redact::url`].
fn is_url(path: &str) -> bool {
    path.ends_with("url")
}

/// A value as one line of TOML, for display: secrets hidden, URLs redacted, targets as
/// `name=url` with the url's path hidden.
pub fn display_value(path: &str, value: &Value) -> String {
    match value {
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        _ if is_secret(path) => redact::HIDDEN.to_string(),
        Value::String(s) if is_url(path) => Value::String(redact::url(s)).to_string(),
        Value::Array(items) if path.ends_with("targets") => {
            let shown: Vec<String> = items
                .iter()
                .map(|t| {
                    let get = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    format!("{}={}", get("name"), redact::target_url(&get("url")))
                })
                .collect();
            format!("[{}]", shown.join(", "))
        }
        other => other.to_string(),
    }
}

/// A value as typed JSON (`config show --json`): numbers stay numbers, arrays arrays, with the
/// same redaction as [`display_value`]: secrets, URLs and every target header value.
pub fn json_value(path: &str, value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::String(s) if s.is_empty() => J::String(String::new()),
        _ if is_secret(path) => J::String(redact::HIDDEN.to_string()),
        Value::String(s) if is_url(path) => J::String(redact::url(s)),
        Value::Array(items) if path.ends_with("targets") => J::Array(
            items
                .iter()
                .map(|t| {
                    let mut t = serde_json::to_value(t).unwrap_or(J::Null);
                    if let Some(obj) = t.as_object_mut() {
                        if let Some(J::String(u)) = obj.get_mut("url") {
                            *u = redact::target_url(u);
                        }
                        if let Some(J::Object(headers)) = obj.get_mut("headers") {
                            headers.values_mut().for_each(|v| *v = J::String(redact::HIDDEN.to_string()));
                        }
                    }
                    t
                })
                .collect(),
        ),
        other => serde_json::to_value(other).unwrap_or(J::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_work_with_no_file_and_no_env() {
        let loaded = Loaded::from_parts(None, &env(&[])).unwrap();
        assert_eq!(loaded.config.kafka.brokers, "127.0.0.1:9092");
        assert_eq!(loaded.config.clickhouse.url, "http://127.0.0.1:8123");
        assert_eq!(loaded.config.clickhouse.database, "tayga");
        assert_eq!(loaded.config.kafka.partitions, 12);
        assert_eq!(loaded.config.logminer.ownership_window_min, 60);
        assert_eq!(loaded.source_of("kafka.brokers"), Some(&Source::Default));
    }

    #[test]
    fn file_then_env_with_sources() {
        let file = "[kafka]\nbrokers = \"file:9092\"\npartitions = 6\n";
        let loaded =
            Loaded::from_parts(Some(file), &env(&[("TAYGA_KAFKA_BROKERS", "env:9092"), ("LOGMINER_REPLICAS", "3")]))
                .unwrap();
        assert_eq!(loaded.config.kafka.brokers, "env:9092");
        assert_eq!(loaded.source_of("kafka.brokers"), Some(&Source::Env));
        assert_eq!(loaded.config.kafka.partitions, 6);
        assert_eq!(loaded.source_of("kafka.partitions"), Some(&Source::File));
        assert_eq!(loaded.config.logminer.replicas, 3);
        assert_eq!(loaded.source_of("logminer.replicas"), Some(&Source::Env));
    }

    #[test]
    fn generic_env_name_beats_alias() {
        let loaded =
            Loaded::from_parts(None, &env(&[("TAYGA_LOGMINER_REPLICAS", "2"), ("LOGMINER_REPLICAS", "5")])).unwrap();
        assert_eq!(loaded.config.logminer.replicas, 2);
    }

    #[test]
    fn every_unknown_key_is_named() {
        let file = "[kafka]\nbrokerz = \"x\"\n[nope]\na = 1\n";
        let err = Loaded::from_parts(Some(file), &env(&[])).unwrap_err();
        assert_eq!(err.problems, vec!["tayga.toml: unknown key `kafka.brokerz`", "tayga.toml: unknown key `nope.a`"]);
    }

    #[test]
    fn wrong_types_are_named_with_the_expected_type() {
        let err = Loaded::from_parts(
            Some("[kafka]\npartitions = \"twelve\"\n"),
            &env(&[("TAYGA_NOTIFIER_MAX_ATTEMPTS", "many")]),
        )
        .unwrap_err();
        assert_eq!(
            err.problems,
            vec![
                "tayga.toml: `kafka.partitions` must be an integer, found a string",
                "$TAYGA_NOTIFIER_MAX_ATTEMPTS: `many` is not an integer",
            ]
        );
    }

    #[test]
    fn enum_values_are_checked_by_serde_with_their_path() {
        let err = Loaded::from_parts(None, &env(&[("TAYGA_INGEST_PIPELINE", "carrier-pigeon")])).unwrap_err();
        assert!(
            err.problems[0].starts_with("$TAYGA_INGEST_PIPELINE: ingest.pipeline: unknown variant `carrier-pigeon`"),
            "{err}"
        );
    }

    #[test]
    fn targets_come_from_toml_arrays_in_file_or_env() {
        let file = "[[notifier.targets]]\nname = \"ops\"\nurl = \"http://127.0.0.1:1/hook\"\nheaders = { Authorization = \"Bearer s3cret\" }\n";
        let loaded = Loaded::from_parts(Some(file), &env(&[])).unwrap();
        assert_eq!(loaded.config.notifier.targets[0].name, "ops");
        let (value, _) = &loaded.values["notifier.targets"];
        assert!(!display_value("notifier.targets", value).contains("s3cret"));

        let loaded = Loaded::from_parts(
            None,
            &env(&[("TAYGA_NOTIFIER_TARGETS", r#"[{name="a", url="http://x/", kinds=["spike"]}]"#)]),
        )
        .unwrap();
        assert_eq!(loaded.config.notifier.targets[0].kinds, vec!["spike".to_string()]);
    }

    #[test]
    fn unknown_field_inside_a_target_is_reported() {
        let file = "[[notifier.targets]]\nname = \"ops\"\nurl = \"http://x/\"\nretries = 3\n";
        let err = Loaded::from_parts(Some(file), &env(&[])).unwrap_err();
        assert!(err.problems[0].contains("unknown field `retries`"), "{err}");
        assert!(err.problems[0].starts_with("tayga.toml: notifier.targets[0]"), "{err}");
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(display_value("clickhouse.password", &Value::String("pw".into())), "<redacted>");
        let tokens = Value::Array(vec![Value::String("t0ken".into())]);
        assert_eq!(display_value("ingest.auth_tokens", &tokens), "<redacted>");
        assert_eq!(json_value("ingest.auth_tokens", &tokens), serde_json::json!("<redacted>"));
        assert_eq!(display_value("ingest.auth_tokens_file", &Value::String("/run/t".into())), "\"/run/t\"");
        assert_eq!(display_value("clickhouse.password", &Value::String(String::new())), "\"\"");
        assert_eq!(
            display_value("clickhouse.url", &Value::String("http://u:pw@h:8123".into())),
            "\"http://<redacted>@h:8123\""
        );
        assert_eq!(json_value("clickhouse.password", &Value::String(String::new())), serde_json::json!(""));
        assert_eq!(display_value("kafka.sasl_password", &Value::String("pw".into())), "<redacted>");
        assert_eq!(json_value("kafka.sasl_password", &Value::String("pw".into())), serde_json::json!("<redacted>"));
        let file = Value::String("/run/secrets/broker".into());
        assert_eq!(display_value("kafka.sasl_password_file", &file), "\"/run/secrets/broker\"");
    }

    #[test]
    fn the_broker_password_comes_from_a_file_and_the_combinations_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker-pw");
        std::fs::write(&path, "s3cret\n").unwrap();
        let file = format!(
            "[kafka]\nsecurity_protocol = \"SASL_SSL\"\nsasl_mechanism = \"scram-sha-512\"\nsasl_username = \"tayga\"\nsasl_password_file = \"{}\"\n",
            path.display()
        );
        let loaded = Loaded::from_parts(Some(&file), &env(&[])).unwrap();
        assert_eq!(loaded.config.kafka.sasl_password, "s3cret");
        assert_eq!(loaded.config.kafka.protocol(), Ok(SecurityProtocol::SaslSsl));
        assert_eq!(loaded.config.kafka.mechanism(), Ok(SaslMechanism::ScramSha512));
        assert!(loaded.problems().is_empty(), "{:?}", loaded.problems());

        let missing = dir.path().join("no-such-file");
        let err = Loaded::from_parts(None, &env(&[("TAYGA_KAFKA_SASL_PASSWORD_FILE", missing.to_str().unwrap())]))
            .unwrap_err();
        assert!(
            err.problems[0].starts_with(&format!(
                "$TAYGA_KAFKA_SASL_PASSWORD_FILE: cannot read the broker password file {}",
                missing.display()
            )),
            "{err}"
        );

        let problems = |pairs: &[(&str, &str)]| Loaded::from_parts(None, &env(pairs)).unwrap().problems();
        assert_eq!(
            problems(&[("TAYGA_KAFKA_SECURITY_PROTOCOL", "sasl_plaintext"), ("TAYGA_KAFKA_SASL_MECHANISM", "GSSAPI")]),
            vec![
                "$TAYGA_KAFKA_SASL_MECHANISM: kafka.sasl_mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, is `GSSAPI`",
                "kafka.sasl_username must be set with security_protocol sasl_plaintext",
                "kafka.sasl_password (or sasl_password_file) must be set with security_protocol sasl_plaintext",
            ]
        );
        assert_eq!(
            problems(&[("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl"), ("TAYGA_KAFKA_SSL_KEY_FILE", "/k.pem")]),
            vec!["kafka.ssl_certificate_file must be set with ssl_key_file: a client certificate needs its key"]
        );
        assert_eq!(
            problems(&[("TAYGA_KAFKA_SECURITY_PROTOCOL", "ssl"), ("TAYGA_KAFKA_SASL_USERNAME", "u")]),
            vec!["$TAYGA_KAFKA_SASL_USERNAME: kafka.sasl_username is set but security_protocol ssl sends no credentials: use sasl_ssl"]
        );
        assert!(problems(&[]).is_empty());
    }

    #[test]
    fn a_misspelt_variable_is_an_error_that_suggests_the_key() {
        let err = Loaded::from_parts(
            None,
            &env(&[("TAYGA_KAFKA_BROKER", "x:1"), ("TAYGA_CLICKHOUSE_PASWORD", "p"), ("TAYGA_LOG", "debug")]),
        )
        .unwrap_err();
        assert_eq!(
            err.problems,
            vec![
                "$TAYGA_CLICKHOUSE_PASWORD: not a Tayga variable; did you mean $TAYGA_CLICKHOUSE_PASSWORD?",
                "$TAYGA_KAFKA_BROKER: not a Tayga variable; did you mean $TAYGA_KAFKA_BROKERS?",
            ]
        );
    }

    #[test]
    fn the_logminer_pending_hits_bound_is_a_setting_of_at_least_one() {
        assert_eq!(Config::default().logminer.max_pending_hits, 200_000);
        let loaded = Loaded::from_parts(None, &env(&[("TAYGA_LOGMINER_MAX_PENDING_HITS", "5000")])).unwrap();
        assert_eq!(loaded.config.logminer.max_pending_hits, 5000);
        let loaded = Loaded::from_parts(None, &env(&[("TAYGA_LOGMINER_MAX_PENDING_HITS", "0")])).unwrap();
        assert_eq!(
            loaded.problems(),
            vec!["$TAYGA_LOGMINER_MAX_PENDING_HITS: logminer.max_pending_hits must be at least 1"]
        );
    }

    #[test]
    fn the_password_can_come_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\n").unwrap();
        let loaded =
            Loaded::from_parts(None, &env(&[("TAYGA_CLICKHOUSE_PASSWORD_FILE", path.to_str().unwrap())])).unwrap();
        assert_eq!(loaded.config.clickhouse.password, "s3cret");
        let err = Loaded::from_parts(None, &env(&[("TAYGA_CLICKHOUSE_PASSWORD_FILE", "/nonexistent/pw")])).unwrap_err();
        assert!(err.problems[0].starts_with("$TAYGA_CLICKHOUSE_PASSWORD_FILE: cannot read"), "{err}");
    }

    #[test]
    fn the_broker_policy_keeps_its_former_name() {
        for value in ["broker", "redpanda"] {
            let loaded = Loaded::from_parts(None, &env(&[("TAYGA_INGEST_PIPELINE", value)])).unwrap();
            assert_eq!(loaded.config.ingest.pipeline, PipelinePolicy::Broker, "{value}");
        }
    }

    #[test]
    fn a_ca_file_that_cannot_serve_is_reported_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err =
            Loaded::from_parts(None, &env(&[("TAYGA_CLICKHOUSE_SSL_CA_FILE", missing.to_str().unwrap())])).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(err.problems[0].starts_with("$TAYGA_CLICKHOUSE_SSL_CA_FILE: cannot read the ClickHouse CA file "));
        assert!(err.problems[0].contains("missing.pem"), "{err}");
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "not a certificate\n").unwrap();
        let err =
            Loaded::from_parts(None, &env(&[("TAYGA_CLICKHOUSE_SSL_CA_FILE", not_pem.to_str().unwrap())])).unwrap_err();
        assert_eq!(
            err.problems,
            vec![format!(
                "$TAYGA_CLICKHOUSE_SSL_CA_FILE: the ClickHouse CA file {} holds no PEM certificate",
                not_pem.display()
            )]
        );
    }

    #[test]
    fn an_alias_is_reported_under_its_own_name() {
        let err = Loaded::from_parts(None, &env(&[("LOGMINER_REPLICAS", "abc")])).unwrap_err();
        assert_eq!(err.problems, vec!["$LOGMINER_REPLICAS: `abc` is not an integer"]);
    }

    #[test]
    fn every_problem_is_reported_at_once_each_naming_its_source() {
        let file = "[kafka]\nbrokerz = 1\n[logminer.drain]\nsim_th = 7.5\ndepth = 0\n";
        let err = Loaded::from_parts(Some(file), &env(&[("TAYGA_KAFKA_PARTITIONS", "0")])).unwrap_err();
        assert_eq!(err.problems.len(), 4, "{err}");
        assert_eq!(err.problems[0], "tayga.toml: unknown key `kafka.brokerz`");
        assert!(err.problems.iter().any(|p| p.starts_with("$TAYGA_KAFKA_PARTITIONS: kafka.partitions")), "{err}");
        assert!(err.problems.iter().any(|p| p.starts_with("tayga.toml: logminer.drain.sim_th")), "{err}");
        assert!(err.problems.iter().any(|p| p.starts_with("tayga.toml: logminer.drain.depth")), "{err}");
    }

    #[test]
    fn a_toml_error_is_one_line_naming_the_file() {
        let err = Loaded::from_parts(Some("[kafka]\nbrokers = \n"), &env(&[])).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert!(err.problems[0].starts_with("tayga.toml: not valid TOML at line 2, column"), "{err}");
        assert!(!err.problems[0].contains('\n'), "{err}");
    }
}
