//! The registry: every statement Tayga sends to ClickHouse, named, with sample values for its
//! placeholders, in an order that runs on an empty database (the database and the schema
//! first, then a row of every table, the reads, the mutations, and the database's drop).
//!
//! `tests/it/store.rs` runs the whole list on ClickHouse 18.16 and in chdb-core (current
//! ClickHouse); a statement only current servers have (the token path) is marked
//! [`Statement::current_only`] and runs in chdb alone. A statement added to a `store/` file
//! is added to that file's `statements()`, which [`all`] gathers (`tests/it/tidy.rs` fails
//! on a statement constant or builder of `store/` that no `statements()` uses).

use serde::Serialize;

use super::{
    backlog, deliveries, insert, logminer, migrate, query, read, remine, retention, schema, shapes, silences, stories,
    AlertPublicationRow, AlertRow, BacklogRow, DeliveryRow, HitRow, LogRow, MetricSampleRow, MigrationRow, SilenceRow,
    SpanRow, StateRow, StoryRow, TableRow, TemplateMergeRow, TemplateRow, SERVER_VERSION_SQL,
};

/// One statement as the client is given it: `?` for each bound value, `?fields` for the row
/// struct's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// `<file>.<what>`, unique in the registry.
    pub name: String,
    pub sql: String,
    /// The columns `?fields` stands for (the row struct's), empty when it has none.
    pub fields: &'static [&'static str],
    /// Sample values for the `?`s, in order, as SQL literals.
    pub binds: Vec<String>,
    /// Only current servers run it (18.16 lacks what it uses).
    pub current_only: bool,
    /// Sent with the server's default database, as the statements that create, find or
    /// drop ours are.
    pub server_level: bool,
    /// Only a cluster runs it (it names the cluster: `cluster(…, system.parts)`).
    pub cluster_only: bool,
}

impl Statement {
    pub fn new(name: impl Into<String>, sql: impl Into<String>) -> Statement {
        Statement {
            name: name.into(),
            sql: sql.into(),
            fields: &[],
            binds: Vec::new(),
            current_only: false,
            server_level: false,
            cluster_only: false,
        }
    }

    /// `SELECT ?fields FROM <T's table> <rest>`, as `Store::select` builds it.
    pub fn select<T: TableRow>(name: impl Into<String>, rest: &str) -> Statement {
        Statement {
            fields: T::COLUMN_NAMES,
            ..Statement::new(name, format!("SELECT ?fields FROM {} {rest}", T::TABLE))
        }
    }

    /// The insert of `rows` as `store::insert` sends it (`INSERT INTO t(columns)`, the
    /// token as a setting), with the rows in JSONEachRow where the client streams RowBinary:
    /// the same statement, with data that can be written as text. Current servers only when
    /// a token is given.
    pub fn insert<T: TableRow + Serialize>(
        name: impl Into<String>,
        rows: &[T],
        dedup_token: Option<&str>,
    ) -> Statement {
        Statement::insert_into(name, T::TABLE, rows, dedup_token)
    }

    /// An INSERT of `rows` into `table`, a table with `T`'s columns ([`super::Store::insert_into`]).
    pub fn insert_into<T: TableRow + Serialize>(
        name: impl Into<String>,
        table: &str,
        rows: &[T],
        dedup_token: Option<&str>,
    ) -> Statement {
        let columns = T::COLUMN_NAMES.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(",");
        let settings = dedup_token.map(|t| format!(" SETTINGS insert_deduplication_token = '{t}'")).unwrap_or_default();
        let json: Vec<String> = rows.iter().map(|r| column_values::of(r).to_string()).collect();
        Statement {
            current_only: dedup_token.is_some(),
            ..Statement::new(
                name,
                format!("INSERT INTO {table}({columns}){settings} FORMAT JSONEachRow {}", json.join("\n")),
            )
        }
    }

    pub fn binds<S: Into<String>>(mut self, binds: impl IntoIterator<Item = S>) -> Statement {
        self.binds = binds.into_iter().map(Into::into).collect();
        self
    }

    pub fn current_only(mut self) -> Statement {
        self.current_only = true;
        self
    }

    pub fn cluster_only(mut self) -> Statement {
        self.cluster_only = true;
        self
    }

    pub fn server_level(mut self) -> Statement {
        self.server_level = true;
        self
    }

