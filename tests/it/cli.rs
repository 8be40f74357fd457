//! The operator commands of the foundation, run as the real binary against the real
//! ClickHouse and broker: config, migrate, topics, generated files, compose.yaml.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use clap::Parser;
use common::{run, TestEnv};
use tayga::cli::Cli;

#[test]
fn config_check_names_an_unknown_key_and_exits_1() {
    let env = TestEnv::new("cfg_unknown");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tayga.toml");
    std::fs::write(&file, "[kafka]\nbrokers = \"b:9092\"\n[logminer]\nownership_windw_min = 30\n").unwrap();
    let (out, _, stderr) = run(env.tayga().arg("--config").arg(&file).args(["config", "check"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("unknown key `logminer.ownership_windw_min`"), "{stderr}");
}

#[test]
fn config_check_reports_every_invalid_value_on_its_own_line() {
    let env = TestEnv::new("cfg_invalid");
    let (out, _, stderr) =
        run(env.tayga().env("LOGMINER_REPLICAS", "20").env("TAYGA_KAFKA_PARTITIONS", "0").args(["config", "check"]));
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines.iter().any(|l| l.contains("kafka.partitions must be at least 1")));
    assert!(lines.iter().any(|l| l.contains("LOGMINER_REPLICAS) must be 1 to 12, is 20")));
}

#[test]
fn config_show_gives_each_value_its_source() {
    let env = TestEnv::new("cfg_show");
    let (out, stdout, stderr) = run(env.tayga().env("TAYGA_KAFKA_BROKERS", "x").args(["--json", "config", "show"]));
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["values"]["kafka.brokers"]["value"], "x");
    assert_eq!(doc["values"]["kafka.brokers"]["source"], "env");
    assert_eq!(doc["values"]["kafka.partitions"]["source"], "default");
    assert_eq!(doc["values"]["notifier.max_age_secs"]["value"], 3600);
}

#[test]
fn config_show_table_with_defaults() {
    // Only defaults: the table is the documentation of every key and default.
    let (out, stdout, stderr) = run(std::process::Command::new(env!("CARGO_BIN_EXE_tayga"))
        .env_clear()
        .current_dir(std::env::temp_dir())
        .args(["config", "show"]));
    assert!(out.status.success(), "{stderr}");
    insta::assert_snapshot!("config_show_defaults", stdout);
}

#[test]
fn secrets_never_reach_config_show() {
    let env = TestEnv::new("cfg_secret");
    let (_, stdout, _) = run(env
        .tayga()
        .env("TAYGA_CLICKHOUSE_PASSWORD", "hunter2")
        .env(
            "TAYGA_NOTIFIER_TARGETS",
            r#"[{name="ops", url="http://127.0.0.1:9/h", headers={Authorization="Bearer tok3n"}}]"#,
        )
        .args(["config", "show"]));
    assert!(!stdout.contains("hunter2") && !stdout.contains("tok3n"), "{stdout}");
    assert!(stdout.contains("<redacted>") && stdout.contains("ops=http://127.0.0.1:9/h"), "{stdout}");
}

#[tokio::test]
async fn migrate_twice_changes_nothing_the_second_time() {
    let env = TestEnv::new("migrate");
    let (out, stdout, stderr) = run(env.tayga().arg("migrate"));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("applied migration 1"), "{stdout}");

    let store = env.store();
    let schema = || async {
        store
            .query_for_tests(
                "SELECT name, engine, create_table_query FROM system.tables WHERE database = ? ORDER BY name",
            )
            .bind(store.database())
            .fetch_all::<(String, String, String)>()
            .await
            .unwrap()
    };
    let before = schema().await;
    let mut tables: Vec<String> = before.iter().map(|t| t.0.clone()).collect();
    tables.retain(|t| t != "schema_migrations");
    let mut expected = tayga::store::schema::table_names();
    expected.extend(tayga::store::schema::view_names());
    expected.sort();
    assert_eq!(tables, expected);

    let (out, stdout, _) = run(env.tayga().args(["--json", "migrate"]));
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["applied"], serde_json::json!([]));
    assert_eq!(report["database_created"], false);
    assert_eq!(schema().await, before);
    let recorded: u64 = store.query_for_tests("SELECT count() FROM schema_migrations").fetch_one().await.unwrap();
    assert_eq!(recorded, tayga::store::schema::MIGRATIONS.len() as u64);
}

