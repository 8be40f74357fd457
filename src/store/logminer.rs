//! The logminer's tables, read and written in one place: `logminer_state` (the
//! key/value table of docs/design.md#watermarks), `log_templates`, `log_template_merges`, `log_hits`, `log_alerts` and
//! `log_alert_publications`. The daemon and the operator commands (`remine`, `alerts`,
//! `scale logminer`) share these functions, so a key or a query has one spelling.
//!
//! Every read of a ReplacingMergeTree table uses `FINAL`, so a re-written row (a template
//! whose count grew, a refreshed alert) is read once, at its newest version.
//!
//! A template a sibling merge absorbed keeps its rows (`log_templates`, its `log_hits`);
//! `log_template_merges` names its survivor, and the reads here follow it: an absorbed
//! template is not restored and not a new-template candidate, and its hits count as the
//! survivor's (docs/mining.md, "Merging and identity"). The ledger writes every merge row
//! pointing at a live template and rewrites the rows of a chain when their survivor is
//! absorbed in turn, so one lookup resolves any chain.

use std::collections::{BTreeMap, HashSet};

use super::statements::Statement;
use super::{AlertPublicationRow, AlertRow, HitRow, StateRow, Store, StoreError, TemplateMergeRow, TemplateRow};

/// The global new-template watermark. It seeds a partition without its own key; only
/// `remine` still writes it (docs/design.md#watermarks).
pub const GLOBAL_WATERMARK: &str = "new_template_watermark_ns";
/// The masking rule set the stored templates were mined with, and when it began.
pub const MASKING_VERSION: &str = "masking_version";
pub const MASKING_EPOCH_START: &str = "masking_epoch_start_ns";
const WATERMARK_PREFIX: &str = "new_template_watermark_ns:p";
const HEARTBEAT_PREFIX: &str = "logminer_heartbeat_ns:";

// The module's SQL, each bound in the order of its `?`s ("rest" = what follows `FROM table`).
/// Binds: cutoff (ns).
const DELETE_HEARTBEATS_SQL: &str =
    "ALTER TABLE logminer_state DELETE WHERE key LIKE 'logminer_heartbeat_ns:%' AND updated_ns < ?";
/// Every key's newest version.
const LOAD_STATE_REST: &str = "FINAL";
/// The `(service, absorbed_id)` of the templates a merge absorbed and that were not born
/// again since. Binds: masking version.
macro_rules! absorbed {
    () => {
        "(SELECT service, absorbed_id FROM log_template_merges FINAL WHERE masking_version = ? AND survivor_id != absorbed_id)"
    };
}
/// Binds: masking version twice.
const LOAD_TEMPLATES_REST: &str = concat!(
    "FINAL WHERE masking_version = ? AND (service, template_id) NOT IN ",
    absorbed!(),
    " ORDER BY last_seen_ns, template_id"
);
/// Binds: masking version.
const LOAD_MERGES_REST: &str = "FINAL WHERE masking_version = ? AND survivor_id != absorbed_id \
ORDER BY service, absorbed_id";
/// Binds: services, masking version, after (ns), up to (ns), masking version.
const CANDIDATES_REST: &str = concat!(
    "FINAL WHERE has(?, service) AND masking_version = ? AND first_seen_ns > ? AND first_seen_ns <= ? ",
    "AND (service, template_id) NOT IN ",
    absorbed!(),
    " ORDER BY first_seen_ns, template_id"
);
/// Each hit counts for its template's survivor (itself when no merge absorbed it; 0 is the
/// join's default for a hit without a merge row). Subqueries on both sides, so the hits are
/// filtered before the join on every version. Binds: services, since (ns), masking
/// version, services.
const MINUTE_COUNTS_SQL: &str = "SELECT service, if(survivor_id = 0, template_id, survivor_id) AS survivor, \
intDiv(time_ns, 60000000000) AS minute, uniqExact(log_id) AS count \
FROM (SELECT service, template_id, log_id, time_ns FROM log_hits WHERE has(?, service) AND time_ns >= ?) AS hits \
ANY LEFT JOIN (SELECT service, absorbed_id AS template_id, survivor_id FROM log_template_merges FINAL \
WHERE masking_version = ? AND has(?, service)) AS merges USING (service, template_id) \
GROUP BY service, survivor, minute ORDER BY service, survivor, minute";
/// Binds: ids.
const EXISTING_ALERT_IDS_SQL: &str = "SELECT DISTINCT alert_id FROM log_alerts WHERE has(?, alert_id)";
/// Binds: ids.
const PUBLISHED_REST: &str = "WHERE has(?, alert_id)";

