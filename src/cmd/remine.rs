//! `tayga remine [--dry-run]`: re-mine the stored logs with the current masking rules and
//! rebuild templates and hits (docs/design.md#watermarks; docs/logminer-commands.md).
//!
//! The order is what makes an interrupted run safe to repeat: the heartbeat rule first, then
//! the current masking version's templates and merges are deleted, hits are stored page by
//! page (a hit replaces the older hit of its log), merges and then templates once they are
//! final, and `logminer_state` (watermarks, masking epoch) last. Until that last write
//! nothing says the re-mine happened, so a second run redoes the same range.
//!
//! It drives the logminer's [`TemplateLedger`], so it makes the same sibling merges as the logminer
//! mining the same logs in the same order, and stores them the same way: the absorbed
//! templates are retired, and their survivors keep the ids the logminer gave them.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use crate::cmd::table::{count, stderr_is_terminal, Layout, Table};
use anyhow::Context;
use serde::Serialize;

use crate::cli::RemineArgs;
use crate::cmd::time::{format_age, format_time, Clock};
use crate::config::Config;
use crate::store::logminer::{
    store_mined, watermark_key, write_state, Heartbeat, MinedRows, State, GLOBAL_WATERMARK, MASKING_EPOCH_START,
    MASKING_VERSION,
};
use crate::store::remine::{self as q, ServiceLogs};
use crate::store::{LogRow, Store, TemplateMergeRow, TemplateRow};
use crate::workflow::ledger::TemplateLedger;

/// Logs read (and hits stored) at a time: a page of logs and its hits are the memory a run
/// needs beside the templates.
const PAGE_LOGS: u64 = 20_000;
/// Template rows per INSERT at the end.
const TEMPLATE_BATCH: usize = 10_000;
/// How long the deletion of the old templates may take on the server.
const DELETE_DEADLINE: Duration = Duration::from_secs(300);

/// Why remine will not run, or did not finish its last step.
#[derive(Debug, thiserror::Error)]
pub enum RemineError {
    #[error(
        "remine refused: logminer replica `{replica}` wrote a heartbeat {} ago, under {}; stop every logminer \
         replica and run remine once its last heartbeat is {} old",
        format_age(*.age), format_age(*.fresh), format_age(*.fresh)
    )]
    LiveHeartbeat { replica: String, age: Duration, fresh: Duration },
    #[error(
        "logminer replica `{replica}` started during the re-mine (heartbeat {} ago): templates and hits were \
         rebuilt but the watermarks and masking state were not written; stop every logminer replica and run \
         remine again",
        format_age(*.age)
    )]
    StartedDuring { replica: String, age: Duration },
}

/// The youngest heartbeat, when it is younger than `fresh` at `now_ns` (docs/design.md#watermarks:
/// remine refuses while any heartbeat is under 3 minutes old). A heartbeat from the future (a
/// replica whose clock is ahead) counts as age 0: live.
pub fn live_heartbeat(state: &State, now_ns: u64, fresh: Duration) -> Option<(Heartbeat, Duration)> {
    let youngest = state.heartbeats().into_iter().next()?;
    let age = Duration::from_nanos(now_ns.saturating_sub(youngest.at_ns));
    (age < fresh).then_some((youngest, age))
}

/// What a run re-mines.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The masking version the stored templates were mined with, if any.
    pub masking_version_before: Option<String>,
    /// The version of this build's `[logminer.masking]` rules: what the run writes.
    pub masking_version: String,
    /// A new masking epoch begins: every stored log is re-mined.
    pub new_epoch: bool,
    /// Logs with `time_ns` at or after this are re-mined.
    pub since_ns: u64,
    /// `masking_epoch_start_ns` after the run: the start of what it re-mines.
    pub epoch_start_ns: u64,
    pub logs: u64,
    pub services: Vec<ServiceLogs>,
}

