//! How every client reaches a secured broker: TLS and SASL from `[kafka]`'s
//! `security_protocol` and the settings beside it (docs/security.md), given to librdkafka's
//! clients in one place ([`apply`], called by `bus::client_config`, so every consumer,
//! producer, admin and lag reader has them) and to the Kafka protocol spoken directly
//! (ingest's producer and the probe, `packed::conn`) as a [`Security`]: rustls with ring and
//! the same trust as the ClickHouse client (the public roots and the CA file), and rsasl's
//! PLAIN and SCRAM clients.

use std::sync::Arc;

use rdkafka::ClientConfig;

use crate::config::{KafkaConfig, SaslMechanism};

/// librdkafka's settings for `kafka`'s protocol. A protocol name that is none is passed on as
/// it is, so the client refuses to be created (the configuration check has said so already).
pub fn apply(config: &mut ClientConfig, kafka: &KafkaConfig) {
    let Ok(protocol) = kafka.protocol() else {
        config.set("security.protocol", &kafka.security_protocol);
        return;
    };
    config.set("security.protocol", protocol.name());
    if protocol.sasl() {
        config
            .set("sasl.mechanism", kafka.mechanism().map(SaslMechanism::name).unwrap_or(&kafka.sasl_mechanism))
            .set("sasl.username", &kafka.sasl_username)
            .set("sasl.password", &kafka.sasl_password);
    }
    if protocol.tls() {
        if !kafka.ssl_ca_file.is_empty() {
            config.set("ssl.ca.location", &kafka.ssl_ca_file);
        }
        if !kafka.ssl_certificate_file.is_empty() {
            config.set("ssl.certificate.location", &kafka.ssl_certificate_file);
        }
        if !kafka.ssl_key_file.is_empty() {
            config.set("ssl.key.location", &kafka.ssl_key_file);
        }
    }
}

/// The settings a connection of our own makes: TLS or not, SASL or not.
#[derive(Clone, Default)]
pub struct Security {
    pub tls: Option<tokio_rustls::TlsConnector>,
    pub sasl: Option<Arc<Credentials>>,
}

/// A user and password, and the mechanism that proves them.
pub struct Credentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl Security {
    /// The settings `kafka` asks for; the error is the configuration's own problem line.
    pub fn new(kafka: &KafkaConfig) -> Result<Security, String> {
        let protocol = kafka.protocol()?;
        let tls = protocol.tls().then(|| tokio_rustls::TlsConnector::from(Arc::new(tls_config(kafka))));
        let sasl = match protocol.sasl() {
            true => Some(Arc::new(Credentials {
                mechanism: kafka.mechanism()?,
                username: kafka.sasl_username.clone(),
                password: kafka.sasl_password.clone(),
            })),
            false => None,
        };
        Ok(Security { tls, sasl })
    }

    /// Plaintext without credentials: what a plain TCP connection already tells.
    pub fn is_plain(&self) -> bool {
        self.tls.is_none() && self.sasl.is_none()
    }
}

/// The TLS client setting: the public roots (webpki-roots, as for ClickHouse) and the
/// certificates of `ssl_ca_file`, and the client certificate when one is configured, all
/// read and checked when the configuration was loaded.
fn tls_config(kafka: &KafkaConfig) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // Checked at load time (`config::read_ca_file`), so none is refused here.
    let (_added, _refused) = roots.add_parsable_certificates(kafka.ssl_ca.iter().cloned());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots);
    let client = kafka.ssl_client.as_ref().and_then(|identity| {
        let chosen = builder.clone().with_client_auth_cert(identity.chain.clone(), identity.key.clone_key());
        // Checked at load time (`config::read_kafka_files`); a configuration built otherwise
        // (a test's) with a key that cannot sign goes without, and the broker's refusal says so.
        chosen.map_err(|e| tracing::warn!(error = %e, "the broker client certificate cannot be used")).ok()
    });
    client.unwrap_or_else(|| builder.with_no_client_auth())
}

/// The TLS name of a broker address (`host:port`, `[v6]:port`): what its certificate must name.
pub fn server_name(addr: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _port)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| format!("`{host}` is not a TLS name: {e}"))
}

/// What to do about a refusal, said once for every client that meets one.
pub const UNTRUSTED_ADVICE: &str = "set [kafka] ssl_ca_file (TAYGA_KAFKA_SSL_CA_FILE) to the CA that signed it";
pub const CLIENT_CERTIFICATE_ADVICE: &str =
    "set [kafka] ssl_certificate_file and ssl_key_file to a certificate the broker's CA signed, and its key";
pub const CREDENTIALS_ADVICE: &str =
    "check [kafka] sasl_username and sasl_password (TAYGA_KAFKA_SASL_USERNAME, TAYGA_KAFKA_SASL_PASSWORD)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SecurityProtocol;

    #[test]
    fn librdkafka_gets_the_protocol_and_only_what_it_uses() {
        let kafka = KafkaConfig {
            security_protocol: "SASL_SSL".into(),
            sasl_mechanism: "scram-sha-512".into(),
            sasl_username: "tayga".into(),
            sasl_password: "s3cret".into(),
            ssl_ca_file: "/etc/ca.pem".into(),
            ..Default::default()
        };
        let mut config = ClientConfig::new();
        apply(&mut config, &kafka);
        assert_eq!(config.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.get("sasl.password"), Some("s3cret"));
        assert_eq!(config.get("ssl.ca.location"), Some("/etc/ca.pem"));

        let plain = KafkaConfig { ssl_ca_file: "/etc/ca.pem".into(), ..Default::default() };
        let mut config = ClientConfig::new();
        apply(&mut config, &plain);
        assert_eq!(config.get("security.protocol"), Some(SecurityProtocol::Plaintext.name()));
        assert_eq!((config.get("sasl.mechanism"), config.get("ssl.ca.location")), (None, None));
    }

    #[test]
    fn a_broker_address_names_its_host() {
        assert_eq!(server_name("127.0.0.1:9093").unwrap().to_str(), "127.0.0.1");
        assert_eq!(server_name("[::1]:9093").unwrap().to_str(), "::1");
        assert_eq!(server_name("kafka-0.internal:9093").unwrap().to_str(), "kafka-0.internal");
    }
}