/// `new_template_watermark_ns:p<N>`: the new-template watermark of partition N.
pub fn watermark_key(partition: i32) -> String {
    format!("{WATERMARK_PREFIX}{partition}")
}

/// `new_shape_watermark_ns:p<N>`: the new-shape watermark of partition N (the root
/// services whose logs go to N).
pub fn shape_watermark_key(partition: i32) -> String {
    format!("{SHAPE_WATERMARK_PREFIX}{partition}")
}

const SHAPE_WATERMARK_PREFIX: &str = "new_shape_watermark_ns:p";

/// `logminer_heartbeat_ns:<replica id>`: written after every detection pass.
pub fn heartbeat_key(replica: &str) -> String {
    format!("{HEARTBEAT_PREFIX}{replica}")
}

/// One replica's last detection pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub replica: String,
    pub at_ns: u64,
}

/// A snapshot of `logminer_state`: key → value, newest version of each key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    entries: BTreeMap<String, String>,
}

impl State {
    pub async fn load(store: &Store) -> Result<State, StoreError> {
        let rows = store
            .select::<StateRow>(LOAD_STATE_REST)
            .fetch_all::<StateRow>()
            .await
            .map_err(|e| store.query_error("reading logminer_state", e))?;
        Ok(State::from_rows(rows))
    }

    pub fn from_rows(rows: impl IntoIterator<Item = StateRow>) -> State {
        // FINAL already keeps one version per key; taking the newest again guards against
        // parts not yet merged across partitions (the table has none) and keeps this pure.
        let mut newest: BTreeMap<String, (u64, String)> = BTreeMap::new();
        for r in rows {
            match newest.get(&r.key) {
                Some((at, _)) if *at > r.updated_ns => {}
                _ => {
                    newest.insert(r.key, (r.updated_ns, r.value));
                }
            }
        }
        State { entries: newest.into_iter().map(|(k, (_, v))| (k, v)).collect() }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// A key holding nanoseconds; a value that is not a number counts as absent.
    pub fn get_ns(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }

    /// The watermark an assignment of `partitions` starts from (docs/design.md#watermarks): the minimum
    /// over the partitions, where a partition without its own key takes the global one,
    /// and 0 when there is neither (every template is new).
    pub fn watermark(&self, partitions: &[i32]) -> u64 {
        let global = self.get_ns(GLOBAL_WATERMARK).unwrap_or(0);
        partitions.iter().map(|p| self.get_ns(&watermark_key(*p)).unwrap_or(global)).min().unwrap_or(global)
    }

    /// The new-shape watermark an assignment of `partitions` starts from: the minimum over
    /// the partitions that have one; none when no partition has one (the first pass then
    /// starts from its own time, so an upgrade announces no shape of the past).
    pub fn shape_watermark(&self, partitions: &[i32]) -> Option<u64> {
        partitions.iter().filter_map(|p| self.get_ns(&shape_watermark_key(*p))).min()
    }

    /// Partitions in `0..partitions` that have no watermark key of their own.
    pub fn partitions_without_watermark(&self, partitions: i32) -> Vec<i32> {
        (0..partitions).filter(|p| self.get_ns(&watermark_key(*p)).is_none()).collect()
    }

    /// The partitions that have a watermark key of their own, with its value (what `remine`
    /// raises).
    pub fn partition_watermarks(&self) -> BTreeMap<i32, u64> {
        self.entries
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(WATERMARK_PREFIX)?.parse().ok()?, v.trim().parse().ok()?)))
            .collect()
    }

    /// Every replica's heartbeat, newest first.
    pub fn heartbeats(&self) -> Vec<Heartbeat> {
        let mut beats: Vec<Heartbeat> = self
            .entries
            .iter()
            .filter_map(|(k, v)| {
                let replica = k.strip_prefix(HEARTBEAT_PREFIX)?;
                Some(Heartbeat { replica: replica.to_string(), at_ns: v.trim().parse().ok()? })
            })
            .collect();
        beats.sort_by(|a, b| b.at_ns.cmp(&a.at_ns).then_with(|| a.replica.cmp(&b.replica)));
        beats
    }

    /// `(masking_version, masking_epoch_start_ns)`, when an epoch has begun.
    pub fn masking_epoch(&self) -> Option<(String, u64)> {
        Some((self.get(MASKING_VERSION)?.to_string(), self.get_ns(MASKING_EPOCH_START).unwrap_or(0)))
    }
}

