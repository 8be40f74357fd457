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
    assert!(stdout.contains("<redacted>") && stdout.contains("ops=http://127.0.0.1:9/<redacted>"), "{stdout}");
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
    // Created with the `[kafka]` retention and compression, as the broker describes them.
    assert!(list.iter().all(|t| t["retention_ms"] == 604_800_000_i64 && t["compression"] == "lz4"), "{stdout}");
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

    // The production shape is closed: ClickHouse is not published at all, the broker and the
    // API only on loopback; OTLP is the one port open on every interface, on purpose.
    assert!(services["clickhouse"].get("ports").is_none(), "ClickHouse must not be published");
    for (name, service) in services {
        let name = name.as_str().unwrap();
        for port in service.get("ports").and_then(|p| p.as_sequence()).into_iter().flatten() {
            let port = port.as_str().unwrap();
            let open_ok = name == "ingest" && (port == "4317:4317" || port == "4318:4318");
            assert!(open_ok || port.starts_with("127.0.0.1:"), "{name} publishes {port} on every interface");
        }
    }
    // The ClickHouse password reaches every client as a secret file, never in the environment.
    assert!(!text.contains("CLICKHOUSE_PASSWORD:"), "a password in compose.yaml's environment");
    for name in ["clickhouse", "migrate", "topics", "writer", "api"] {
        let secrets = services[name]["secrets"].as_sequence().unwrap_or_else(|| panic!("{name} has no secrets"));
        assert!(secrets.iter().any(|s| s.as_str() == Some("clickhouse_password")), "{name}");
    }
    assert_eq!(
        services["writer"]["environment"]["TAYGA_CLICKHOUSE_PASSWORD_FILE"].as_str(),
        Some("/run/secrets/clickhouse_password")
    );
}

// ---- Operator experience: fast one-line failures, pipes, config, tables, JSON.

/// A port on loopback that refuses connections (bound, then released).
fn refusing_addr() -> String {
    format!("127.0.0.1:{}", common::free_port())
}