    /// The SQL with `?fields` and every `?` filled, as the client fills them.
    ///
    /// # Panics
    /// When the statement has more or fewer `?`s than sample values.
    pub fn bound(&self) -> String {
        let fields = self.fields.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(",");
        let mut binds = self.binds.iter();
        let mut out = String::with_capacity(self.sql.len());
        let mut rest = self.sql.as_str();
        while let Some(at) = rest.find('?') {
            out.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            if let Some(after) = rest.strip_prefix("fields") {
                assert!(!self.fields.is_empty(), "{}: ?fields without a row struct", self.name);
                out.push_str(&fields);
                rest = after;
            } else {
                out.push_str(binds.next().unwrap_or_else(|| panic!("{}: more ? than sample values", self.name)));
            }
        }
        out.push_str(rest);
        assert!(binds.next().is_none(), "{}: more sample values than ?", self.name);
        out
    }
}

/// Every statement, in running order, for a database named `database` on one server.
pub fn all(database: &str) -> Vec<Statement> {
    all_on(database, None)
}

/// Every statement, in running order, as it is sent for `database` on one server or on
/// `cluster`: the schema in its cluster form, mutations and partition drops on the local
/// tables ([`schema::mutation_sql`]), the rest unchanged (they name the Distributed tables).
/// The statements only a cluster runs are left out on one server.
pub fn all_on(database: &str, cluster: Option<&schema::Cluster>) -> Vec<Statement> {
    let mut all = single_server(database);
    match cluster {
        None => all.retain(|s| !s.cluster_only),
        Some(c) => {
            let ddl: Vec<Statement> = migrate::all_statements(cluster)
                .into_iter()
                .enumerate()
                .map(|(i, sql)| Statement::new(format!("schema.ddl_{i}"), sql))
                .collect();
            let mut ddl = Some(ddl);
            let mut out = Vec::with_capacity(all.len() + 16);
            for mut s in all.drain(..) {
                if s.name.starts_with("schema.ddl_") {
                    // Replaced as a whole by the cluster's DDL, where the first one stood.
                    out.extend(ddl.take().into_iter().flatten());
                    continue;
                }
                if s.name.starts_with("schema.token_window_") {
                    // Replicated tables have their window from creation (`token_window_statements`).
                    continue;
                }
                if s.name == "query.synthetic_optimize" {
                    // The synthetic data fills one server (the read-cost test and
                    // examples/api_bench.rs); a Distributed table has no parts to merge.
                    continue;
                }
                s.sql = match s.name.as_str() {
                    "schema.create_database" => schema::create_database_sql(database, cluster),
                    "store.drop_database" => schema::drop_database_sql(database, cluster),
                    _ => schema::mutation_sql(&s.sql, cluster).into_owned(),
                };
                if s.cluster_only {
                    s.binds.iter_mut().filter(|b| *b == "'tayga'").for_each(|b| *b = format!("'{}'", c.name));
                }
                out.push(s);
            }
            all = out;
        }
    }
    all
}

fn single_server(database: &str) -> Vec<Statement> {
    let mut all = vec![
        Statement::new("store.server_version", SERVER_VERSION_SQL).server_level(),
        Statement::new("migrate.database_exists", migrate::DATABASE_EXISTS_SQL)
            .binds([format!("'{database}'")])
            .server_level(),
        Statement::new("schema.create_database", schema::create_database_sql(database, None)).server_level(),
    ];
    all.extend(
        migrate::all_statements(None)
            .into_iter()
            .enumerate()
            .map(|(i, sql)| Statement::new(format!("schema.ddl_{i}"), sql)),
    );
    all.extend(
        schema::token_window_statements(None)
            .into_iter()
            .enumerate()
            .map(|(i, sql)| Statement::new(format!("schema.token_window_{i}"), sql).current_only()),
    );
    all.push(Statement::new("insert.token_support", insert::TOKEN_SUPPORT_SQL));
    all.extend(sample_inserts());
    all.extend(migrate::statements(database));
    all.extend(read::statements());
    all.extend(logminer::statements());
    all.extend(remine::statements());
    all.extend(deliveries::statements());
    all.extend(silences::statements());
    all.extend(stories::statements());
    all.extend(shapes::statements());
    all.extend(backlog::statements());
    all.extend(query::statements());
    all.extend(retention::statements(database));
    all.push(Statement::new("store.drop_database", schema::drop_database_sql(database, None)).server_level());
    all
}