/// Writes keys (a new version of each; the newest wins on read).
pub async fn write_state(store: &Store, entries: &[(String, String)], now_ns: u64) -> Result<(), StoreError> {
    let rows: Vec<StateRow> = entries
        .iter()
        .map(|(key, value)| StateRow { key: key.clone(), value: value.clone(), updated_ns: now_ns })
        .collect();
    store.insert(&rows).await
}

/// Deletes heartbeat keys whose last beat is older than `cutoff_ns` (at start-up, keys older
/// than a day: docs/design.md#watermarks). Asynchronous on the server (a mutation), which is fine: a stale
/// key only matters to `remine`, and it is a day old.
pub async fn delete_heartbeats_before(store: &Store, cutoff_ns: u64) -> Result<(), StoreError> {
    store
        .client()
        .query(&super::schema::mutation_sql(DELETE_HEARTBEATS_SQL, store.cluster()))
        .bind(cutoff_ns)
        .execute()
        .await
        .map_err(|e| store.query_error("deleting old logminer heartbeats", e))
}

/// The live stored templates of one masking version (not those a merge absorbed), least
/// recently seen first: the order [`crate::mine::Miner::restore`] expects, so eviction
/// resumes where it was. A restored absorbed template would take its lines back from its
/// survivor, and the restarted miner would no longer mine as the original.
pub async fn load_templates(store: &Store, masking_version: &str) -> Result<Vec<TemplateRow>, StoreError> {
    store
        .select::<TemplateRow>(LOAD_TEMPLATES_REST)
        .bind(masking_version)
        .bind(masking_version)
        .fetch_all::<TemplateRow>()
        .await
        .map_err(|e| store.query_error("reading log_templates", e))
}

/// The merges in force under one masking version: every absorbed template not born again,
/// with its survivor (what the ledger needs to resolve later chains).
pub async fn load_merges(store: &Store, masking_version: &str) -> Result<Vec<TemplateMergeRow>, StoreError> {
    store
        .select::<TemplateMergeRow>(LOAD_MERGES_REST)
        .bind(masking_version)
        .fetch_all::<TemplateMergeRow>()
        .await
        .map_err(|e| store.query_error("reading log_template_merges", e))
}

/// What one flush stores: the rows a [`crate::workflow::ledger::Pending`] view holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinedRows<'a> {
    pub hits: &'a [HitRow],
    pub merges: &'a [TemplateMergeRow],
    pub templates: &'a [TemplateRow],
}

/// Stores hits, then merges, then templates. Hits first, so a template row never names hits
/// that are missing (a reader counting hits of a template finds them all or the template is
/// absent); merges before templates, so a survivor's row, whose count includes what it
/// absorbed, is never read beside the absorbed templates still live.
pub async fn store_mined(store: &Store, mined: MinedRows<'_>) -> Result<(), StoreError> {
    store.insert(mined.hits).await?;
    store.insert(mined.merges).await?;
    store.insert(mined.templates).await
}

