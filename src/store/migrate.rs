//! Applying the schema: creates the database, then every migration not yet recorded in
//! `schema_migrations`. Safe to run from several processes at once: every statement is
//! `IF NOT EXISTS`, and a version recorded twice is read once.

use serde::Serialize;

use super::schema::{create_database_sql, MIGRATIONS, MIGRATIONS_TABLE_DDL};
use super::statements::Statement;
use super::{now_ns, MigrationRow, Store, StoreError};

/// Does the database exist? Sent with the server's default database. Binds: database.
pub const DATABASE_EXISTS_SQL: &str = "SELECT count() FROM system.databases WHERE name = ?";
/// Versions recorded in `schema_migrations`, ascending.
pub const APPLIED_VERSIONS_SQL: &str = "SELECT DISTINCT version FROM schema_migrations ORDER BY version";

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
            .query(&create_database_sql(store.database()))
            .execute()
            .await
            .map_err(|source| store.query_error(&format!("creating database {}", store.database()), source))?;
    }
    store.execute("creating schema_migrations", MIGRATIONS_TABLE_DDL).await?;
    let done = applied_versions(store).await?;

    let mut applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|m| !done.contains(&m.version)) {
        for (i, statement) in migration.statements.iter().enumerate() {
            let what = format!("migration {} ({}), statement {}", migration.version, migration.name, i + 1);
            store.execute(&what, statement).await?;
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

/// Every statement `migrate` may run, in order, for `--print` and the portability test.
pub fn all_statements() -> Vec<&'static str> {
    std::iter::once(MIGRATIONS_TABLE_DDL).chain(MIGRATIONS.iter().flat_map(|m| m.statements.iter().copied())).collect()
}

/// The reads of this module not in [`all_statements`], for the registry.
pub fn statements() -> Vec<Statement> {
    vec![Statement::new("migrate.applied_versions", APPLIED_VERSIONS_SQL)]
}