#[test]
fn migrate_against_a_dead_server_says_what_failed_in_one_line() {
    let env = TestEnv::new("migrate_dead");
    let (out, _, stderr) = run(env.tayga().env("TAYGA_CLICKHOUSE_URL", "http://127.0.0.1:1").arg("migrate"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: migrating database"), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
}

#[test]
fn topics_create_twice_then_list() {
    let env = TestEnv::new("topics");
    let (out, stdout, stderr) = run(env.tayga().args(["--json", "topics", "create"]));
    assert!(out.status.success(), "{stderr}");
    let first: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    let shape: Vec<(String, String, i64)> = first
        .iter()
        .map(|t| {
            (
                t["outcome"].as_str().unwrap().into(),
                t["topic"].as_str().unwrap().into(),
                t["partitions"].as_i64().unwrap(),
            )
        })
        .collect();
    let p = &env.name;
    assert_eq!(
        shape,
        vec![
            ("created".into(), format!("{p}.signals"), 12),
            ("created".into(), format!("{p}.logs"), 12),
            ("created".into(), format!("{p}.stories"), 3),
            ("created".into(), format!("{p}.alerts"), 3),
        ]
    );

    let (out, stdout, stderr) = run(env.tayga().args(["topics", "create"]));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    insta::assert_snapshot!("topics_create_again", stdout.replace(p.as_str(), "PREFIX"));

    let (out, stdout, stderr) = run(env.tayga().args(["--json", "topics", "list"]));
    assert!(out.status.success(), "{stderr}");
    let list: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    let groups: Vec<(String, Vec<String>)> = list
        .iter()
        .map(|t| {
            let groups = t["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["group"].as_str().unwrap().replace(p.as_str(), "P"))
                .collect();
            (t["topic"].as_str().unwrap().replace(p.as_str(), "P"), groups)
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            ("P.signals".into(), vec!["P-writer".into(), "P-assembler".into()]),
            ("P.logs".into(), vec!["P-logminer".into()]),
            ("P.stories".into(), vec![]),
            ("P.alerts".into(), vec!["P-notifier".into()]),
        ]
    );
    assert!(list.iter().all(|t| t["records"] == 0 && t["groups"].as_array().unwrap().iter().all(|g| g["lag"] == 0)));
}

#[test]
fn a_different_partition_count_on_an_existing_topic_is_a_warning() {
    let env = TestEnv::new("topics_warn");
    assert!(run(env.tayga().args(["topics", "create"])).0.status.success());
    let (out, _, stderr) = run(env.tayga().env("TAYGA_KAFKA_PARTITIONS", "6").args(["topics", "create"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr.contains("has 12 partitions, the configuration asks for 6"), "{stderr}");
}

/// What differs between the committed generated files and freshly generated ones.
fn stale_files(fresh: &BTreeMap<std::path::PathBuf, Vec<u8>>, root: &Path) -> Vec<String> {
    let mut stale: Vec<String> = fresh
        .iter()
        .filter(|(path, content)| std::fs::read(root.join(path)).ok().as_ref() != Some(*content))
        .map(|(path, _)| path.display().to_string())
        .collect();
    for dir in ["completions", "man"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = Path::new(dir).join(entry.unwrap().file_name());
            if !fresh.contains_key(&path) {
                stale.push(format!("{} (no longer generated)", path.display()));
            }
        }
    }
    stale
}

#[test]
fn committed_completions_and_man_pages_are_current() {
    let fresh = tayga::cmd::generate::generated_files().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stale = stale_files(&fresh, root);
    assert!(stale.is_empty(), "stale generated files: {stale:?}\nrefresh them with: cargo run -- generate");
}

#[test]
fn the_staleness_check_notices_a_new_flag() {
    // Render with one extra flag, as if someone added it without regenerating.
    let mut cmd =
        tayga::cli::command().arg(clap::Arg::new("extra").long("extra-flag").action(clap::ArgAction::SetTrue));
    let mut bash = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "tayga", &mut bash);
    let mut fresh = tayga::cmd::generate::generated_files().unwrap();
    fresh.insert("completions/tayga.bash".into(), bash);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(stale_files(&fresh, root), vec!["completions/tayga.bash".to_string()]);
}

#[test]
fn every_compose_command_parses_with_the_real_cli() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/compose.yaml")).unwrap();
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    // Resolve YAML merge keys (`<<: *tayga`) as Compose does.
    doc.apply_merge().unwrap();
    let services = doc["services"].as_mapping().unwrap();
    let mut daemons = Vec::new();
    for (name, service) in services {
        let name = name.as_str().unwrap();
        if service["image"].as_str() != Some("tayga:latest") {
            continue;
        }
        let args: Vec<String> =
            service["command"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        let parsed = Cli::try_parse_from(std::iter::once("tayga".to_string()).chain(args.clone()));
        assert!(
            parsed.is_ok(),
            "compose service {name}: `tayga {}` does not parse: {}",
            args.join(" "),
            parsed.unwrap_err()
        );
        if args[0] == "serve" {
            daemons.push(args[1].clone());
            assert_eq!(service["stop_grace_period"].as_str(), Some("40s"), "{name}");
            assert!(service["healthcheck"]["test"].is_sequence(), "{name} has no healthcheck");
        }
    }
    daemons.sort();
    assert_eq!(daemons, vec!["api", "assembler", "ingest", "logminer", "notifier", "writer"]);
    let logminer = &services["logminer"];
    assert_eq!(logminer["deploy"]["replicas"].as_str(), Some("${LOGMINER_REPLICAS:-1}"));
}