/// The templates of `services` first seen in `(after_ns, up_to_ns]` under `masking_version`,
/// except those a merge absorbed: the new-template candidates of a pass. (An absorbed
/// template already announced keeps its alert: it was seen.)
pub async fn new_template_candidates(
    store: &Store,
    services: &[String],
    masking_version: &str,
    after_ns: u64,
    up_to_ns: u64,
) -> Result<Vec<TemplateRow>, StoreError> {
    if services.is_empty() {
        return Ok(Vec::new());
    }
    store
        .select::<TemplateRow>(CANDIDATES_REST)
        .bind(services)
        .bind(masking_version)
        .bind(after_ns)
        .bind(up_to_ns)
        .bind(masking_version)
        .fetch_all::<TemplateRow>()
        .await
        .map_err(|e| store.query_error("reading new-template candidates", e))
}

/// One template's distinct log count in one minute (`minute` = nanoseconds / 60 s).
#[derive(Debug, Clone, PartialEq, Eq, clickhouse::Row, serde::Deserialize)]
pub struct MinuteCount {
    pub service: String,
    /// A live template: hits of the templates it absorbed count as its own.
    pub template_id: u64,
    pub minute: u64,
    pub count: u64,
}

/// Per service, template and minute, the distinct logs (`uniqExact(log_id)`, so re-read
/// hits count once) of `services` with a log time at or after `since_ns`: the input of the
/// spike and silence rules. A hit of a template absorbed under `masking_version` counts
/// for its survivor, so a merge moves no count: the survivor's baseline holds what it
/// absorbed (no spike), and an absorbed template has no series of its own to fall silent.
pub async fn minute_counts(
    store: &Store,
    services: &[String],
    masking_version: &str,
    since_ns: u64,
) -> Result<Vec<MinuteCount>, StoreError> {
    if services.is_empty() {
        return Ok(Vec::new());
    }
    store
        .client()
        .query(MINUTE_COUNTS_SQL)
        .bind(services)
        .bind(since_ns)
        .bind(masking_version)
        .bind(services)
        .fetch_all::<MinuteCount>()
        .await
        .map_err(|e| store.query_error("reading minute counts from log_hits", e))
}

/// Stores alert versions (a ReplacingMergeTree by alert id: the newest `updated_ns` wins).
pub async fn store_alerts(store: &Store, alerts: &[AlertRow]) -> Result<(), StoreError> {
    store.insert(alerts).await
}

/// Which of `ids` are stored in `log_alerts` (any version).
pub async fn existing_alert_ids(store: &Store, ids: &[u64]) -> Result<HashSet<u64>, StoreError> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let found = store
        .client()
        .query(EXISTING_ALERT_IDS_SQL)
        .bind(ids)
        .fetch_all::<u64>()
        .await
        .map_err(|e| store.query_error("reading log_alerts ids", e))?;
    Ok(found.into_iter().collect())
}

/// Records that these alert versions `(alert_id, updated_ns)` reached the alerts topic.
pub async fn mark_published(store: &Store, versions: &[(u64, u64)], published_ns: u64) -> Result<(), StoreError> {
    let rows: Vec<AlertPublicationRow> = versions
        .iter()
        .map(|(alert_id, alert_updated_ns)| AlertPublicationRow {
            alert_id: *alert_id,
            alert_updated_ns: *alert_updated_ns,
            published_ns,
        })
        .collect();
    store.insert(&rows).await
}

/// The newest version of each alert of `services` (all services when `None`) stored at or
/// after `since_ns` whose version has no publication mark, oldest first, at most `limit`.
pub async fn unmarked_alerts(
    store: &Store,
    services: Option<&[String]>,
    since_ns: u64,
    limit: u64,
) -> Result<Vec<AlertRow>, StoreError> {
    if services.is_some_and(|s| s.is_empty()) {
        return Ok(Vec::new());
    }
    let sql = unmarked_rest(services.is_some(), limit);
    let mut q = store.select::<AlertRow>(&sql).bind(since_ns);
    if let Some(services) = services {
        q = q.bind(services);
    }
    q.fetch_all::<AlertRow>().await.map_err(|e| store.query_error("reading unpublished alerts", e))
}

