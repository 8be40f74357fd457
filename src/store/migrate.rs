//! Applying the schema: creates the database, then every migration not yet recorded in
//! `schema_migrations`. Safe to run from several processes at once: every statement is
//! `IF NOT EXISTS`, and a version recorded twice is read once.
//!
//! On a cluster (`[clickhouse] cluster`) every statement is the cluster form generated from
//! the same one ([`schema::ddl_statements`]): `ON CLUSTER`, so each waits until every server
//! ran it, and `schema_migrations` is itself a replicated table behind a Distributed one, so
//! whichever server a process talks to knows what was applied.

use serde::Serialize;

use super::schema::{self, create_database_sql, Cluster, MIGRATIONS, MIGRATIONS_TABLE_DDL};
use super::statements::Statement;
use super::{now_ns, MigrationRow, Store, StoreError};

/// Does the database exist? Sent with the server's default database. Binds: database.
pub const DATABASE_EXISTS_SQL: &str = "SELECT count() FROM system.databases WHERE name = ?";
/// Versions recorded in `schema_migrations`, ascending.
pub const APPLIED_VERSIONS_SQL: &str = "SELECT DISTINCT version FROM schema_migrations ORDER BY version";
/// Does `schema_migrations` exist? Binds: database. Asked first, so a migrated schema needs no
/// DDL at all: on a cluster an `ON CLUSTER` statement waits for every server, and a writer
/// re-checking its schema while one server is down would hang on it.
pub const MIGRATIONS_TABLE_EXISTS_SQL: &str =
    "SELECT count() FROM system.tables WHERE database = ? AND name = 'schema_migrations'";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MigrationReport {
    pub server_version: String,
    pub database: String,
    pub database_created: bool,
    /// Migrations applied by this run, as (version, name).
    pub applied: Vec<(u32, String)>,
    /// The schema version after this run.
    pub version: u32,
}

pub async fn migrate(store: &Store) -> Result<MigrationReport, StoreError> {
    let server_version = store.server_version().await?;
    let server = store.server_client();
    let exists: u64 = server
        .query(DATABASE_EXISTS_SQL)
        .bind(store.database())
        .fetch_one()
        .await
        .map_err(|source| store.query_error("looking up the database", source))?;
    if exists == 0 {
        server
            .query(&create_database_sql(store.database(), store.cluster()))
            .execute()
            .await
            .map_err(|source| store.query_error(&format!("creating database {}", store.database()), source))?;
    }
    let table_exists: u64 = store
        .client()
        .query(MIGRATIONS_TABLE_EXISTS_SQL)
        .bind(store.database())
        .fetch_one()
        .await
        .map_err(|source| store.query_error("looking up schema_migrations", source))?;
    if table_exists == 0 {
        for sql in schema::ddl_statements(MIGRATIONS_TABLE_DDL, store.cluster()) {
            store.execute("creating schema_migrations", &sql).await?;
        }
    }
    let done = applied_versions(store).await?;

    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| !done.contains(&m.version)) {
        for (i, statement) in migration.statements.iter().enumerate() {
            let what = format!("migration {} ({}), statement {}", migration.version, migration.name, i + 1);
            for sql in schema::ddl_statements(statement, store.cluster()) {
                store.execute(&what, &sql).await?;
            }
        }
        store
            .insert(&[MigrationRow {
                version: migration.version,
                name: migration.name.to_string(),
                applied_ns: now_ns(),
            }])
            .await?;
        applied.push((migration.version, migration.name.to_string()));
    }
    let version = MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0);
    Ok(MigrationReport {
        server_version,
        database: store.database().to_string(),
        database_created: exists == 0,
        applied,
        version,
    })
}

/// Versions recorded in `schema_migrations`, ascending.
pub async fn applied_versions(store: &Store) -> Result<Vec<u32>, StoreError> {
    store
        .client()
        .query(APPLIED_VERSIONS_SQL)
        .fetch_all::<u32>()
        .await
        .map_err(|source| store.query_error("reading schema_migrations", source))
}

/// Every statement `migrate` may run, in order, for `--print` and the portability test: as
/// written for one server, or their cluster form.
pub fn all_statements(cluster: Option<&Cluster>) -> Vec<String> {
    std::iter::once(MIGRATIONS_TABLE_DDL)
        .chain(MIGRATIONS.iter().flat_map(|m| m.statements.iter().copied()))
        .flat_map(|sql| schema::ddl_statements(sql, cluster))
        .collect()
}

/// The reads of this module not in [`all_statements`], for the registry.
pub fn statements(database: &str) -> Vec<Statement> {
    vec![
        Statement::new("migrate.migrations_table_exists", MIGRATIONS_TABLE_EXISTS_SQL).binds([format!("'{database}'")]),
        Statement::new("migrate.applied_versions", APPLIED_VERSIONS_SQL),
    ]
}
