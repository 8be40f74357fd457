//! `tayga migrate`: create or upgrade the ClickHouse schema.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;

use crate::cli::MigrateArgs;
use crate::config::Config;
use crate::store::{migrate, Store};

pub async fn run(
    config: &Config,
    args: &MigrateArgs,
    timeout: Duration,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if args.print {
        let cluster = crate::store::schema::Cluster::from_config(&config.clickhouse);
        let statements = migrate::all_statements(cluster.as_ref());
        if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&statements)?)?;
            return Ok(());
        }
        for statement in statements {
            writeln!(out, "{statement};\n")?;
        }
        return Ok(());
    }
    let what = || {
        format!(
            "migrating database `{}` at {}",
            config.clickhouse.database,
            crate::config::redact::url(&config.clickhouse.url)
        )
    };
    super::reach::clickhouse(&config.clickhouse, timeout).await.with_context(what)?;
    let store = Store::new(&config.clickhouse);
    let report = migrate::migrate(&store).await.with_context(what)?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    if report.database_created {
        writeln!(out, "created database {}", report.database)?;
    }
    for (version, name) in &report.applied {
        writeln!(out, "applied migration {version}: {name}")?;
    }
    if report.applied.is_empty() {
        writeln!(
            out,
            "schema of {} is up to date (version {}, ClickHouse {})",
            report.database, report.version, report.server_version
        )?;
    } else {
        writeln!(
            out,
            "schema of {} is now at version {} (ClickHouse {})",
            report.database, report.version, report.server_version
        )?;
    }
    Ok(())
}