/// After `FROM log_alerts`: the newest versions, of some services, that are not resolved
/// and turned inactive (`last_at` before the cutoff) within the window, the oldest first.
/// Binds: services, cutoff (ns), since (ns).
fn inactive_unresolved_rest(limit: u64) -> String {
    format!(
        "FINAL WHERE has(?, service) AND resolved_at = 0 AND last_at < ? AND last_at >= ? \
         ORDER BY last_at, alert_id LIMIT {limit}"
    )
}

/// The alerts of `services` that were active once and are not any more at `now_ns` (their
/// `last_at` before [`active_cutoff_ns`]), with no resolved version yet, whose `last_at` is
/// at or after `since_ns`: the oldest `limit`.
pub async fn inactive_unresolved(
    store: &Store,
    services: &[String],
    now_ns: u64,
    since_ns: u64,
    limit: u64,
) -> Result<Vec<AlertRow>, StoreError> {
    if services.is_empty() {
        return Ok(Vec::new());
    }
    store
        .select::<AlertRow>(&inactive_unresolved_rest(limit))
        .bind(services)
        .bind(active_cutoff_ns(now_ns))
        .bind(since_ns)
        .fetch_all::<AlertRow>()
        .await
        .map_err(|e| store.query_error("reading inactive alerts", e))
}

/// Which `(alert_id, updated_ns)` versions among `alerts` are marked published.
pub async fn published_versions(store: &Store, alerts: &[AlertRow]) -> Result<HashSet<(u64, u64)>, StoreError> {
    if alerts.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<u64> = alerts.iter().map(|a| a.alert_id).collect();
    let rows = store
        .select::<AlertPublicationRow>(PUBLISHED_REST)
        .bind(ids)
        .fetch_all::<AlertPublicationRow>()
        .await
        .map_err(|e| store.query_error("reading log_alert_publications", e))?;
    Ok(rows.into_iter().map(|r| (r.alert_id, r.alert_updated_ns)).collect())
}

/// What `alerts list` and the restore of a taken-over service select.
#[derive(Debug, Clone, Default)]
pub struct AlertQuery {
    pub alert_id: Option<u64>,
    /// Any of these ids.
    pub ids: Option<Vec<u64>>,
    pub service: Option<String>,
    /// Any of these services.
    pub services: Option<Vec<String>>,
    pub kind: Option<crate::wire::alert::AlertKind>,
    /// Only alerts whose `last_at` is at or after this (the active ones, see
    /// [`active_cutoff_ns`]).
    pub last_at_since_ns: Option<u64>,
    /// Only alerts whose `last_at` is before this (the inactive ones).
    pub last_at_before_ns: Option<u64>,
    /// Keyset cursor in the list's order: alerts after this (last_at, alert_id).
    pub after: Option<(u64, u64)>,
    pub limit: Option<u64>,
}

/// After `FROM log_alerts`: the filters `q` sets, in the order [`alerts`] binds them.
fn alerts_rest(q: &AlertQuery) -> String {
    let limit = q.limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
    format!("{} ORDER BY last_at DESC, alert_id{limit}", alerts_where(q))
}

/// How many alerts match `q` with no limit (`tayga alerts list`'s "100 of N shown").
const COUNT_ALERTS_SQL: &str = "SELECT count() FROM log_alerts";

/// `FINAL WHERE …`: the filters of `q` (not its limit).
fn alerts_where(q: &AlertQuery) -> String {
    let mut conditions = vec!["1"];
    if q.alert_id.is_some() {
        conditions.push("alert_id = ?");
    }
    if q.ids.is_some() {
        conditions.push("has(?, alert_id)");
    }
    if q.service.is_some() {
        conditions.push("service = ?");
    }
    if q.services.is_some() {
        conditions.push("has(?, service)");
    }
    if q.kind.is_some() {
        conditions.push("kind = ?");
    }
    if q.last_at_since_ns.is_some() {
        conditions.push("last_at >= ?");
    }
    if q.last_at_before_ns.is_some() {
        conditions.push("last_at < ?");
    }
    if q.after.is_some() {
        conditions.push("(last_at < ? OR (last_at = ? AND alert_id > ?))");
    }
    format!("FINAL WHERE {}", conditions.join(" AND "))
}

