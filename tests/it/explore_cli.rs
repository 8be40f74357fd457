//! Explore in the shell, as the real binary on seeded rows at fixed times (the commands' clock
//! set by `TAYGA_NOW_NS`): `tayga trace`, `traces`, `logs` and `templates` as a terminal of 80
//! columns shows them (`TAYGA_FORCE_TTY=80`) and as a pipe gets them, snapshotted; a query
//! narrows; `tayga logs --follow | head -3` ends quietly.

use tayga::store::{HitRow, LogRow, SpanRow, TemplateRow};

use crate::common::{run, span_row, TestEnv};

const MS: u64 = 1_000_000;
const MIN: u64 = 60_000 * MS;
/// 2026-12-01T10:00:00Z.
const T0: u64 = 1_796_119_200_000_000_000;
/// Half a minute past a whole one, so an age in minutes does not flip while a command starts.
const NOW: u64 = T0 + 10 * MIN + 30_000 * MS;
const TRACE_A: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TRACE_B: &str = "00f067aa0ba902b700f067aa0ba902b7";
const DECLINED: u64 = 0x9f3c_2a1b_4d5e_6f70;
const WARMED: u64 = 0x0123_4567_89ab_cdef;

fn span(trace: &str, id: &str, parent: &str, service: &str, name: &str, start_ms: u64, end_ms: u64) -> SpanRow {
    span_row(trace, id, parent, service, name, T0 + start_ms * MS, T0 + end_ms * MS)
}

fn failed(span: SpanRow) -> SpanRow {
    SpanRow { status_code: 2, ..span }
}

fn log(id: u64, service: &str, at_ms: u64, severity: u8, body: &str, trace: &str, tenant: &str) -> LogRow {
    LogRow {
        log_id: id,
        service: service.into(),
        time_ns: T0 + at_ms * MS,
        observed_ns: T0 + at_ms * MS,
        severity_number: severity,
        body: body.into(),
        trace_id: trace.into(),
        attr_keys: vec!["tenant".into()],
        attr_values: vec![tenant.into()],
        attr_types: vec![0],
        resource_keys: vec!["service.name".into(), "service.instance.id".into()],
        resource_values: vec![service.into(), "pay-1".into()],
        resource_types: vec![0, 0],
        ingest_ns: T0 + at_ms * MS,
        ..Default::default()
    }
}

async fn seeded(name: &str) -> TestEnv {
    let env = TestEnv::new(name);
    let store = env.migrated_store().await;
    store
        .insert(&[
            failed(span(TRACE_A, "a000000000000001", "", "checkout", "POST /pay", 0, 400)),
            failed(span(TRACE_A, "a000000000000002", "a000000000000001", "payments", "charge", 10, 300)),
            span(TRACE_A, "a000000000000003", "a000000000000002", "db", "SELECT orders", 20, 140),
            span(TRACE_A, "a000000000000004", "a000000000000001", "checkout", "render receipt", 310, 390),
            span(TRACE_B, "b000000000000001", "", "checkout", "GET /cart", 60_000, 60_005),
        ])
        .await
        .unwrap();
    let lines = [
        log(1, "payments", 150, 17, "payment declined for order 42", TRACE_A, "acme"),
        log(2, "payments", 120_000, 17, "payment declined for order 43", "", "globex"),
        log(3, "payments", 180_000, 13, "payment declined for order 44", "", "acme"),
        log(4, "payments", 240_000, 9, "cache warmed in 12 ms", "", "acme"),
    ];
    store.insert(&lines).await.unwrap();
    let hits: Vec<HitRow> = lines
        .iter()
        .map(|l| HitRow {
            service: l.service.clone(),
            log_id: l.log_id,
            template_id: if l.log_id == 4 { WARMED } else { DECLINED },
            time_ns: l.time_ns,
        })
        .collect();
    store.insert(&hits).await.unwrap();
    let template = |id: u64, text: &str, count: u64, first: u64, last: u64| TemplateRow {
        service: "payments".into(),
        template_id: id,
        template: text.into(),
        count,
        first_seen_ns: T0 + first * MS,
        last_seen_ns: T0 + last * MS,
        masking_version: "tayga-mask-1".into(),
        updated_ns: NOW,
    };
    store
        .insert(&[
            template(DECLINED, "payment declined for order <NUM>", 3, 150, 180_000),
            template(WARMED, "cache warmed in <NUM> ms", 1, 240_000, 240_000),
        ])
        .await
        .unwrap();
    env
}

