//! The ClickHouse side of Tayga: a client set up for both 18.16 and current servers, the
//! schema and its migrations, retention, and every query the daemons and
//! commands run.
//!
//! This is the only module that talks SQL (ARCHITECTURE.md): the client is private to it,
//! every statement is a named function of one of its files, and every statement is listed
//! in [`statements::all`], which `tests/it/store.rs` runs on 18.16 and on current
//! ClickHouse. Tests read what they assert on through [`Store::query_for_tests`], which no
//! code under `src/` outside this module may call (`tests/it/tidy.rs` checks, with the SQL).

pub mod backlog;
mod conversions;
pub mod deliveries;
pub mod insert;
pub mod logminer;
pub mod migrate;
pub mod probe;
pub mod query;
pub mod read;
pub mod remine;
pub mod retention;
pub mod schema;
pub mod shapes;
pub mod silences;
pub mod statements;
pub mod stories;
mod tls;

use clickhouse::Client;

use crate::config::ClickHouseConfig;
pub use crate::model::rows::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("ClickHouse at {url} did not answer: {source}")]
    Unreachable { url: String, source: clickhouse::error::Error },
    /// The server turned our credentials down: retrying will not help, the operator must.
    #[error("ClickHouse at {url} refused the user `{user}`: {} (code {code})", refusal_reason(*.code))]
    Refused { url: String, user: String, code: u32 },
    /// The server's certificate is not signed by a CA this machine trusts: retrying will not
    /// help, the operator must name the CA.
    #[error("ClickHouse at {url} presented a certificate this machine does not trust ({why}): {UNTRUSTED_ADVICE}")]
    Untrusted { url: String, why: String },
    #[error("{what} failed: {source}")]
    Query { what: String, source: clickhouse::error::Error },
}

/// What to do about a certificate this machine does not trust (said by the store's error
/// and by the commands' `/ping` check alike).
pub const UNTRUSTED_ADVICE: &str = "set [clickhouse] ssl_ca_file (TAYGA_CLICKHOUSE_SSL_CA_FILE) to its CA";

/// Server error codes that refuse the credentials: 192 unknown user and 193 wrong password
/// (18.16), 516 authentication failed (current servers, which no longer say which).
const REFUSAL_CODES: [u32; 3] = [192, 193, 516];

fn refusal_reason(code: u32) -> &'static str {
    match code {
        192 => "no such user",
        193 => "wrong password",
        _ => "wrong user or password",
    }
}

/// The server's error code in a refusal's text (`Code: 193, e.displayText() = …` on 18.16,
/// `Code: 516. DB::Exception: …` on current servers), if it is one that refuses credentials.
fn refusal_code(source: &clickhouse::error::Error) -> Option<u32> {
    let clickhouse::error::Error::BadResponse(text) = source else { return None };
    let rest = text.trim_start().strip_prefix("Code: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|code| REFUSAL_CODES.contains(code))
}

impl StoreError {
    /// True when the server could not be reached at all (as opposed to refusing a query):
    /// callers pause and retry instead of failing the input.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } => true,
            StoreError::Refused { .. } | StoreError::Untrusted { .. } => false,
            StoreError::Query { source, .. } => {
                matches!(source, clickhouse::error::Error::Network(_))
            }
        }
    }

    /// True when only the operator can cure the failure (credentials refused, a certificate
    /// not trusted): a start-up fails at once rather than retrying.
    pub fn needs_the_operator(&self) -> bool {
        matches!(self, StoreError::Refused { .. } | StoreError::Untrusted { .. })
    }
}

/// A ClickHouse connection for one database.
#[derive(Clone)]
pub struct Store {
    client: Client,
    url: String,
    user: String,
    database: String,
    cluster: Option<schema::Cluster>,
}

impl Store {
    pub fn new(config: &ClickHouseConfig) -> Store {
        let client = Client::with_http_client(tls::http_client(config))
            .with_url(&config.url)
            .with_user(&config.user)
            .with_password(&config.password)
            // 18.16 has no RowBinaryWithNamesAndTypes; rows are checked by our own tests.
            .with_validation(false);
        let cluster = schema::Cluster::from_config(config);
        // On a cluster an INSERT is acknowledged only once every shard stored its rows (not
        // once queued on the receiving server), so offsets are committed after real storage.
        // A subquery over a Distributed table inside a query over another (`IN (SELECT …)`)
        // runs once, on the receiving server, and its result goes to every shard (`GLOBAL IN`):
        // right whatever the two tables' sharding keys.
        let client = match cluster {
            Some(_) => {
                client.with_setting("insert_distributed_sync", "1").with_setting("distributed_product_mode", "global")
            }
            None => client,
        };
        Store {
            client: client.with_database(&config.database),
            url: config.url.clone(),
            user: config.user.clone(),
            database: config.database.clone(),
            cluster,
        }
    }

    /// The cluster the tables are laid out on (`[clickhouse] cluster`), if any.
    pub fn cluster(&self) -> Option<&schema::Cluster> {
        self.cluster.as_ref()
    }

