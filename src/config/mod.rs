//! Tayga's configuration: `tayga.toml`, overridden key by key from the environment.
//!
//! Loading is layered so that `tayga config show` can say where every value came from:
//! the built-in defaults, then the file, then the environment (`TAYGA_<SECTION>_<KEY>`, plus
//! the names the seeds use, such as `LOGMINER_REPLICAS`). Every layer is merged as a TOML
//! tree before anything is deserialised, so an unknown key or a wrongly typed value is
//! reported by its dotted path, every problem at once, instead of one serde error at a time.

mod names;
mod sections;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Value;

pub use names::Names;
pub use sections::*;

/// Environment names the seeds use, beside the generic `TAYGA_<SECTION>_<KEY>` form.
/// The generic name wins when both are set.
const ENV_ALIASES: &[(&str, &str)] = &[("LOGMINER_REPLICAS", "logminer.replicas")];

/// The file read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "tayga.toml";

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
                    .map_err(|e| ConfigError::one(format!("cannot read config file {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let mut loaded = Self::from_parts(text.as_deref(), &env)?;
        loaded.file = file;
        Ok(loaded)
    }

    /// Builds the configuration from a file's text (if any) and an environment. Pure, so
    /// tests need not touch the process environment.
    pub fn from_parts(file_text: Option<&str>, env: &BTreeMap<String, String>) -> Result<Loaded, ConfigError> {
        let defaults = Value::try_from(Config::default()).expect("the default configuration serialises to TOML");
        let mut merged = defaults.clone();
        let mut sources = BTreeMap::new();
        let mut problems = Vec::new();
        collect_leaves(&defaults, "", &mut |path, _| {
            sources.insert(path.to_string(), Source::Default);
        });

        if let Some(text) = file_text {
            let file: Value = text
                .parse::<toml::Table>()
                .map(Value::Table)
                .map_err(|e| ConfigError::one(format!("config file is not valid TOML: {e}")))?;
            collect_leaves(
                &file,
                "",
                &mut |path, value| match set_checked(&mut merged, &defaults, path, value.clone()) {
                    Ok(()) => {
                        sources.insert(path.to_string(), Source::File);
                    }
                    Err(problem) => problems.push(problem),
                },
            );
        }

        for (path, env_name) in env_names(&defaults) {
            let raw = env.get(&env_name).or_else(|| {
                ENV_ALIASES.iter().find(|(_, target)| *target == path).and_then(|(alias, _)| env.get(*alias))
            });
            let Some(raw) = raw else { continue };
            let default = lookup(&defaults, &path).expect("env names come from the defaults");
            match parse_env_value(raw, default) {
                Ok(value) => match set_checked(&mut merged, &defaults, &path, value) {
                    Ok(()) => {
                        sources.insert(path.clone(), Source::Env);
                    }
                    Err(problem) => problems.push(format!("{problem} (from ${env_name})")),
                },
                Err(why) => problems.push(format!("${env_name}: {why}")),
            }
        }

        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        let config: Config = serde_path_to_error::deserialize(merged.clone())
            .map_err(|e| ConfigError::one(format!("{}: {}", e.path(), e.inner())))?;

        let mut values = BTreeMap::new();
        collect_leaves(&merged, "", &mut |path, value| {
            let source = sources.get(path).cloned().unwrap_or(Source::File);
            values.insert(path.to_string(), (value.clone(), source));
        });
        Ok(Loaded { config, file: None, values })
    }

    /// Where the value at `path` came from.
    pub fn source_of(&self, path: &str) -> Option<&Source> {
        self.values.get(path).map(|(_, s)| s)
    }
}

/// Keys whose values are never printed.
pub fn is_secret(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or(path);
    matches!(last, "password" | "token" | "secret") || path.contains(".headers")
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

/// A value as one line of TOML, for display.
pub fn display_value(path: &str, value: &Value) -> String {
    if is_secret(path) && !matches!(value, Value::String(s) if s.is_empty()) {
        return "<redacted>".to_string();
    }
    match value {
        Value::Array(items) if path.ends_with("targets") => {
            // Targets carry headers (tokens): show names and urls only.
            let shown: Vec<String> = items
                .iter()
                .map(|t| {
                    let get = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    format!("{}={}", get("name"), get("url"))
                })
                .collect();
            format!("[{}]", shown.join(", "))
        }
        other => other.to_string(),
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
        assert_eq!(err.problems, vec!["unknown key `kafka.brokerz`", "unknown key `nope.a`"]);
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
                "`kafka.partitions` must be an integer, found a string",
                "$TAYGA_NOTIFIER_MAX_ATTEMPTS: `many` is not an integer",
            ]
        );
    }

    #[test]
    fn enum_values_are_checked_by_serde_with_their_path() {
        let err = Loaded::from_parts(None, &env(&[("TAYGA_INGEST_PIPELINE", "carrier-pigeon")])).unwrap_err();
        assert!(err.problems[0].starts_with("ingest.pipeline: unknown variant `carrier-pigeon`"), "{err}");
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
        assert!(err.problems[0].starts_with("notifier.targets[0]"), "{err}");
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(display_value("clickhouse.password", &Value::String("pw".into())), "<redacted>");
        assert_eq!(display_value("clickhouse.password", &Value::String(String::new())), "\"\"");
    }
}