impl Plan {
    /// Decides the range from the stored masking epoch and the current version (the masking
    /// epoch rule in docs/logminer-commands.md). `services` are the stored logs at or after
    /// [`Plan::since`] of the same decision.
    fn new(epoch: Option<(String, u64)>, version: &str, services: Vec<ServiceLogs>) -> Plan {
        let new_epoch = epoch.as_ref().is_none_or(|(v, _)| v != version);
        let since_ns = Plan::since(epoch.as_ref(), version);
        let oldest = services.iter().map(|s| s.oldest_ns).min();
        // A new epoch starts at the oldest log it re-mines (0 when there is none: every log
        // that arrives belongs to it); an ongoing one keeps its start.
        let epoch_start_ns = if new_epoch { oldest.unwrap_or(0) } else { since_ns };
        Plan {
            masking_version_before: epoch.map(|(v, _)| v),
            masking_version: version.to_string(),
            new_epoch,
            since_ns,
            epoch_start_ns,
            logs: services.iter().map(|s| s.logs).sum(),
            services,
        }
    }

    /// Logs with `time_ns` at or after this are re-mined.
    fn since(epoch: Option<&(String, u64)>, version: &str) -> u64 {
        match epoch {
            Some((v, start)) if v == version => *start,
            _ => 0,
        }
    }
}

/// What a finished run did.
#[derive(Debug, Serialize)]
struct Outcome {
    dry_run: bool,
    #[serde(flatten)]
    plan: Plan,
    templates: u64,
    /// Templates a sibling merge retired (their survivors are among `templates`).
    absorbed: u64,
    hits: u64,
    /// The global new-template watermark written, and how many partition keys were raised to it.
    watermark_ns: Option<u64>,
    partition_keys_raised: usize,
}

pub async fn run(config: &Config, args: &RemineArgs, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let clock = Clock::from_env()?;
    let store = Store::new(&config.clickhouse);
    let database = &config.clickhouse.database;
    let fresh = Duration::from_secs(config.logminer.heartbeat_fresh_secs);

    let state =
        State::load(&store).await.with_context(|| format!("reading logminer_state of database `{database}`"))?;
    if let Some((beat, age)) = live_heartbeat(&state, clock.now_ns(), fresh) {
        return Err(RemineError::LiveHeartbeat { replica: beat.replica, age, fresh }.into());
    }
    let mut ledger =
        TemplateLedger::new(config.logminer.mining()).context("building the miner from [logminer.masking]")?;
    let version = ledger.masking_version().to_string();
    let epoch = state.masking_epoch();
    let since = Plan::since(epoch.as_ref(), &version);
    let services = q::service_summary(&store, since)
        .await
        .with_context(|| format!("counting the stored logs of database `{database}`"))?;
    let plan = Plan::new(epoch, &version, services);

    if args.dry_run {
        let outcome = Outcome {
            dry_run: true,
            plan,
            templates: 0,
            absorbed: 0,
            hits: 0,
            watermark_ns: None,
            partition_keys_raised: 0,
        };
        return write_outcome(&outcome, json, out);
    }

    let minutes = q::minute_counts(&store, since).await.context("counting the stored logs per minute")?;
    let windows = q::windows(&minutes, since, PAGE_LOGS);
    q::delete_templates(&store, &version, DELETE_DEADLINE)
        .await
        .with_context(|| format!("deleting the templates of masking version {version}"))?;

    let bar = progress(windows.iter().map(|w| w.logs).sum(), json);
    // Template rows are final only at the end (a template's text and count change as later
    // logs join it, a merge retires it), so the newest row of each is kept here and written
    // once, and so is the newest merge row of each absorbed template.
    let mut templates: BTreeMap<(String, u64), TemplateRow> = BTreeMap::new();
    let mut merges: BTreeMap<(String, u64), TemplateMergeRow> = BTreeMap::new();
    let mut hits = 0u64;
    for window in &windows {
        let mut after: Option<LogRow> = None;
        loop {
            let page = q::logs_page(&store, window, after.as_ref(), PAGE_LOGS).await.context("reading stored logs")?;
            for log in &page {
                // The log's own time is when its template counts as seen, so first_seen_ns
                // is the first log of the template, not the time of this run.
                ledger.mine(&log.service, log.log_id, log.time_ns, &log.body, log.time_ns);
            }
            let pending = ledger.pending(clock.now_ns());
            let receipt = pending.receipt();
            store_mined(&store, MinedRows { hits: pending.hits, ..Default::default() })
                .await
                .context("storing re-mined hits")?;
            // Retired first: a template in this view is live now (born again if it was
            // absorbed before).
            for m in pending.merges {
                if m.survivor_id != m.absorbed_id {
                    templates.remove(&(m.service.clone(), m.absorbed_id));
                }
                merges.insert((m.service.clone(), m.absorbed_id), m);
            }
            templates.extend(pending.templates.into_iter().map(|r| ((r.service.clone(), r.template_id), r)));
            hits += pending.hits.len() as u64;
            ledger.stored(receipt);
            bar.inc(page.len() as u64);
            let full = page.len() as u64 == PAGE_LOGS;
            after = page.into_iter().last();
            if !full {
                break;
            }
        }
    }
    bar.finish_and_clear();

    let written_ns = clock.now_ns();
    let merges: Vec<TemplateMergeRow> = merges.into_values().collect();
    let absorbed = merges.iter().filter(|m| m.survivor_id != m.absorbed_id).count() as u64;
    for chunk in merges.chunks(TEMPLATE_BATCH) {
        store_mined(&store, MinedRows { merges: chunk, ..Default::default() })
            .await
            .context("storing re-mined template merges")?;
    }
    let rows: Vec<TemplateRow> = templates.into_values().map(|r| TemplateRow { updated_ns: written_ns, ..r }).collect();
    for chunk in rows.chunks(TEMPLATE_BATCH) {
        store_mined(&store, MinedRows { templates: chunk, ..Default::default() })
            .await
            .context("storing re-mined templates")?;
    }

    // State last. A logminer that started meanwhile has loaded a half-built template set:
    // say so rather than mark the re-mine done under it.
    let state = State::load(&store).await.context("reading logminer_state")?;
    if let Some((beat, age)) = live_heartbeat(&state, clock.now_ns(), fresh) {
        return Err(RemineError::StartedDuring { replica: beat.replica, age }.into());
    }
    // The watermark is the end of the re-mine, and never before a re-mined template was first
    // seen (a log stamped in the future), so the logminer announces none of them.
    let newest_seen = rows.iter().map(|r| r.first_seen_ns).max().unwrap_or(0);
    let watermark = clock.now_ns().max(newest_seen);
    let raised: Vec<i32> =
        state.partition_watermarks().into_iter().filter(|(_, ns)| *ns < watermark).map(|(p, _)| p).collect();
    let mut entries: Vec<(String, String)> =
        raised.iter().map(|p| (watermark_key(*p), watermark.to_string())).collect();
    entries.push((GLOBAL_WATERMARK.to_string(), watermark.to_string()));
    entries.push((MASKING_VERSION.to_string(), version.clone()));
    entries.push((MASKING_EPOCH_START.to_string(), plan.epoch_start_ns.to_string()));
    write_state(&store, &entries, clock.now_ns()).await.context("writing logminer_state")?;

    let outcome = Outcome {
        dry_run: false,
        plan,
        templates: rows.len() as u64,
        absorbed,
        hits,
        watermark_ns: Some(watermark),
        partition_keys_raised: raised.len(),
    };
    write_outcome(&outcome, json, out)
}