/// A row into every table, and the writer's per-record inserts with a token.
fn sample_inserts() -> Vec<Statement> {
    // Every table: a new one needs a line here (the unit test below counts them).
    let mut inserts = vec![
        Statement::insert("insert.schema_migrations", &[MigrationRow::default()], None),
        Statement::insert("insert.spans", &[SpanRow::default()], None),
        Statement::insert("insert.logs", &[LogRow::default()], None),
        Statement::insert("insert.log_templates", &[TemplateRow::default()], None),
        Statement::insert("insert.log_template_merges", &[TemplateMergeRow::default()], None),
        Statement::insert("insert.log_hits", &[HitRow::default()], None),
        Statement::insert("insert.stories", &[StoryRow::default()], None),
        Statement::insert("insert.log_alerts", &[AlertRow::default()], None),
        Statement::insert("insert.log_alert_publications", &[AlertPublicationRow::default()], None),
        Statement::insert("insert.logminer_state", &[StateRow::default()], None),
        Statement::insert("insert.notifier_deliveries", &[DeliveryRow::default()], None),
        Statement::insert_into(
            "insert.notifier_resolved_deliveries",
            super::deliveries::table(crate::wire::alert::AlertState::Resolved),
            &[DeliveryRow::default()],
            None,
        ),
        Statement::insert("insert.notifier_silences", &[SilenceRow::default()], None),
        Statement::insert("insert.pipeline_metrics", &[MetricSampleRow::default()], None),
        Statement::insert("insert.ingest_backlog", &[BacklogRow::default()], None),
        // Filled from `logs` by a materialized view; written directly only here.
        Statement::new(
            "insert.trace_logs",
            format!(
                "INSERT INTO trace_logs({columns}) SELECT {columns} FROM logs WHERE trace_id != ''",
                columns = <LogRow as clickhouse::Row>::COLUMN_NAMES.join(", ")
            ),
        ),
        Statement::insert("insert.spans_with_token", &[SpanRow::default()], Some("tayga.signals-0-1")),
        Statement::insert("insert.logs_with_token", &[LogRow::default()], Some("tayga.signals-0-2")),
    ];
    // The tables the views of migrations 9 and 11 fill: written directly only by their
    // backfills.
    let backfills = schema::MIGRATIONS.iter().flat_map(|m| m.statements.iter()).filter(|s| {
        s.strip_prefix("INSERT INTO ").is_some_and(|rest| {
            rest.starts_with("spans_by_time(")
                || rest.starts_with("logs_by_time(")
                || rest.starts_with("log_hits_by_time(")
                || rest.starts_with("service_minutes(")
                || rest.starts_with("shape_minutes(")
        })
    });
    inserts.extend(backfills.enumerate().map(|(i, sql)| Statement::new(format!("insert.backfill_{i}"), *sql)));
    inserts
}

/// A row as JSONEachRow writes it for its table: the serde form RowBinary gets (the
/// serializer says it is not human-readable), written as JSON. `serde_json` itself is
/// human-readable, so a row whose JSON form is also the API's (`model::hex_id`) would give
/// its ids as hex text, which a UInt64 column does not read. A row is a struct of numbers,
/// flags, text, bytes and arrays; anything else is refused.
mod column_values {
    use serde::ser::{self, Impossible, Serialize};
    use serde_json::{Error, Map, Value};

    pub fn of<T: Serialize>(row: &T) -> Value {
        row.serialize(Columns).expect("a row serializes")
    }

    struct Columns;

    /// An array's elements, or a struct's fields.
    #[derive(Default)]
    pub struct Compound {
        items: Vec<Value>,
        fields: Map<String, Value>,
    }

    type Refused = Impossible<Value, Error>;

    fn refused<T>(what: &str) -> Result<T, Error> {
        Err(ser::Error::custom(format!("a table row has no {what}")))
    }

    macro_rules! into_value {
        ($($method:ident: $t:ty),*) => {
            $(fn $method(self, v: $t) -> Result<Value, Error> {
                Ok(v.into())
            })*
        };
    }

    impl ser::Serializer for Columns {
        type Ok = Value;
        type Error = Error;
        type SerializeSeq = Compound;
        type SerializeTuple = Refused;
        type SerializeTupleStruct = Refused;
        type SerializeTupleVariant = Refused;
        type SerializeMap = Refused;
        type SerializeStruct = Compound;
        type SerializeStructVariant = Refused;

