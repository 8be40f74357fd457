//! The ClickHouse side of Tayga: a client set up for both 18.16 and current servers, the
//! schema and its migrations, the row structs, and retention.

pub mod logminer;
pub mod migrate;
pub mod read;
mod records;
pub mod remine;
pub mod retention;
pub mod rows;
pub mod schema;

use clickhouse::Client;

use crate::config::ClickHouseConfig;
pub use rows::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("ClickHouse at {url} did not answer: {source}")]
    Unreachable { url: String, source: clickhouse::error::Error },
    #[error("{what} failed: {source}")]
    Query { what: String, source: clickhouse::error::Error },
}

impl StoreError {
    /// True when the server could not be reached at all (as opposed to refusing a query):
    /// callers pause and retry instead of failing the input.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } => true,
            StoreError::Query { source, .. } => {
                matches!(source, clickhouse::error::Error::Network(_))
            }
        }
    }
}

/// A ClickHouse connection for one database.
#[derive(Clone)]
pub struct Store {
    client: Client,
    url: String,
    database: String,
}

impl Store {
    pub fn new(config: &ClickHouseConfig) -> Store {
        let client = Client::default()
            .with_url(&config.url)
            .with_user(&config.user)
            .with_password(&config.password)
            // 18.16 has no RowBinaryWithNamesAndTypes; rows are checked by our own tests.
            .with_validation(false);
        Store {
            client: client.with_database(&config.database),
            url: config.url.clone(),
            database: config.database.clone(),
        }
    }

    /// The client, bound to this store's database.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// A client bound to the server's default database, for creating or dropping ours.
    fn server_client(&self) -> Client {
        self.client.clone().with_database("default")
    }

    /// The server's version string, e.g. `18.16.1`.
    pub async fn server_version(&self) -> Result<String, StoreError> {
        self.server_client()
            .query("SELECT version()")
            .fetch_one::<String>()
            .await
            .map_err(|source| StoreError::Unreachable { url: self.url.clone(), source })
    }

    /// Runs one statement that returns nothing.
    pub async fn execute(&self, what: &str, sql: &str) -> Result<(), StoreError> {
        self.client.query(sql).execute().await.map_err(|source| self.query_error(what, source))
    }

    /// Inserts rows in one INSERT.
    pub async fn insert<T: TableRow>(&self, rows: &[T]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let what = || format!("inserting {} rows into {}", rows.len(), T::TABLE);
        let mut insert = self.client.insert::<T>(T::TABLE).await.map_err(|source| self.query_error(&what(), source))?;
        for row in rows {
            insert.write(row).await.map_err(|source| self.query_error(&what(), source))?;
        }
        insert.end().await.map_err(|source| self.query_error(&what(), source))
    }

    /// Reads rows of `T`'s table; `rest` follows `FROM table` (`FINAL`, `WHERE …`, `ORDER BY …`)
    /// and may hold `?` placeholders filled by `bind`.
    pub fn select<T: TableRow>(&self, rest: &str) -> clickhouse::query::Query {
        self.client.query(&format!("SELECT ?fields FROM {} {rest}", T::TABLE))
    }

    pub(crate) fn query_error(&self, what: &str, source: clickhouse::error::Error) -> StoreError {
        if matches!(source, clickhouse::error::Error::Network(_)) {
            StoreError::Unreachable { url: self.url.clone(), source }
        } else {
            StoreError::Query { what: what.to_string(), source }
        }
    }

    /// Drops this store's database and everything in it. Tests use it to clean up.
    pub async fn drop_database(&self) -> Result<(), StoreError> {
        let sql = format!("DROP DATABASE IF EXISTS {}", self.database);
        self.server_client()
            .query(&sql)
            .execute()
            .await
            .map_err(|source| self.query_error("dropping the database", source))
    }
}

/// Nanoseconds since the Unix epoch, the unit of every timestamp column.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}