/// Runs `tayga ARGS` at the seeded clock, on a terminal of 80 columns or to a pipe.
fn tayga(env: &TestEnv, terminal: bool, args: &[&str]) -> String {
    let mut cmd = env.tayga();
    cmd.env("TAYGA_NOW_NS", NOW.to_string()).args(args);
    if terminal {
        cmd.env("TAYGA_FORCE_TTY", "80");
    }
    let (out, stdout, stderr) = run(&mut cmd);
    assert!(out.status.success(), "tayga {args:?}: {stderr}");
    // Log lines stay whole (as `kubectl logs` prints them); the rest fits the terminal.
    let fits = terminal && !matches!(args, ["logs", ..] | ["templates", "show", ..]);
    for line in stdout.lines().filter(|_| fits) {
        assert!(unicode_width::UnicodeWidthStr::width(line) <= 80, "wider than 80 columns: {line:?}");
    }
    stdout
}

const WINDOW: [&str; 4] = ["--from", "2026-12-01T09:59:00Z", "--to", "2026-12-01T10:10:00Z"];

#[tokio::test]
async fn explore_commands_at_80_columns_and_to_a_pipe() {
    let env = seeded("explore_cli").await;
    insta::assert_snapshot!("trace_80", tayga(&env, true, &["trace", TRACE_A]));
    insta::assert_snapshot!("trace_pipe", tayga(&env, false, &["trace", TRACE_A]));

    let mut traces = vec!["traces"];
    traces.extend(WINDOW);
    insta::assert_snapshot!("traces_80", tayga(&env, true, &traces));
    insta::assert_snapshot!("traces_pipe", tayga(&env, false, &traces));
    let slow: Vec<&str> = traces.iter().copied().chain(["--min-duration", "300ms"]).collect();
    let found = tayga(&env, false, &slow);
    assert_eq!(found.lines().count(), 2, "the header and the one slow trace: {found}");
    assert!(found.contains(TRACE_A));

    let mut logs = vec!["logs"];
    logs.extend(WINDOW);
    insta::assert_snapshot!("logs_80", tayga(&env, true, &logs));
    insta::assert_snapshot!("logs_pipe", tayga(&env, false, &logs));
    let narrowed: Vec<&str> = logs.iter().copied().chain(["tenant=acme", "\"declined for\""]).collect();
    let found = tayga(&env, false, &narrowed);
    assert_eq!(found.lines().count(), 2, "{found}");
    assert!(found.contains("order 42") && found.contains("order 44"), "{found}");
    let json: Vec<&str> = ["--json"].into_iter().chain(logs.iter().copied()).chain(["severity>=error"]).collect();
    let docs: Vec<serde_json::Value> =
        tayga(&env, false, &json).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert_eq!(docs[0]["template_id"], "9f3c2a1b4d5e6f70");
    assert_eq!(docs[0]["body"], "payment declined for order 43");

    insta::assert_snapshot!("templates_list_80", tayga(&env, true, &["templates", "list"]));
    insta::assert_snapshot!("templates_list_pipe", tayga(&env, false, &["templates", "list"]));
    insta::assert_snapshot!("templates_show_80", tayga(&env, true, &["templates", "show", "9f3c2a1b4d5e6f70"]));

    // A query that cannot be read: exit 1, one line saying where.
    let (out, _, stderr) = run(env.tayga().args(["logs", "\"open"]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.trim(), "error: the query `\"open` cannot be read: at character 1: this quote is never closed");
}

#[tokio::test]
async fn a_follow_ends_quietly_when_its_reader_goes_away() {
    let env = seeded("explore_follow").await;
    // The pipe needs a shell: it gets the test's environment from the command `env` makes.
    let tayga = env.tayga();
    let mut shell = std::process::Command::new("bash");
    shell.env_clear().envs(tayga.get_envs().filter_map(|(k, v)| Some((k, v?))));
    shell.env("TAYGA_NOW_NS", NOW.to_string()).env("BIN_UNDER_TEST", env!("CARGO_BIN_EXE_tayga"));
    shell.current_dir(std::env::temp_dir()).args([
        "-c",
        "timeout 30 \"$BIN_UNDER_TEST\" logs --follow --since 1h | head -3; echo \"status ${PIPESTATUS[0]}\"",
    ]);
    let started = std::time::Instant::now();
    let (out, stdout, stderr) = run(&mut shell);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}{stderr}");
    assert!(lines[..3].iter().all(|l| l.contains("\tpayments\t")), "{stdout}");
    assert_eq!(lines[3], "status 0", "tayga exits 0 once head has its lines: {stdout}{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "it ended without waiting for a line");
    assert!(stderr.is_empty(), "quietly: {stderr}");
}
