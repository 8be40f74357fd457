//! `tayga serve <service>`.

use crate::cli::Service;
use crate::config::Loaded;

pub async fn run(_loaded: Loaded, service: Service) -> anyhow::Result<()> {
    anyhow::bail!("tayga serve {service:?}: this service is not in this build yet")
}
