//! `tayga deliveries show --alert-id ID`.

use std::io::Write;

use crate::cli::DeliveriesCommand;
use crate::config::Config;

pub async fn run(_config: &Config, _sub: &DeliveriesCommand, _json: bool, _out: &mut dyn Write) -> anyhow::Result<()> {
    anyhow::bail!("tayga deliveries: not in this build yet")
}