/// What each command needs to fail fast against a refusing broker or ClickHouse: exit 1,
/// one line on stderr naming the cause once, with the hint, before the configured timeout.
#[test]
fn a_refusing_server_fails_at_once_in_one_line_with_a_hint() {
    let env = TestEnv::new("fast_fail");
    let dead = refusing_addr();
    // A timeout far beyond what a refusal takes: finishing before it proves nothing waited.
    let timeout = std::time::Duration::from_secs(120);
    let broker_cases: &[&[&str]] =
        &[&["topics", "list"], &["topics", "create"], &["scale", "logminer", "2", "--dry-run"]];
    for args in broker_cases {
        let started = std::time::Instant::now();
        let (out, _, stderr) =
            run(env.tayga().env("TAYGA_KAFKA_BROKERS", &dead).args(["--timeout", "120s"]).args(*args));
        assert!(started.elapsed() < timeout, "{args:?} waited for the timeout");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("cannot reach the broker at {dead}: connection refused")), "{stderr}");
        assert!(stderr.trim_end().ends_with(tayga::cmd::fail::BROKER_HINT), "{args:?}: {stderr}");
    }
    let clickhouse_cases: &[&[&str]] = &[
        &["alerts", "list"],
        &["alerts", "republish", "--alert-id", "ab"],
        &["deliveries", "show", "--alert-id", "ab"],
        &["remine", "--dry-run"],
        &["migrate"],
    ];
    for args in clickhouse_cases {
        let started = std::time::Instant::now();
        let (out, _, stderr) = run(env
            .tayga()
            .env("TAYGA_CLICKHOUSE_URL", format!("http://user:hunter2@{dead}"))
            .env("TAYGA_TIMEOUT", "120s")
            .args(*args));
        assert!(started.elapsed() < timeout, "{args:?} waited for the timeout");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("connection refused") && !stderr.contains("hunter2"), "{args:?}: {stderr}");
        assert!(stderr.trim_end().ends_with(tayga::cmd::fail::CLICKHOUSE_HINT), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn checks_that_need_no_broker_come_first() {
    let env = TestEnv::new("checks_first");
    env.migrated_store().await;
    let dead = refusing_addr();
    // An unknown alert is said before the broker is asked (it is down here).
    let (out, _, stderr) =
        run(env.tayga().env("TAYGA_KAFKA_BROKERS", &dead).args(["alerts", "republish", "--alert-id", "ab"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no such alert: 00000000000000ab"), "{stderr}");
    // A database that was never migrated: say what to run.
    let (out, _, stderr) = run(env.tayga().env("TAYGA_CLICKHOUSE_DATABASE", "no_such_db_20").args(["alerts", "list"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.trim_end().ends_with(tayga::cmd::fail::MIGRATE_HINT), "{stderr}");
}

/// Runs the binary with its stdout a pipe whose reader is already gone.
fn into_a_closed_pipe(cmd: &mut std::process::Command) -> std::process::Output {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_pipe_ends_quietly_with_exit_0() {
    let env = TestEnv::new("pipe");
    for args in [&["completions", "zsh"][..], &["config", "show"], &["man"], &["migrate", "--print"]] {
        let out = into_a_closed_pipe(env.tayga().args(args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn config_problems_are_all_reported_one_line_each_naming_file_or_variable() {
    let env = TestEnv::new("cfg_all");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tayga.toml");
    std::fs::write(
        &file,
        "[kafka]\nbrokerz = 1\n[logminer.drain]\nsim_th = 7.5\ndepth = 0\nmax_children = 0\nmax_clusters = 0\n",
    )
    .unwrap();
    let (out, _, stderr) = run(env
        .tayga()
        .arg("--config")
        .arg(&file)
        .env("TAYGA_KAFKA_BROKER", "x:1")
        .env("TAYGA_CLICKHOUSE_PASWORD", "pw")
        .env("LOGMINER_REPLICAS", "abc")
        .args(["config", "check"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let f = file.display().to_string();
    let expected = [
        format!("config: {f}: unknown key `kafka.brokerz`"),
        "config: $LOGMINER_REPLICAS: `abc` is not an integer".to_string(),
        "config: $TAYGA_CLICKHOUSE_PASWORD: not a Tayga variable; did you mean $TAYGA_CLICKHOUSE_PASSWORD?".to_string(),
        "config: $TAYGA_KAFKA_BROKER: not a Tayga variable; did you mean $TAYGA_KAFKA_BROKERS?".to_string(),
        format!("config: {f}: logminer.drain.sim_th must be above 0 and at most 1, is 7.5"),
        format!("config: {f}: logminer.drain.depth must be at least 3, is 0"),
        format!("config: {f}: logminer.drain.max_children must be at least 1, is 0"),
        format!("config: {f}: logminer.drain.max_clusters must be at least 1, is 0"),
    ];
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines, expected, "{stderr}");

    std::fs::write(&file, "[kafka]\nbrokers = \n").unwrap();
    let (out, _, stderr) = run(env.tayga().arg("--config").arg(&file).args(["config", "check"]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "a TOML error is one line: {stderr}");
    assert!(stderr.starts_with(&format!("config: {f}: not valid TOML at line 2")), "{stderr}");

    let (out, stdout, _) = run(env.tayga().arg("--config").arg(&file).args(["--json", "config", "check"]));
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["problems"].as_array().unwrap().len(), 1);
}

/// `config show` as an operator sees it at 80 columns, and as a pipe gets it.
#[test]
fn config_show_fits_80_columns_and_is_tab_separated_to_a_pipe() {
    let show = |tty: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tayga"));
        cmd.env_clear().current_dir(std::env::temp_dir()).args(["config", "show"]);
        cmd.env(
            "TAYGA_NOTIFIER_TARGETS",
            r#"[{name="ops", url="https://hooks.example/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"}]"#,
        );
        if let Some(width) = tty {
            cmd.env("TAYGA_FORCE_TTY", width);
        }
        let (out, stdout, stderr) = run(&mut cmd);
        assert!(out.status.success(), "{stderr}");
        stdout
    };
    let terminal = show(Some("80"));
    for line in terminal.lines() {
        assert!(unicode_width(line) <= 80, "{line:?} is wider than 80 columns");
    }
    insta::assert_snapshot!("config_show_80_columns", terminal);
    let pipe = show(None);
    assert!(pipe.lines().all(|l| l.split('\t').count() == 3), "{pipe}");
    assert!(!pipe.contains("XXXXXXXX") && !terminal.contains("XXXXXXXX"), "the target's path is a secret");
    let wide = {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tayga"));
        cmd.env_clear()
            .current_dir(std::env::temp_dir())
            .env("TAYGA_FORCE_TTY", "80")
            .args(["--wide", "config", "show"]);
        cmd.env("TAYGA_LOGMINER_REPLICA_ID", "a-replica-id-long-enough-to-push-the-table-past-eighty-columns");
        run(&mut cmd).1
    };
    assert!(!wide.contains('…') && wide.lines().any(|l| unicode_width(l) > 80), "--wide cuts nothing:\n{wide}");
}

fn unicode_width(s: &str) -> usize {
    s.chars().count()
}

#[test]
fn secrets_in_urls_never_reach_config_show() {
    let env = TestEnv::new("cfg_urls");
    let target = "https://hooks.example/services/T000/SECRETPATH?token=SECRETQUERY";
    for json in [false, true] {
        let mut cmd = env.tayga();
        cmd.env("TAYGA_CLICKHOUSE_URL", "http://tayga:SECRETPW@127.0.0.1:8123").env(
            "TAYGA_NOTIFIER_TARGETS",
            format!(r#"[{{name="ops", url="{target}", headers={{X="SECRETHEADER"}}}}]"#),
        );
        if json {
            cmd.arg("--json");
        }
        let (out, stdout, stderr) = run(cmd.args(["config", "show"]));
        assert!(out.status.success(), "{stderr}");
        for secret in ["SECRETPATH", "SECRETQUERY", "SECRETPW", "SECRETHEADER"] {
            assert!(!stdout.contains(secret), "{secret} shown:\n{stdout}");
        }
        if json {
            let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            let targets = &doc["values"]["notifier.targets"]["value"];
            assert_eq!(targets[0]["name"], "ops", "targets stay an array of tables: {targets}");
            assert_eq!(targets[0]["url"], "https://hooks.example/<redacted>?<redacted>");
            assert_eq!(doc["values"]["clickhouse.password"]["value"], "", "an empty secret is an empty string");
            assert_eq!(doc["values"]["kafka.partitions"]["value"], 12);
        }
    }
}

#[test]
fn json_is_refused_by_commands_that_print_no_data() {
    for args in [&["serve", "writer"][..], &["completions", "bash"], &["man"]] {
        let (out, _, stderr) = run(std::process::Command::new(env!("CARGO_BIN_EXE_tayga")).arg("--json").args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--json is for commands that print data"), "{stderr}");
    }
}

/// Every command below `tayga`, as the words that name it (`["alerts", "list"]`), read from
/// the clap definition: leaves only (a command with subcommands runs none of its own).
fn leaf_commands() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|c| c.get_name() != "help").collect();
        if subs.is_empty() && !path.is_empty() {
            out.push(path.clone());
        }
        for sub in subs {
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&tayga::cli::command(), &mut Vec::new(), &mut out);
    out
}

/// A runnable command line for every leaf command: the arguments it needs after its name. A
/// new command fails the README tests below until it has a line here, so none escapes them.
fn sample_args(path: &[String], log: &Path) -> Vec<String> {
    let rest: &[&str] = match path.join(" ").as_str() {
        "config show" | "config check" | "migrate" | "topics create" | "topics list" | "alerts list" => &[],
        "serve" => &["writer"],
        "up" => &[],
        "deliveries show" => &["--alert-id", "ab"],
        "deliveries retry" => &["--alert-id", "ab", "--dry-run"],
        "silences add" => &["--service", "web", "--for", "1h", "--comment", "a test"],
        "silences list" => &[],
        "silences expire" => &["5e"],
        "remine" => &["--dry-run"],
        "alerts republish" => &["--since", "1h"],
        "scale logminer" => &["1", "--dry-run"],
        "loadgen" => &["--duration", "1s", "--rate", "5", "--endpoint", "http://127.0.0.1:1"],
        "mine" => &["--templates"],
        "completions" => &["bash"],
        "logs" => &["--since", "5m", "severity>=warn"],
        "traces" | "templates list" => &[],
        "trace" => &[SAMPLE_TRACE],
        "templates show" => &["9f3c2a1b4d5e6f70"],
        "shapes list" => &[],
        "shapes diff" => &["1a", "2b"],
        "man" | "generate" => &[],
        other => panic!("`tayga {other}` has no sample arguments in tests/it/cli.rs: add one"),
    };
    let mut args: Vec<String> =
        path.iter().chain(rest.iter().map(|s| s.to_string()).collect::<Vec<_>>().iter()).cloned().collect();
    if path[0] == "mine" {
        args.push(log.display().to_string());
    }
    args
}

fn prints_data(args: &[String]) -> bool {
    let cli = Cli::try_parse_from(std::iter::once("tayga".to_string()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("the sample `tayga {}` does not parse: {e}", args.join(" ")));
    tayga::cmd::prints_data(&cli.command)
}

/// README: "every command that prints data takes --json": every leaf command of the clap
/// definition that prints data prints JSON with --json (stdout parses); every other one
/// refuses --json as a usage error (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_data_command_prints_json() {
    let env = TestEnv::new("json_all");
    let store = env.migrated_store().await;
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    // Alert ab with a failed delivery, so the retry's dry run has something to print.
    tayga::store::logminer::store_alerts(
        &store,
        &[snapshot_alert(0xab, tayga::wire::alert::AlertKind::Spike, "web", T0)],
    )
    .await
    .unwrap();
    let failed = tayga::store::DeliveryRow {
        alert_id: 0xab,
        target: "ops".into(),
        status: "failed".into(),
        attempts: 1,
        created_ns: T0,
        updated_ns: T0,
        ..Default::default()
    };
    store.insert(&[failed]).await.unwrap();
    // A running silence 5e, so the sample expiry has one to end.
    let now = tayga::store::now_ns();
    let silence = tayga::store::SilenceRow {
        silence_id: 0x5e,
        service: "web".into(),
        starts_ns: now,
        ends_ns: now + HOUR,
        comment: "a test".into(),
        created_ns: now,
        updated_ns: now,
        ..Default::default()
    };
    store.insert(&[silence]).await.unwrap();
    // The trace and the template the samples of `trace` and `templates show` name.
    let span = tayga::store::SpanRow {
        trace_id: SAMPLE_TRACE.into(),
        span_id: "a000000000000001".into(),
        service: "web".into(),
        name: "GET /".into(),
        start_ns: now,
        end_ns: now + 1_000_000,
        duration_ns: 1_000_000,
        ..Default::default()
    };
    store.insert(&[span]).await.unwrap();
    seed_shapes(&store, now - MIN).await;
    let template = tayga::store::TemplateRow {
        service: "web".into(),
        template_id: 0x9f3c_2a1b_4d5e_6f70,
        template: "user <NUM> logged in".into(),
        count: 1,
        first_seen_ns: now,
        last_seen_ns: now,
        masking_version: "tayga-mask-1".into(),
        updated_ns: now,
    };
    store.insert(&[template]).await.unwrap();
    let project = tempfile::tempdir().unwrap();
    let lines = project.path().join("app.log");
    std::fs::write(&lines, "user 1 logged in\nuser 2 logged in\n").unwrap();
    let mut cases: Vec<Vec<String>> = leaf_commands().iter().map(|p| sample_args(p, &lines)).collect();
    cases.push(vec!["migrate".into(), "--print".into()]);
    let mut checked = 0;
    for args in &cases {
        let (out, stdout, stderr) =
            run(env.tayga().current_dir(project.path()).env("PATH", project.path()).arg("--json").args(args));
        if !prints_data(args) {
            assert_eq!(out.status.code(), Some(2), "{args:?} takes --json but prints no data: {stderr}");
            continue;
        }
        // loadgen against a dead endpoint fails (exit 1) and still reports, in JSON.
        let ok = out.status.success() || (args[0] == "loadgen" && out.status.code() == Some(1));
        assert!(ok, "{args:?}: {stderr}");
        // `mine` and `logs` write JSON lines; the others one document.
        for doc in if args[0] == "mine" || args[0] == "logs" {
            stdout.lines().map(str::to_string).collect()
        } else {
            vec![stdout.clone()]
        } {
            assert!(serde_json::from_str::<serde_json::Value>(&doc).is_ok(), "{args:?} printed no JSON:\n{stdout}");
        }
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} data commands were checked");
}

/// README: "exit codes 0/1/2", for every command of the clap definition: a flag it does not
/// know is a usage error (2) with a line naming it, never a panic or a 1.
#[test]
fn every_command_answers_a_usage_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    for path in leaf_commands() {
        let mut args = sample_args(&path, &log);
        args.push("--no-such-flag".into());
        let (out, _, stderr) = run(std::process::Command::new(env!("CARGO_BIN_EXE_tayga"))
            .env_clear()
            .current_dir(dir.path())
            .args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--no-such-flag") && !stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// README: "one line per problem", for every command of the clap definition that ends by
/// itself: with the broker and ClickHouse refusing, each says what failed in at most one line
/// on stderr (or succeeds, needing neither), exit 0 or 1.
#[test]
fn every_command_tells_a_failure_in_one_line() {
    let env = TestEnv::new("one_line");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "user 1 logged in\n").unwrap();
    let dead = refusing_addr();
    for path in leaf_commands() {
        if path[0] == "serve" || path[0] == "up" {
            // Daemons: they wait for their servers (serve_all_without_a_broker_… covers
            // serve; up starts its own, demo::up_starts_its_own_services_… covers it).
            continue;
        }
        let args = sample_args(&path, &log);
        let (out, _, stderr) = run(env
            .tayga()
            .current_dir(dir.path())
            .env("PATH", dir.path())
            .env("TAYGA_KAFKA_BROKERS", &dead)
            .env("TAYGA_CLICKHOUSE_URL", format!("http://{dead}"))
            .args(["--timeout", "5s"])
            .args(&args));
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {stderr}");
        assert!(stderr.trim_end().lines().count() <= 1, "{args:?} said more than one line:\n{stderr}");
        if out.status.code() == Some(1) {
            assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        }
    }
}

/// Every command and subcommand has an Examples section in its long help, and so in its man
/// page (`cargo run -- generate`).
#[test]
fn every_command_has_examples_in_its_long_help_and_man_page() {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, missing: &mut Vec<String>) {
        let help = cmd.get_after_long_help().map(|h| h.to_string()).unwrap_or_default();
        if !path.is_empty() && !help.starts_with("Examples:\n") {
            missing.push(path.join(" "));
        }
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            path.push(sub.get_name().to_string());
            walk(sub, path, missing);
            path.pop();
        }
    }
    let mut missing = Vec::new();
    walk(&tayga::cli::command(), &mut Vec::new(), &mut missing);
    assert!(missing.is_empty(), "commands without an Examples section in after_long_help: {missing:?}");
    let fresh = tayga::cmd::generate::generated_files().unwrap();
    for (path, text) in fresh.iter().filter(|(p, _)| p.starts_with("man")) {
        assert!(String::from_utf8_lossy(text).contains("Examples"), "{} has no Examples", path.display());
    }
}

/// README: "exit codes 0/1/2".
#[test]
fn exit_codes_are_0_ok_1_failure_2_usage() {
    let env = TestEnv::new("exit_codes");
    assert_eq!(run(env.tayga().args(["config", "check"])).0.status.code(), Some(0));
    assert_eq!(run(env.tayga().env("TAYGA_KAFKA_PARTITIONS", "0").args(["config", "check"])).0.status.code(), Some(1));
    for usage in [
        &["config", "nope"][..],
        &["scale", "logminer", "0"],
        &["scale", "logminer", "13"],
        &["loadgen", "--duration", "inf"],
        &["loadgen", "--duration", "1e20"],
        &["loadgen", "--rate", "1e-300"],
        &["--timeout", "0s", "topics", "list"],
    ] {
        let (out, _, stderr) = run(env.tayga().args(usage));
        assert_eq!(out.status.code(), Some(2), "{usage:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{usage:?}: {stderr}");
    }
}

#[test]
fn loadgen_durations_take_the_forms_of_since() {
    use tayga::cli::{Cli, Command};
    for (text, secs) in [("1s", 1), ("30m", 1800), ("10", 10)] {
        let cli = Cli::try_parse_from(["tayga", "loadgen", "--duration", text]).unwrap();
        let Command::Loadgen(args) = cli.command else { panic!() };
        assert_eq!(args.duration, std::time::Duration::from_secs(secs));
    }
}

#[test]
fn completions_offer_no_hidden_command_and_ids_complete_nothing() {
    let fresh = tayga::cmd::generate::generated_files().unwrap();
    for (path, text) in &fresh {
        if path.starts_with("completions") {
            let text = String::from_utf8_lossy(text);
            assert!(!text.contains("generate"), "{} offers `generate`", path.display());
        }
    }
    let zsh = String::from_utf8_lossy(&fresh[Path::new("completions/_tayga")]).to_string();
    let alert_id_lines: Vec<&str> = zsh.lines().filter(|l| l.contains("--alert-id=")).collect();
    assert!(!alert_id_lines.is_empty());
    assert!(alert_id_lines.iter().all(|l| !l.contains("_files")), "{alert_id_lines:?}");
}

#[test]
fn generate_refuses_a_directory_that_is_not_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("man")).unwrap();
    std::fs::write(dir.path().join("man/keep.txt"), "mine").unwrap();
    let (out, _, stderr) = run(std::process::Command::new(env!("CARGO_BIN_EXE_tayga"))
        .env_clear()
        .current_dir(dir.path())
        .arg("generate"));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not the root of the tayga repository"), "{stderr}");
    assert!(dir.path().join("man/keep.txt").exists(), "nothing deleted");
}

#[test]
fn version_names_the_commit_and_build_date() {
    let (out, stdout, _) = run(std::process::Command::new(env!("CARGO_BIN_EXE_tayga")).arg("--version"));
    assert!(out.status.success());
    assert!(stdout.contains("(commit ") && stdout.contains(", built "), "{stdout}");
}

#[test]
fn man_pages_have_environment_files_and_exit_status() {
    let fresh = tayga::cmd::generate::generated_files().unwrap();
    let top = String::from_utf8_lossy(&fresh[Path::new("man/tayga.1")]).to_string();
    for section in [".SH ENVIRONMENT", ".SH FILES", ".SH \"EXIT STATUS\"", "Examples"] {
        assert!(top.contains(section), "man/tayga.1 has no {section}");
    }
}

/// A failing delivery, with a Slack-style target whose secret is in its path and
/// query: neither the notifier's log, nor `notifier_deliveries.last_error`, nor `deliveries
/// show` (table or JSON) ever shows it. Then SIGTERM stops the notifier with exit 0.
#[tokio::test]
async fn a_failing_delivery_never_shows_the_target_secret() {
    use crate::notifier_support::{alert, publish};
    let env = TestEnv::new("secret_hook");
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let store = env.migrated_store().await;
    let secrets = ["SECRETPATH", "SECRETQUERY", "hunter2"];
    let url = format!("http://user:hunter2@{}/services/T000/SECRETPATH?token=SECRETQUERY", refusing_addr());
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("notifier.log");
    let targets = format!(r#"[{{name="hook", url="{url}"}}]"#);
    let mut cmd = env.tayga();
    cmd.args(["serve", "notifier"])
        .env("TAYGA_LOG", "debug")
        .env("TAYGA_NOTIFIER_TARGETS", &targets)
        .env("TAYGA_NOTIFIER_MAX_ATTEMPTS", "1")
        .env("TAYGA_NOTIFIER_METRICS_ADDR", common::free_addr())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap());
    let mut notifier = common::ChildGuard::spawn(&mut cmd, "tayga serve notifier");
    let a = alert("secret_hook", 1, tayga::wire::alert::AlertKind::Spike);
    publish(&env.config, &[&a]).await;
    let row = common::wait_for("the failed delivery row", std::time::Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            tayga::store::deliveries::latest_for_alert(&store, a.alert_id, tayga::wire::alert::AlertState::Firing)
                .await
                .ok()
                .and_then(|rows| rows.into_iter().find(|r| r.status == "failed"))
        }
    })
    .await;
    assert!(!row.last_error.is_empty(), "the row says why it failed");
    let id = tayga::wire::alert::format_id(a.alert_id);
    let mut everything = format!("last_error: {}\n", row.last_error);
    for json in [false, true] {
        let mut show = env.tayga();
        show.env("TAYGA_NOTIFIER_TARGETS", &targets).env("TAYGA_FORCE_TTY", "200");
        if json {
            show.arg("--json");
        }
        let (out, stdout, stderr) = run(show.args(["deliveries", "show", "--alert-id", &id]));
        assert!(out.status.success(), "{stderr}");
        everything.push_str(&stdout);
        everything.push_str(&stderr);
    }
    let status = std::process::Command::new("kill").args(["-TERM", &notifier.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = notifier.wait_within(std::time::Duration::from_secs(40));
    everything.push_str(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(exit.code(), Some(0), "SIGTERM is a clean stop:\n{everything}");
    assert!(everything.contains("failed"), "{everything}");
    for secret in secrets {
        assert!(!everything.contains(secret), "{secret} shown:\n{everything}");
    }
}

/// `serve all` with no broker: ingest and the API say they are ready, the writer's /health
/// says why it is not (starting, broker down), ingest's and the API's say degraded and why, librdkafka's repeats are not each logged, and
/// SIGTERM stops everything within the Compose grace period with exit 0.
#[tokio::test]
async fn serve_all_without_a_broker_is_honest_quiet_and_stops_cleanly() {
    let env = TestEnv::new("serve_nobroker");
    env.migrated_store().await;
    let dead = refusing_addr();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let writer = common::free_addr();
    let addrs = [
        ("TAYGA_INGEST_HTTP_ADDR", common::free_addr()),
        ("TAYGA_INGEST_GRPC_ADDR", common::free_addr()),
        ("TAYGA_WRITER_METRICS_ADDR", writer.clone()),
        ("TAYGA_ASSEMBLER_METRICS_ADDR", common::free_addr()),
        ("TAYGA_LOGMINER_METRICS_ADDR", common::free_addr()),
        ("TAYGA_NOTIFIER_METRICS_ADDR", common::free_addr()),
        ("TAYGA_API_LISTEN_ADDR", common::free_addr()),
    ];
    let mut cmd = env.tayga();
    cmd.args(["serve", "all"])
        .env("TAYGA_KAFKA_BROKERS", &dead)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap());
    for (key, value) in &addrs {
        cmd.env(key, value);
    }
    let mut serve = common::ChildGuard::spawn(&mut cmd, "tayga serve all");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    common::wait_for("ingest's and the API's ready lines", std::time::Duration::from_secs(60), || async {
        let text = read_log();
        (text.contains("ready: ingest:") && text.contains("ready: api:")).then_some(())
    })
    .await;
    let health = common::wait_for("the writer's /health naming the broker", std::time::Duration::from_secs(60), || {
        let url = format!("http://{writer}/health");
        async move {
            let doc: serde_json::Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
            (doc["broker"] == "down").then_some(doc)
        }
    })
    .await;
    assert_eq!(health["status"], "starting", "{health}");
    let reasons = health["reasons"].to_string();
    assert!(reasons.contains(&format!("the broker at {dead} does not accept connections")), "{health}");
    // Ingest and the API, which do not consume, follow the same rule: ready, but degraded
    // with the broker's reason (ingest writes ClickHouse directly meanwhile).
    for (what, addr) in [("ingest", &addrs[0].1), ("api", &addrs[6].1)] {
        let url = format!("http://{addr}/health");
        let doc = common::wait_for(
            &format!("{what}'s /health naming the broker"),
            std::time::Duration::from_secs(60),
            || {
                let url = url.clone();
                async move {
                    let doc: serde_json::Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
                    (doc["broker"] == "down" && doc["status"] != "starting").then_some(doc)
                }
            },
        )
        .await;
        assert_eq!(doc["status"], "degraded", "{what}: {doc}");
        assert_eq!(doc["clickhouse"], "up", "{what}: {doc}");
        let reasons = doc["reasons"].to_string();
        assert!(reasons.contains(&format!("the broker at {dead} does not accept connections")), "{what}: {doc}");
    }

    let status = std::process::Command::new("kill").args(["-TERM", &serve.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = serve.wait_within(std::time::Duration::from_secs(40));
    let text = read_log();
    assert_eq!(exit.code(), Some(0), "SIGTERM while the broker is down is a clean stop:\n{text}");
    assert!(!text.contains("service failed"), "{text}");
    // Each client-library condition is logged once, then counted (daemon::repeats).
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("librdkafka:")) {
        let doc: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        let message = doc["message"].as_str().unwrap_or(line).to_string();
        if message.contains("more like it") {
            continue;
        }
        let condition: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
        *seen.entry(condition).or_insert(0) += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "repeated client-library lines: {seen:#?}\n{text}");
}

/// A daemon runs without transparent huge pages (`tayga::without_transparent_huge_pages`):
/// with them, mimalloc's arenas made the API's RSS climb in 2 MiB steps under the soak.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_daemon_runs_without_transparent_huge_pages() {
    // The flag passes from parent to child: set in this process, it would pass for the daemon.
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(own.lines().any(|l| l == "THP_enabled:\t1"), "this test process has them off already");
    let env = TestEnv::new("serve_thp");
    let mut cmd = env.tayga();
    // ClickHouse refuses: the API keeps retrying its migration, alive long enough to look at.
    cmd.args(["serve", "api"])
        .env("TAYGA_CLICKHOUSE_URL", format!("http://{}", refusing_addr()))
        .env("TAYGA_API_LISTEN_ADDR", common::free_addr())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let api = common::ChildGuard::spawn(&mut cmd, "tayga serve api");
    let status = format!("/proc/{}/status", api.id());
    // Before the binary's `main` runs (exec, the runtime's start) the line says 1.
    let line = common::wait_for("THP_enabled: 0 in the daemon's status", std::time::Duration::from_secs(10), || {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with("THP_enabled:")).map(str::to_string);
        async move { line.filter(|l| l.ends_with('0')) }
    })
    .await;
    assert_eq!(line.split_whitespace().collect::<Vec<_>>(), ["THP_enabled:", "0"]);
}

/// compose.yaml checked by a real Compose CLI where one is installed (Debian's
/// `docker-compose` 1.29 validates a file without an engine; it predates the top-level `name`
/// key, which is left out of its copy).
#[test]
fn compose_yaml_validates_with_a_real_compose_cli_when_installed() {
    let Some(compose) = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("docker-compose")).find(|p| p.is_file()))
    else {
        eprintln!("docker-compose is not installed: compose.yaml is checked by the parse test only");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/compose.yaml")).unwrap();
    let copy: String = text.lines().filter(|l| !l.starts_with("name:")).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("compose.yaml"), copy).unwrap();
    std::fs::create_dir(dir.path().join("secrets")).unwrap();
    std::fs::write(dir.path().join("secrets/clickhouse_password"), "pw\n").unwrap();
    let (out, stdout, stderr) = run(std::process::Command::new(&compose)
        .current_dir(dir.path())
        .env("TAYGA_API_TOKEN", "t")
        .args(["-f", "compose.yaml", "config"]));
    assert!(out.status.success(), "docker-compose config refused compose.yaml: {stderr}");
    assert!(stdout.contains("127.0.0.1:8080:8080") && stdout.contains("127.0.0.1:19092:19092"), "{stdout}");
    // Without the API token Compose refuses to start (the `:?` in the file).
    let (out, _, stderr) = run(std::process::Command::new(&compose)
        .current_dir(dir.path())
        .env_remove("TAYGA_API_TOKEN")
        .args(["-f", "compose.yaml", "config", "-q"]));
    assert!(!out.status.success() && stderr.contains("TAYGA_API_TOKEN"), "{stderr}");
}

// ---- Every command's output as an operator sees it (80 columns) and as a pipe gets it.

const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
/// The commands' clock in these snapshots (TAYGA_NOW_NS): 2025-11-29T10:00:00Z.
const T0: u64 = 1_764_410_400_000_000_000;

fn snapshot_alert(id: u64, kind: tayga::wire::alert::AlertKind, service: &str, last_at: u64) -> tayga::store::AlertRow {
    tayga::store::AlertRow {
        alert_id: id,
        kind: kind.as_str().into(),
        service: service.into(),
        template_id: id << 8,
        template: format!("payment <*> for order <*> declined by the card issuer after {id} retries"),
        first_at: last_at - 10 * MIN,
        last_at,
        count: id * 1234,
        baseline: 1.5,
        threshold: 7.5,
        stored_ns: last_at,
        updated_ns: last_at,
        resolved_at: 0,
        shape: String::new(),
    }
}

/// Runs `args` twice, at 80 columns and to a pipe, and gives both as one text with the
/// test's database and prefix replaced; every terminal line fits 80 columns.
fn both_ways(env: &TestEnv, dir: &Path, args: &[&str], wide: &mut Vec<String>) -> String {
    let go = |tty: bool| {
        let mut cmd = env.tayga();
        cmd.current_dir(dir).env("PATH", dir).env("TAYGA_NOW_NS", T0.to_string()).env("USER", "alice").args(args);
        if tty {
            cmd.env("TAYGA_FORCE_TTY", "80");
        }
        let (out, stdout, stderr) = run(&mut cmd);
        assert!(out.status.success(), "{args:?}: {stderr}");
        (stdout, stderr)
    };
    let (terminal, terminal_err) = go(true);
    for line in terminal.lines().chain(terminal_err.lines()) {
        if unicode_width(line) > 80 {
            wide.push(format!("{args:?}: {line:?}"));
        }
    }
    let (pipe, pipe_err) = go(false);
    let mut text = format!("$ tayga {}\n--- 80 columns\n{terminal}", args.join(" "));
    if !terminal_err.is_empty() {
        text.push_str(&format!("--- 80 columns, stderr\n{terminal_err}"));
    }
    text.push_str(&format!("--- pipe\n{pipe}"));
    if !pipe_err.is_empty() {
        text.push_str(&format!("--- pipe, stderr\n{pipe_err}"));
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    text.replace(&env.config.kafka.topic_prefix, "PREFIX")
        .replace(&dir.display().to_string(), "DIR")
        .replace(&format!("@{}", host.trim()), "@HOST")
}

/// The trace id the samples of `tayga trace` name.
const SAMPLE_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Every command that prints something, against real data in the shared ClickHouse and
/// broker, at 80 columns and to a pipe: the snapshots are what an operator reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_at_80_columns_and_to_a_pipe() {
    use tayga::wire::alert::AlertKind;
    let mut env = TestEnv::new("snap_all");
    // One width whatever the pid, so what the tables cut to fit is the same every run.
    let fixed = format!("ts{:07}", std::process::id());
    env.config.kafka.topic_prefix = fixed.clone();
    env.config.clickhouse.database = fixed;
    let store = env.migrated_store().await;
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let rows = vec![
        snapshot_alert(0xa1, AlertKind::Spike, "checkout", T0 - MIN),
        snapshot_alert(0xa2, AlertKind::NewTemplate, "payments-gateway", T0 - 3 * MIN),
        snapshot_alert(0xa3, AlertKind::Silence, "web", T0 - 2 * HOUR),
        snapshot_alert(0xa4, AlertKind::NewTemplate, "web", T0 - 30 * HOUR),
    ];
    tayga::store::logminer::store_alerts(&store, &rows).await.unwrap();
    let delivery = |target: &str, status: &str, error: &str| tayga::store::DeliveryRow {
        alert_id: 0xa1,
        target: target.into(),
        status: status.into(),
        attempts: 3,
        last_error: error.into(),
        created_ns: T0 - MIN,
        updated_ns: T0 - 30 * SEC,
        ..Default::default()
    };
    store
        .insert(&[
            delivery(
                "ops",
                "failed",
                "HTTP 503 Service Unavailable from https://hooks.example/<redacted> after 3 attempts",
            ),
            delivery("pager", "delivered", ""),
            tayga::store::DeliveryRow {
                alert_id: 0xa3,
                status: "silenced".into(),
                attempts: 0,
                silence_id: 0x5e,
                ..delivery("ops", "", "")
            },
        ])
        .await
        .unwrap();
    let silence = |id: u64, service: &str, kind: &str, ends_ns: u64, expired_by: &str| tayga::store::SilenceRow {
        silence_id: id,
        service: service.into(),
        kind: kind.into(),
        template_id: if kind.is_empty() { 0 } else { 0xfe },
        starts_ns: T0 - HOUR,
        ends_ns,
        comment: "deploy 4.2".into(),
        created_by: "cli:ops@box".into(),
        created_ns: T0 - HOUR,
        expired_by: expired_by.into(),
        updated_ns: T0 - HOUR,
    };
    store
        .insert(&[silence(0x5e, "web", "", T0 + HOUR, ""), silence(0x5f, "checkout", "spike", T0 - MIN, "cli:ops@box")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("app.log"),
        "user 17 logged in from 10.0.0.1\nuser 42 logged in from 10.0.0.7\npayment 9 declined\nuser 5 logged in from 10.0.0.9\n",
    )
    .unwrap();
    seed_shapes(&store, T0 - 10 * MIN).await;
    let cases: &[(&str, &[&str])] = &[
        ("snap_config_check", &["config", "check"]),
        ("snap_shapes_list", &["shapes", "list"]),
        ("snap_shapes_diff", &["shapes", "diff", "1a", "2b"]),
        ("snap_migrate", &["migrate"]),
        ("snap_topics_list", &["topics", "list"]),
        ("snap_alerts_list", &["alerts", "list", "--limit", "3"]),
        ("snap_alerts_list_active", &["alerts", "list", "--active"]),
        ("snap_alerts_list_none", &["alerts", "list", "--service", "nobody"]),
        ("snap_deliveries_show", &["deliveries", "show", "--alert-id", "a1"]),
        ("snap_deliveries_show_none", &["deliveries", "show", "--alert-id", "a2"]),
        ("snap_deliveries_show_silenced", &["deliveries", "show", "--alert-id", "a3"]),
        ("snap_silences_list", &["silences", "list"]),
        ("snap_silences_list_all", &["silences", "list", "--all"]),
        ("snap_deliveries_retry_dry_run", &["deliveries", "retry", "--alert-id", "a1", "--dry-run"]),
        ("snap_remine_dry_run", &["remine", "--dry-run"]),
        ("snap_scale_dry_run", &["scale", "logminer", "2", "--dry-run"]),
        ("snap_mine", &["mine", "app.log"]),
        ("snap_mine_templates_table", &["mine", "app.log", "--templates", "--format", "table"]),
        ("snap_alerts_republish_one", &["alerts", "republish", "--alert-id", "a1"]),
        ("snap_topics_create_again", &["topics", "create"]),
    ];
    let mut wide = Vec::new();
    for (name, args) in cases {
        let text = both_ways(&env, dir.path(), args, &mut wide);
        insta::assert_snapshot!(*name, text);
    }
    assert!(wide.is_empty(), "lines wider than 80 columns:\n{}", wide.join("\n"));
}

/// Runs `args` and says how it ended, how long it took.
fn timed(cmd: &mut std::process::Command) -> (std::process::Output, String, std::time::Duration) {
    let started = std::time::Instant::now();
    let (out, _, stderr) = run(cmd);
    (out, stderr, started.elapsed())
}

/// A ClickHouse that accepts connections and never answers (frozen with SIGSTOP, as a hung
/// server is): every command that talks to ClickHouse gives up at `--timeout`, not at a
/// client library's own bound, in one line that names the timeout and says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clickhouse_that_never_answers_is_bounded_by_the_timeout() {
    let env = TestEnv::new("frozen_ch");
    tayga::bus::topics::ensure_topics(&env.config.kafka, &env.config.names()).await.unwrap();
    let ch = common::PrivateClickHouse::start();
    ch.signal("STOP");
    let timeout = std::time::Duration::from_secs(2);
    let cases: &[&[&str]] = &[
        &["migrate"],
        &["alerts", "list"],
        &["alerts", "republish", "--alert-id", "ab"],
        &["alerts", "republish", "--since", "1h"],
        &["deliveries", "show", "--alert-id", "ab"],
        &["deliveries", "retry", "--alert-id", "ab"],
        &["remine", "--dry-run"],
        &["scale", "logminer", "1", "--dry-run"],
    ];
    let dir = tempfile::tempdir().unwrap();
    for args in cases {
        let (out, stderr, took) = timed(
            env.tayga()
                .current_dir(dir.path())
                .env("TAYGA_CLICKHOUSE_URL", ch.url())
                .args(["--timeout", "2s"])
                .args(*args),
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("no answer within 2s (--timeout)"), "{args:?}: {stderr}");
        assert!(stderr.trim_end().ends_with(tayga::cmd::fail::CLICKHOUSE_HINT), "{args:?}: {stderr}");
        // The configured bound, not a library's (the ClickHouse client has none by default):
        // one probe of at most `timeout` after a connect of at most `timeout`.
        assert!(took < 3 * timeout, "{args:?} took {took:?} with --timeout 2s");
    }
    ch.signal("CONT");
}

/// A broker that accepts connections and never answers (the test's own, frozen): the broker
/// commands give up at `--timeout` (librdkafka's metadata timeout is set to it), in one line
/// with the hint; `deliveries retry` does so before it resets any row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_never_answers_is_bounded_by_the_timeout() {
    let env = TestEnv::new("frozen_broker");
    let store = env.migrated_store().await;
    let broker = common::OwnBroker::start(common::free_port());
    let mut config = env.config.clone();
    config.kafka.brokers = broker.address();
    tayga::bus::topics::ensure_topics(&config.kafka, &config.names()).await.unwrap();
    let failed = tayga::store::DeliveryRow {
        alert_id: 0xab,
        target: "ops".into(),
        status: "failed".into(),
        attempts: 1,
        last_error: "HTTP 500".into(),
        created_ns: T0,
        updated_ns: T0,
        ..Default::default()
    };
    store.insert(&[failed]).await.unwrap();
    tayga::store::logminer::store_alerts(
        &store,
        &[snapshot_alert(0xab, tayga::wire::alert::AlertKind::Spike, "web", T0)],
    )
    .await
    .unwrap();
    broker.signal("STOP");
    let timeout = std::time::Duration::from_secs(2);
    let cases: &[&[&str]] = &[
        &["topics", "list"],
        &["topics", "create"],
        &["alerts", "republish", "--alert-id", "ab"],
        &["deliveries", "retry", "--alert-id", "ab"],
        &["scale", "logminer", "1", "--dry-run"],
    ];
    let dir = tempfile::tempdir().unwrap();
    for args in cases {
        let (out, stderr, took) = timed(
            env.tayga()
                .current_dir(dir.path())
                .env("TAYGA_KAFKA_BROKERS", broker.address())
                .args(["--timeout", "2s"])
                .args(*args),
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.trim_end().ends_with(tayga::cmd::fail::BROKER_HINT), "{args:?}: {stderr}");
        assert!(took < 3 * timeout, "{args:?} took {took:?} with --timeout 2s");
    }
    let rows =
        tayga::store::deliveries::latest_for_alert(&store, 0xab, tayga::wire::alert::AlertState::Firing).await.unwrap();
    assert_eq!(rows[0].status, "failed", "the retry reset nothing while the broker was frozen");
    broker.signal("CONT");
}

/// `deliveries retry` checks the broker before it writes: against a refusing broker it fails
/// at once with the broker's hint and the failed row stays as it was; a refusal (no rows)
/// needs no broker and is said first.
#[tokio::test]
async fn deliveries_retry_reaches_the_broker_before_it_writes() {
    let env = TestEnv::new("retry_reach");
    let store = env.migrated_store().await;
    let failed = tayga::store::DeliveryRow {
        alert_id: 0xcd,
        target: "ops".into(),
        status: "failed".into(),
        attempts: 1,
        last_error: "HTTP 500".into(),
        created_ns: T0,
        updated_ns: T0,
        ..Default::default()
    };
    store.insert(&[failed]).await.unwrap();
    let alert = snapshot_alert(0xcd, tayga::wire::alert::AlertKind::Spike, "web", T0);
    tayga::store::logminer::store_alerts(&store, &[alert]).await.unwrap();
    let dead = refusing_addr();
    let (out, stderr, _) =
        timed(env.tayga().env("TAYGA_KAFKA_BROKERS", &dead).args(["deliveries", "retry", "--alert-id", "cd"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("cannot reach the broker at {dead}: connection refused")), "{stderr}");
    assert!(stderr.trim_end().ends_with(tayga::cmd::fail::BROKER_HINT), "{stderr}");
    let rows =
        tayga::store::deliveries::latest_for_alert(&store, 0xcd, tayga::wire::alert::AlertState::Firing).await.unwrap();
    assert_eq!((rows.len(), rows[0].status.as_str(), rows[0].manual_retries), (1, "failed", 0), "nothing was reset");
    // The dry run needs no broker.
    let (out, stderr, _) = timed(env.tayga().env("TAYGA_KAFKA_BROKERS", &dead).args([
        "deliveries",
        "retry",
        "--alert-id",
        "cd",
        "--dry-run",
    ]));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // No rows: refused without asking the broker.
    let (out, stderr, _) =
        timed(env.tayga().env("TAYGA_KAFKA_BROKERS", &dead).args(["deliveries", "retry", "--alert-id", "ce"]));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("cannot reach the broker"), "{stderr}");
}

/// Two shapes of `GET /checkout` at `at_ns`, each a stored story with its spans: 1a, the usual
/// (a query), and 2b, which also takes a row lock: what `tayga shapes list|diff` read.
async fn seed_shapes(store: &tayga::store::Store, at_ns: u64) {
    let ms = 1_000_000;
    let span = |trace: &str, id: &str, parent: &str, name: &str, from_ms: u64, to_ms: u64| tayga::store::SpanRow {
        trace_id: trace.into(),
        span_id: id.into(),
        parent_span_id: parent.into(),
        service: if parent.is_empty() { "web" } else { "db" }.into(),
        name: name.into(),
        start_ns: at_ns + from_ms * ms,
        end_ns: at_ns + to_ms * ms,
        duration_ns: (to_ms - from_ms) * ms,
        ..Default::default()
    };
    let (usual, locked) = ("1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a", "2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b");
    let spans = [
        span(usual, "0000000000000001", "", "GET /checkout", 0, 100),
        span(usual, "0000000000000002", "0000000000000001", "query", 10, 30),
        span(locked, "0000000000000003", "", "GET /checkout", 0, 1100),
        span(locked, "0000000000000004", "0000000000000003", "query", 10, 30),
        span(locked, "0000000000000005", "0000000000000003", "lock row", 40, 1040),
    ];
    store.insert(&spans).await.unwrap();
    let story = |trace: &str, fingerprint: u64, duration_ms: u64, edges: &[&str]| tayga::store::StoryRow {
        trace_id: trace.into(),
        fingerprint,
        root_service: "web".into(),
        root_operation: "GET /checkout".into(),
        start_ns: at_ns,
        duration_ns: duration_ms * ms,
        span_count: edges.len() as u32,
        services: vec!["db".into(), "web".into()],
        edges: edges.iter().map(|e| e.to_string()).collect(),
        version_ns: at_ns,
        ..Default::default()
    };
    let base = ["ROOT -> web/GET /checkout", "web/GET /checkout -> db/query"];
    store
        .insert(&[
            story(usual, 0x1a, 100, &base),
            story(locked, 0x2b, 1100, &[base[0], base[1], "web/GET /checkout -> db/lock row"]),
        ])
        .await
        .unwrap();
}
