//! The API's reads (and the metric recorder's insert), one file per area. Every statement is
//! a `const …_SQL` text with `?` placeholders filled by `.bind()`, plus the function that runs
//! it, so the statement registry can list them and `tests/it/api.rs` runs each one on 18.16
//! and in chdb-core. Where a filter is optional the SQL is built from fixed fragments only
//! (never from a value), and `statements()` lists the widest variant.
//!
//! Every scan of a big table (spans, logs, hits, stories, metrics) is bounded by a time
//! [`Window`] and a row limit; a lookup by id uses the table's primary key.

pub mod alerts;
pub mod deliveries;
pub mod logs;
pub mod pipeline;
pub mod services;
pub mod stories;
pub mod synthetic;
pub mod templates;
pub mod traces;

use super::statements::Statement;

/// A half-open time range `[from_ns, to_ns)` in Unix nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from_ns: u64,
    pub to_ns: u64,
}

/// The most rows one page may hold; the API refuses a larger `limit`.
pub const MAX_LIMIT: u64 = 1000;

/// A value bound to a `?` of a statement built from a search (`crate::search::Query`): the
/// statement is made of fixed fragments only, and these travel beside it in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Bind {
    Str(String),
    U64(u64),
}

impl Bind {
    /// The value as an SQL literal, as the client sends it (the registry's sample values).
    pub fn literal(&self) -> String {
        match self {
            Bind::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
            Bind::U64(n) => n.to_string(),
        }
    }
}

/// Binds `binds` in order.
fn bind_all(mut query: clickhouse::query::Query, binds: &[Bind]) -> clickhouse::query::Query {
    for b in binds {
        query = match b {
            Bind::Str(s) => query.bind(s.as_str()),
            Bind::U64(n) => query.bind(*n),
        };
    }
    query
}

/// The registry's sample values for `binds`.
fn literals(binds: &[Bind]) -> Vec<String> {
    binds.iter().map(Bind::literal).collect()
}

/// The window's `*_by_time` buckets, as conditions on `bucket` (the tables' first key column),
/// then on `column` itself. Binds: first bucket, last bucket, from, to.
fn window_conditions(column: &str, window: Window, binds: &mut Vec<Bind>) -> Vec<String> {
    let bucket = crate::store::schema::BUCKET_NS;
    binds.extend([
        Bind::U64(window.from_ns / bucket),
        Bind::U64(window.to_ns.saturating_sub(1) / bucket),
        Bind::U64(window.from_ns),
        Bind::U64(window.to_ns),
    ]);
    vec!["bucket >= ?".into(), "bucket <= ?".into(), format!("{column} >= ?"), format!("{column} < ?")]
}

/// `column IN (?, …)` for `values` (none: no condition).
fn any_of(column: &str, values: impl IntoIterator<Item = Bind>, conditions: &mut Vec<String>, binds: &mut Vec<Bind>) {
    let before = binds.len();
    binds.extend(values);
    let n = binds.len() - before;
    if n > 0 {
        conditions.push(format!("{column} IN ({})", vec!["?"; n].join(", ")));
    }
}

/// `key=value` terms: an attribute or a resource attribute with that value. Binds: key, value,
/// key, value per term.
fn attribute_conditions(attributes: &[(String, String)], conditions: &mut Vec<String>, binds: &mut Vec<Bind>) {
    for (key, value) in attributes {
        conditions.push(
            "(arrayExists((k, v) -> k = ? AND v = ?, attr_keys, attr_values) \
             OR arrayExists((k, v) -> k = ? AND v = ?, resource_keys, resource_values))"
                .into(),
        );
        for _ in 0..2 {
            binds.push(Bind::Str(key.clone()));
            binds.push(Bind::Str(value.clone()));
        }
    }
}

/// Joins the fixed condition fragments of a dynamic statement.
fn and_all(conditions: &[&str]) -> String {
    if conditions.is_empty() {
        "1".to_string()
    } else {
        conditions.join(" AND ")
    }
}

/// Every statement of this module, with sample values, for the registry
/// (`store::statements::all`): the widest variant of each dynamic one, and the synthetic
/// data's statements for a tiny data set.
pub fn statements() -> Vec<Statement> {
    let mut all = Vec::new();
    all.extend(services::statements());
    all.extend(traces::statements());
    all.extend(stories::statements());
    all.extend(logs::statements());
    all.extend(templates::statements());
    all.extend(alerts::statements());
    all.extend(deliveries::statements());
    all.extend(pipeline::statements());
    let tiny = synthetic::SyntheticData {
        spans: 10,
        logs: 5,
        services: 2,
        templates_per_service: 2,
        alerts: 3,
        end_ns: 1_764_547_200_000_000_000,
        span_ns: 3_600_000_000_000,
    };
    all.extend(
        synthetic::statements(&tiny)
            .into_iter()
            .map(|(table, sql)| Statement::new(format!("query.synthetic_{table}"), sql)),
    );
    all.push(Statement::new("query.synthetic_trace_id", synthetic::trace_id_sql(1)));
    all.push(Statement::new(
        "query.synthetic_shape_stories",
        synthetic::shape_stories_sql(40, 3, tiny.end_ns, tiny.span_ns),
    ));
    all.push(Statement::new("query.synthetic_optimize", synthetic::optimize_sql("spans")));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_is_named_once_and_avoids_what_18_16_lacks() {
        let all = statements();
        let mut names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a statement name is used twice");
        for Statement { name, sql, .. } in &all {
            for forbidden in ["ILIKE", "JSONExtract", "DateTime64", " AS (SELECT", "Map("] {
                assert!(!sql.contains(forbidden), "{name} uses {forbidden}");
            }
            assert!(!sql.contains("OFFSET"), "{name} pages by OFFSET");
        }
    }
}