    /// The same store with a ClickHouse setting sent on every query (the API bounds each
    /// query with `max_execution_time`, so a slow scan fails instead of holding a request).
    pub fn with_setting(mut self, name: &str, value: &str) -> Store {
        self.client = self.client.with_setting(name, value);
        self
    }

    /// The client, bound to this store's database. Private to `store/`: code elsewhere calls
    /// the named functions of this module, so every statement is in the registry.
    pub(in crate::store) fn client(&self) -> &Client {
        &self.client
    }

    /// Any SQL, for tests and the examples' benchmarks to read what they check (`src/`
    /// outside `store/` never calls it). Not in the registry; `?` placeholders take `.bind()`.
    #[doc(hidden)]
    pub fn query_for_tests(&self, sql: &str) -> clickhouse::query::Query {
        self.client.query(sql)
    }

    /// `SELECT ?fields FROM <T's table> <rest>`, for tests, as [`Store::query_for_tests`].
    #[doc(hidden)]
    pub fn select_for_tests<T: TableRow>(&self, rest: &str) -> clickhouse::query::Query {
        self.select::<T>(rest)
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
        self.server_client().query(SERVER_VERSION_SQL).fetch_one::<String>().await.map_err(|source| {
            match self.query_error("reading the server version", source) {
                StoreError::Query { source, .. } => StoreError::Unreachable { url: self.url(), source },
                known => known,
            }
        })
    }

    /// Runs one statement that returns nothing.
    pub(in crate::store) async fn execute(&self, what: &str, sql: &str) -> Result<(), StoreError> {
        self.client.query(sql).execute().await.map_err(|source| self.query_error(what, source))
    }

    /// Inserts rows through the one insert path ([`insert`]): bounded in time, and split so
    /// that no INSERT covers more day partitions than current servers accept.
    pub async fn insert<T: TableRow>(&self, rows: &[T]) -> Result<(), StoreError> {
        insert::insert_rows(self, T::TABLE, rows.iter(), None).await
    }

    /// Inserts rows into `table`, a table with the columns of `T`'s own: for a row type
    /// stored in two tables (a delivery's firing and resolved rows, `store::deliveries`).
    pub async fn insert_into<T: TableRow>(&self, table: &str, rows: &[T]) -> Result<(), StoreError> {
        insert::insert_rows(self, table, rows.iter(), None).await
    }

    /// Reads rows of `T`'s table; `rest` follows `FROM table` (`FINAL`, `WHERE …`, `ORDER BY …`)
    /// and may hold `?` placeholders filled by `bind`.
    pub(in crate::store) fn select<T: TableRow>(&self, rest: &str) -> clickhouse::query::Query {
        self.client.query(&format!("SELECT ?fields FROM {} {rest}", T::TABLE))
    }

    /// The error of a statement, typed by what the operator must do about it.
    pub(in crate::store) fn query_error(&self, what: &str, source: clickhouse::error::Error) -> StoreError {
        if let Some(why) = tls::untrusted_certificate(&source) {
            StoreError::Untrusted { url: self.url(), why }
        } else if let Some(code) = refusal_code(&source) {
            StoreError::Refused { url: self.url(), user: self.user.clone(), code }
        } else if matches!(source, clickhouse::error::Error::Network(_)) {
            StoreError::Unreachable { url: self.url(), source }
        } else {
            StoreError::Query { what: what.to_string(), source }
        }
    }

    /// The server's URL as errors show it (credentials in it redacted).
    fn url(&self) -> String {
        crate::config::redact::url(&self.url)
    }

    /// Drops this store's database and everything in it. Tests use it to clean up.
    pub async fn drop_database(&self) -> Result<(), StoreError> {
        let sql = schema::drop_database_sql(&self.database, self.cluster());
        self.server_client()
            .query(&sql)
            .execute()
            .await
            .map_err(|source| self.query_error("dropping the database", source))
    }
}

/// The server's version. Sent with the server's default database, so it answers before ours
/// exists.
pub const SERVER_VERSION_SQL: &str = "SELECT version()";

pub use crate::time::now_ns;

#[cfg(test)]
mod tests {
    use super::*;

    /// 18.16 says which of the user and the password is wrong; current servers do not.
    #[test]
    fn a_refusal_is_recognised_by_its_code_on_old_and_current_servers() {
        let refusal = |text: &str| refusal_code(&clickhouse::error::Error::BadResponse(text.into()));
        assert_eq!(
            refusal(
                "Code: 193, e.displayText() = DB::Exception: Wrong password for user default, e.what() = DB::Exception"
            ),
            Some(193)
        );
        assert_eq!(
            refusal("Code: 516. DB::Exception: default: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)"),
            Some(516)
        );
        assert_eq!(refusal("Code: 60, e.displayText() = DB::Exception: Table t.x doesn't exist"), None);
        assert_eq!(refusal_reason(516), "wrong user or password");
    }
}