/// After `FROM log_alerts`: the newest unmarked alert versions, optionally of some services.
/// Binds: since (ns), then the services when `by_service`.
fn unmarked_rest(by_service: bool, limit: u64) -> String {
    let service_filter = if by_service { "AND has(?, service)" } else { "" };
    format!(
        "FINAL WHERE updated_ns >= ? {service_filter} \
         AND (alert_id, updated_ns) NOT IN (SELECT alert_id, alert_updated_ns FROM log_alert_publications) \
         ORDER BY updated_ns, alert_id LIMIT {limit}"
    )
}

/// Every query of this module with sample binds (the widest variant of the dynamic ones),
/// for the registry (and, in this order, for `tests/it/logminer_store.rs`).
pub fn statements() -> Vec<Statement> {
    use clickhouse::Row as _;
    let select =
        |table: &str, columns: &[&str], rest: &str| format!("SELECT {} FROM {table} {rest}", columns.join(", "));
    let every_filter = AlertQuery {
        alert_id: Some(0),
        ids: Some(Vec::new()),
        service: Some(String::new()),
        services: Some(Vec::new()),
        kind: Some(crate::wire::alert::AlertKind::Spike),
        last_at_since_ns: Some(0),
        last_at_before_ns: Some(0),
        after: Some((0, 0)),
        limit: Some(10),
    };
    vec![
        Statement::new("logminer.delete_heartbeats", DELETE_HEARTBEATS_SQL).binds(["0"]),
        Statement::new(
            "logminer.load_templates",
            select("log_templates", TemplateRow::COLUMN_NAMES, LOAD_TEMPLATES_REST),
        )
        .binds(["'v1'", "'v1'"]),
        Statement::new(
            "logminer.load_merges",
            select("log_template_merges", TemplateMergeRow::COLUMN_NAMES, LOAD_MERGES_REST),
        )
        .binds(["'v1'"]),
        Statement::new(
            "logminer.new_template_candidates",
            select("log_templates", TemplateRow::COLUMN_NAMES, CANDIDATES_REST),
        )
        .binds(["['a']", "'v1'", "0", "1", "'v1'"]),
        Statement::new("logminer.minute_counts", MINUTE_COUNTS_SQL).binds(["['a','b']", "0", "'v1'", "['a','b']"]),
        Statement::new("logminer.existing_alert_ids", EXISTING_ALERT_IDS_SQL).binds(["[5,8]"]),
        Statement::new(
            "logminer.unmarked_alerts",
            select("log_alerts", AlertRow::COLUMN_NAMES, &unmarked_rest(true, 10)),
        )
        .binds(["0", "['a']"]),
        Statement::new(
            "logminer.inactive_unresolved",
            select("log_alerts", AlertRow::COLUMN_NAMES, &inactive_unresolved_rest(10)),
        )
        .binds(["['a']", "9", "0"]),
        Statement::new(
            "logminer.published_versions",
            select("log_alert_publications", AlertPublicationRow::COLUMN_NAMES, PUBLISHED_REST),
        )
        .binds(["[5]"]),
        Statement::new("logminer.alerts", select("log_alerts", AlertRow::COLUMN_NAMES, &alerts_rest(&every_filter)))
            .binds(["0", "[5]", "'a'", "['a']", "'spike'", "0", "9", "9", "9", "0"]),
        Statement::new("logminer.load_state", select("logminer_state", StateRow::COLUMN_NAMES, LOAD_STATE_REST)),
        Statement::new("logminer.count_alerts", format!("{COUNT_ALERTS_SQL} {}", alerts_where(&every_filter)))
            .binds(["0", "[5]", "'a'", "['a']", "'spike'", "0", "9", "9", "9", "0"]),
    ]
}

