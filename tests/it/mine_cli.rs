//! `tayga mine` end to end: formats, quoting, --templates, errors.

use std::io::Write;
use std::process::{Command, Output};

fn mine(args: &[&str], input: &str) -> Output {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(input.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap().to_string();
    let mut all = vec!["mine", path.as_str()];
    all.extend_from_slice(args);
    Command::new(env!("CARGO_BIN_EXE_tayga")).args(&all).env_remove("TAYGA_CONFIG").output().unwrap()
}

const LINES: &str = "login ok for user alice from 10.0.0.1, session 1 done\nlogin ok for user bob from 10.0.0.2, session 2 done\r\ndisk full\n";

#[test]
fn csv_has_one_quoted_row_per_line() {
    let out = mine(&[], LINES);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "line,template_id,template");
    assert_eq!(rows.len(), 4);
    assert!(rows[1].starts_with("1,"));
    // The final template, with its comma quoted.
    assert!(rows[1].ends_with(",\"login ok for user <*> from <IP>, session <NUM> done\""), "{}", rows[1]);
    let id = |r: &str| r.split(',').nth(1).unwrap().to_string();
    assert_eq!(id(rows[1]), id(rows[2]));
    assert_ne!(id(rows[1]), id(rows[3]));
    assert_eq!(id(rows[1]).len(), 16);
}

#[test]
fn templates_are_listed_most_frequent_first() {
    let out = mine(&["--templates", "--format", "json"], LINES);
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["count"], 2);
    assert_eq!(rows[1]["template"], "disk full");
}

#[test]
fn json_flag_and_table_format() {
    let out = mine(&["--json"], LINES);
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["line"], 1);
    let out = mine(&["--format", "table", "--stats"], LINES);
    assert!(String::from_utf8(out.stdout).unwrap().contains("template_id"));
    let stats = String::from_utf8(out.stderr).unwrap();
    assert!(stats.contains("lines        3") && stats.contains("lines/s"), "{stats}");
}

#[test]
fn a_missing_file_names_the_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_tayga")).args(["mine", "/nonexistent/x.log"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.log"));
}

#[test]
fn without_a_mining_config_the_logminer_settings_apply() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(LINES.as_bytes()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tayga"))
        .args(["mine", file.path().to_str().unwrap(), "--templates", "--json"])
        .env_remove("TAYGA_CONFIG")
        .env("TAYGA_LOGMINER_MASKING_ENABLED", "false")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("<IP>"), "masking is off as [logminer.masking] says: {text}");
}