/// Logs done of the total, on stderr; hidden when stderr is not a terminal or with `--json`.
fn progress(total: u64, json: bool) -> indicatif::ProgressBar {
    if json || !stderr_is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("re-mining {bar:40} {pos}/{len} logs {per_sec} eta {eta}")
            .expect("static template"),
    );
    bar
}

fn write_outcome(o: &Outcome, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(o)?)?;
        return Ok(());
    }
    let p = &o.plan;
    if o.dry_run {
        writeln!(out, "dry run: nothing was changed")?;
    }
    let version = match (&p.masking_version_before, p.new_epoch) {
        (Some(before), false) => format!("{before} (unchanged: the logs of the current epoch are re-mined)"),
        (Some(before), true) => {
            format!("{before} -> {} (a new masking epoch: every stored log is re-mined)", p.masking_version)
        }
        (None, _) => format!("none -> {} (a new masking epoch: every stored log is re-mined)", p.masking_version),
    };
    writeln!(out, "masking version: {version}")?;
    let range = |s: &ServiceLogs| (s.oldest_ns, s.newest_ns);
    match (p.services.iter().map(range).map(|r| r.0).min(), p.services.iter().map(range).map(|r| r.1).max()) {
        (Some(oldest), Some(newest)) => writeln!(
            out,
            "logs: {} of {} services, {} to {}",
            p.logs,
            p.services.len(),
            format_time(oldest),
            format_time(newest)
        )?,
        _ => writeln!(out, "logs: none stored since {}", format_time(p.since_ns))?,
    }
    writeln!(out, "epoch start: {}", format_time(p.epoch_start_ns))?;
    if o.dry_run {
        if !p.services.is_empty() {
            let layout = Layout::current();
            let mut table = Table::new(["service", "logs", "oldest", "newest"]).numeric(&["logs"]);
            for s in &p.services {
                table.row([
                    s.service.clone(),
                    count(s.logs, layout),
                    format_time(s.oldest_ns),
                    format_time(s.newest_ns),
                ]);
            }
            write!(out, "{}", table.render(layout))?;
        }
        writeln!(
            out,
            "would delete the templates of masking version {}, rebuild templates and hits from these logs, and raise \
             the new-template watermarks to the end of the run",
            p.masking_version
        )?;
        return Ok(());
    }
    writeln!(out, "re-mined: {} templates, {} hits", o.templates, o.hits)?;
    if o.absorbed > 0 {
        writeln!(out, "merged: {} templates absorbed by the survivors among them", o.absorbed)?;
    }
    if let Some(w) = o.watermark_ns {
        writeln!(
            out,
            "new-template watermark: {} (the global key and {} partition keys raised to it)",
            format_time(w),
            o.partition_keys_raised
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::logminer::heartbeat_key;
    use crate::store::StateRow;

    const MIN: u64 = 60_000_000_000;

    fn state(rows: &[(&str, &str)]) -> State {
        State::from_rows(rows.iter().map(|(k, v)| StateRow { key: k.to_string(), value: v.to_string(), updated_ns: 1 }))
    }

    #[test]
    fn a_heartbeat_under_the_bound_is_live_and_the_youngest_is_named() {
        let s =
            state(&[(&heartbeat_key("a"), &(10 * MIN).to_string()), (&heartbeat_key("b"), &(11 * MIN).to_string())]);
        let fresh = Duration::from_secs(180);
        let (beat, age) = live_heartbeat(&s, 13 * MIN, fresh).unwrap();
        assert_eq!((beat.replica.as_str(), age), ("b", Duration::from_secs(120)));
        assert!(live_heartbeat(&s, 14 * MIN, fresh).is_none(), "exactly 3 minutes old is no longer live");
        assert!(live_heartbeat(&s, 5 * MIN, fresh).is_some(), "a heartbeat from the future is live");
        assert!(live_heartbeat(&State::default(), 0, fresh).is_none());
        let err = RemineError::LiveHeartbeat { replica: "b".into(), age: Duration::from_secs(120), fresh };
        assert_eq!(
            err.to_string(),
            "remine refused: logminer replica `b` wrote a heartbeat 2m 0s ago, under 3m 0s; stop every logminer \
             replica and run remine once its last heartbeat is 3m 0s old"
        );
    }

    fn logs(service: &str, logs: u64, oldest_ns: u64) -> ServiceLogs {
        ServiceLogs { service: service.into(), logs, oldest_ns, newest_ns: oldest_ns + 10 }
    }

    #[test]
    fn the_masking_epoch_decides_the_range() {
        // No epoch yet, or another version: a new epoch over every stored log.
        for epoch in [None, Some(("old".to_string(), 500))] {
            assert_eq!(Plan::since(epoch.as_ref(), "new"), 0);
            let p = Plan::new(epoch, "new", vec![logs("a", 2, 300), logs("b", 3, 200)]);
            assert!(p.new_epoch);
            assert_eq!((p.since_ns, p.epoch_start_ns, p.logs), (0, 200, 5));
        }
        let p = Plan::new(Some(("old".into(), 500)), "new", vec![]);
        assert_eq!((p.masking_version_before.as_deref(), p.epoch_start_ns), (Some("old"), 0));

        // The same version: the logs since the epoch began; the start is kept.
        let epoch = Some(("v".to_string(), 500));
        assert_eq!(Plan::since(epoch.as_ref(), "v"), 500);
        let p = Plan::new(epoch, "v", vec![logs("a", 2, 700)]);
        assert!(!p.new_epoch);
        assert_eq!((p.since_ns, p.epoch_start_ns), (500, 500));
    }
}