/// The newest version of each alert matching `q`, most recently active first.
pub async fn alerts(store: &Store, q: &AlertQuery) -> Result<Vec<AlertRow>, StoreError> {
    let query = bind_alert_query(store.select::<AlertRow>(&alerts_rest(q)), q);
    query.fetch_all::<AlertRow>().await.map_err(|e| store.query_error("reading log_alerts", e))
}

/// How many alerts match `q`, its limit left out.
pub async fn count_alerts(store: &Store, q: &AlertQuery) -> Result<u64, StoreError> {
    let sql = format!("{COUNT_ALERTS_SQL} {}", alerts_where(q));
    let query = bind_alert_query(store.client().query(&sql), q);
    query.fetch_one::<u64>().await.map_err(|e| store.query_error("counting log_alerts", e))
}

/// Binds `q`'s values in the order [`alerts_where`] writes their placeholders.
fn bind_alert_query(mut query: clickhouse::query::Query, q: &AlertQuery) -> clickhouse::query::Query {
    if let Some(id) = q.alert_id {
        query = query.bind(id);
    }
    if let Some(ids) = &q.ids {
        query = query.bind(ids);
    }
    if let Some(service) = &q.service {
        query = query.bind(service.as_str());
    }
    if let Some(services) = &q.services {
        query = query.bind(services);
    }
    if let Some(kind) = q.kind {
        query = query.bind(kind.as_str());
    }
    if let Some(since) = q.last_at_since_ns {
        query = query.bind(since);
    }
    if let Some(before) = q.last_at_before_ns {
        query = query.bind(before);
    }
    if let Some((last_at, id)) = q.after {
        query = query.bind(last_at).bind(last_at).bind(id);
    }
    query
}

/// An alert is active while its `last_at` is within this of now: a spike or silence is
/// refreshed at every detection pass while it lasts (docs/design.md#active-alerts: a silence
/// only while its service still logs), and a new template stays active this long after it appeared.
pub const ACTIVE_WINDOW_NS: u64 = 5 * 60 * 1_000_000_000;

/// The `last_at` at or after which an alert counts as active at `now_ns`.
pub fn active_cutoff_ns(now_ns: u64) -> u64 {
    now_ns.saturating_sub(ACTIVE_WINDOW_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, value: &str, at: u64) -> StateRow {
        StateRow { key: key.into(), value: value.into(), updated_ns: at }
    }

    #[test]
    fn the_watermark_is_the_minimum_over_partitions_with_the_global_key_as_seed() {
        let s = State::from_rows([
            row(GLOBAL_WATERMARK, "100", 1),
            row(&watermark_key(0), "500", 1),
            row(&watermark_key(1), "300", 1),
            row(&watermark_key(1), "400", 2),
        ]);
        assert_eq!(s.watermark(&[0]), 500);
        assert_eq!(s.watermark(&[0, 1]), 400, "the newest version of a key counts");
        assert_eq!(s.watermark(&[0, 1, 2]), 100, "partition 2 has no key: the global one seeds it");
        assert_eq!(State::default().watermark(&[0, 1]), 0);
        assert_eq!(s.partitions_without_watermark(3), vec![2]);
        assert_eq!(s.partition_watermarks(), BTreeMap::from([(0, 500), (1, 400)]));
    }

    #[test]
    fn heartbeats_are_read_newest_first_and_junk_is_ignored() {
        let s = State::from_rows([
            row(&heartbeat_key("a"), "10", 1),
            row(&heartbeat_key("b"), "30", 1),
            row(&heartbeat_key("c"), "not a number", 1),
            row(MASKING_VERSION, "tayga-mask-1", 1),
        ]);
        let beats = s.heartbeats();
        assert_eq!(beats.iter().map(|h| h.replica.as_str()).collect::<Vec<_>>(), vec!["b", "a"]);
        assert_eq!(s.masking_epoch(), Some(("tayga-mask-1".to_string(), 0)));
    }
}