        fn is_human_readable(&self) -> bool {
            false
        }
        into_value!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
            serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64, serialize_f32: f32,
            serialize_f64: f64, serialize_str: &str, serialize_bytes: &[u8]);
        fn serialize_char(self, v: char) -> Result<Value, Error> {
            Ok(v.to_string().into())
        }
        fn serialize_none(self) -> Result<Value, Error> {
            Ok(Value::Null)
        }
        fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<Value, Error> {
            v.serialize(self)
        }
        fn serialize_unit(self) -> Result<Value, Error> {
            Ok(Value::Null)
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<Value, Error> {
            Ok(Value::Null)
        }
        fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<Value, Error> {
            Ok(variant.into())
        }
        fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, v: &T) -> Result<Value, Error> {
            v.serialize(self)
        }
        fn serialize_newtype_variant<T: ?Sized + Serialize>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Value, Error> {
            refused("enum with data")
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Compound, Error> {
            Ok(Compound::default())
        }
        fn serialize_tuple(self, _: usize) -> Result<Refused, Error> {
            refused("tuple")
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Refused, Error> {
            refused("tuple")
        }
        fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Refused, Error> {
            refused("enum with data")
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Refused, Error> {
            refused("map")
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound, Error> {
            Ok(Compound::default())
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Refused, Error> {
            refused("enum with data")
        }
    }

    impl ser::SerializeSeq for Compound {
        type Ok = Value;
        type Error = Error;
        fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
            self.items.push(v.serialize(Columns)?);
            Ok(())
        }
        fn end(self) -> Result<Value, Error> {
            Ok(Value::Array(self.items))
        }
    }

    impl ser::SerializeStruct for Compound {
        type Ok = Value;
        type Error = Error;
        fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, v: &T) -> Result<(), Error> {
            self.fields.insert(key.to_string(), v.serialize(Columns)?);
            Ok(())
        }
        fn end(self) -> Result<Value, Error> {
            Ok(Value::Object(self.fields))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_are_unique_and_every_placeholder_has_a_sample_value() {
        let all = all("tayga_check");
        let mut names = HashSet::new();
        for s in &all {
            assert!(names.insert(s.name.as_str()), "{} is registered twice", s.name);
            assert!(!s.bound().contains('?'), "{}: {}", s.name, s.bound());
        }
        assert_eq!(all.first().map(|s| s.name.as_str()), Some("store.server_version"));
        assert_eq!(all.last().map(|s| s.name.as_str()), Some("store.drop_database"));
    }

    /// An insert gives a row's columns as the table reads them: ids as numbers (their JSON
    /// form for the API is hex), bytes as an array of numbers.
    #[test]
    fn an_insert_writes_ids_as_numbers() {
        let delivery = DeliveryRow { alert_id: 0xb, silence_id: 0, ..Default::default() };
        let json = column_values::of(&delivery);
        assert_eq!((&json["alert_id"], &json["silence_id"]), (&11.into(), &0.into()));
        let story = column_values::of(&StoryRow { fingerprint: 0xff, error: true, ..Default::default() });
        assert_eq!((&story["fingerprint"], &story["error"]), (&255.into(), &true.into()));
        let backlog = column_values::of(&BacklogRow { value: vec![1, 2], ..Default::default() });
        assert_eq!(backlog["value"], serde_json::json!([1, 2]));
        let sql = Statement::insert("d", &[delivery], None).sql;
        assert!(sql.contains(r#""alert_id":11,"#), "{sql}");
    }

    #[test]
    fn every_table_gets_a_sample_row() {
        let inserted: HashSet<String> = sample_inserts()
            .iter()
            .filter_map(|s| s.sql.strip_prefix("INSERT INTO ")?.split('(').next().map(String::from))
            .collect();
        let mut tables: HashSet<String> = schema::table_names().into_iter().collect();
        tables.insert("schema_migrations".into());
        assert_eq!(inserted, tables);
    }

    #[test]
    fn only_the_token_path_is_current_only() {
        let current: Vec<String> = all("d").into_iter().filter(|s| s.current_only).map(|s| s.name).collect();
        assert_eq!(
            current,
            ["schema.token_window_0", "schema.token_window_1", "insert.spans_with_token", "insert.logs_with_token"]
        );
    }

    #[test]
    fn binding_fills_fields_and_values_in_order() {
        let s = Statement::select::<StateRow>("t.x", "WHERE key = ? AND updated_ns > ?").binds(["'k'", "7"]);
        assert_eq!(
            s.bound(),
            "SELECT `key`,`value`,`updated_ns` FROM logminer_state WHERE key = 'k' AND updated_ns > 7"
        );
    }

    #[test]
    #[should_panic(expected = "more ? than sample values")]
    fn a_missing_sample_value_is_caught() {
        Statement::new("t.y", "SELECT ?").bound();
    }
}
