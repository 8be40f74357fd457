//! One connection to one broker: the Kafka framing (a length, a header, a body), one request
//! at a time, and the API versions both sides speak, agreed once when it opens; over TLS and
//! authenticated with SASL (SaslHandshake, then SaslAuthenticate carrying rsasl's messages)
//! when `[kafka]` asks for them (`bus::security`).

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bus::security::{Credentials, Security, CLIENT_CERTIFICATE_ADVICE, CREDENTIALS_ADVICE, UNTRUSTED_ADVICE};

/// How long opening a connection may take (as `socket.connection.setup.timeout.ms`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes an answer may hold: a produce answer for every partition is a few KiB, a
/// metadata answer for two topics less; anything near this is not a Kafka broker talking.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("{addr} did not accept the connection within {CONNECT_TIMEOUT:?}")]
    ConnectTimeout { addr: String },
    #[error("the connection to {addr} failed: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("{addr} sent an answer that is not Kafka's: {reason}")]
    Protocol { addr: String, reason: String },
    #[error("{addr} speaks no version of {api:?} between {min} and {max}")]
    Unsupported { addr: String, api: ApiKey, min: i16, max: i16 },
    #[error("the broker at {addr} presented a certificate this machine does not trust ({why}): {UNTRUSTED_ADVICE}")]
    Untrusted { addr: String, why: String },
    #[error("the broker at {addr} does not speak TLS (a plaintext listener? its security_protocol is then plaintext or sasl_plaintext)")]
    NotTls { addr: String },
    #[error("the broker at {addr} refused this client's certificate ({why}): {CLIENT_CERTIFICATE_ADVICE}")]
    ClientCertificate { addr: String, why: String },
    #[error("the TLS handshake with the broker at {addr} failed: {why}")]
    Tls { addr: String, why: String },
    #[error("the broker at {addr} refused the user `{user}` ({mechanism}: {why}): {CREDENTIALS_ADVICE}")]
    Refused { addr: String, user: String, mechanism: &'static str, why: String },
    #[error("the broker at {addr} does not accept SASL {mechanism} (it offers {offered}): set [kafka] sasl_mechanism to one it offers")]
    Mechanism { addr: String, mechanism: &'static str, offered: String },
}

impl ConnError {
    /// A failure only the operator can cure (the credentials, the certificate, the
    /// mechanism, TLS where there is none): retrying changes nothing until the configuration
    /// or the broker does.
    pub fn needs_the_operator(&self) -> bool {
        matches!(
            self,
            ConnError::Untrusted { .. }
                | ConnError::NotTls { .. }
                | ConnError::ClientCertificate { .. }
                | ConnError::Refused { .. }
                | ConnError::Mechanism { .. }
        )
    }
}

/// A connection's bytes: a TCP stream, or TLS over one.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// The versions this producer uses: record batches (v2) need Produce ≥ 3; above the maxima
/// the requests name topics by id, which this producer does not track.
const PRODUCE: (i16, i16) = (3, 12);
// Below 4 a metadata request cannot say "do not create the topic".
const METADATA: (i16, i16) = (4, 12);
const INIT_PRODUCER_ID: (i16, i16) = (0, 4);
// SaslHandshake v1 puts the SASL messages in SaslAuthenticate requests (v0 sent them bare).
const SASL_HANDSHAKE: (i16, i16) = (1, 1);
const SASL_AUTHENTICATE: (i16, i16) = (0, 2);

/// The version of each API this connection uses.
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    pub produce: i16,
    pub metadata: i16,
    pub init_producer_id: i16,
}

pub struct Conn {
    addr: String,
    stream: Box<dyn Stream>,
    next_correlation: i32,
    pub versions: Versions,
    buf: BytesMut,
}

impl Conn {
    /// Connects (with TLS when `security` says), agrees on versions (ApiVersions v0, which
    /// every broker answers, before authentication too) and authenticates when `security`
    /// holds credentials.
    pub async fn open(addr: &str, security: &Security) -> Result<Conn, ConnError> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| ConnError::ConnectTimeout { addr: addr.to_string() })?
            .map_err(|source| ConnError::Connect { addr: addr.to_string(), source })?;
        tcp.set_nodelay(true).map_err(|source| ConnError::Io { addr: addr.to_string(), source })?;
        let stream: Box<dyn Stream> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(handshake(tls, addr, tcp).await?),
        };
        let versions = Versions { produce: 0, metadata: 0, init_producer_id: 0 };
        let mut conn = Conn { addr: addr.to_string(), stream, next_correlation: 0, versions, buf: BytesMut::new() };
        let answer: ApiVersionsResponse =
            conn.call(ApiKey::ApiVersions, &ApiVersionsRequest::default(), 0, CONNECT_TIMEOUT).await?;
        if let Some(error) = ResponseError::try_from_code(answer.error_code) {
            return Err(conn.protocol(format!("ApiVersions answered {error}")));
        }
        let pick = |api: ApiKey, (min, max): (i16, i16)| {
            answer
                .api_keys
                .iter()
                .find(|k| k.api_key == api as i16)
                .map(|k| k.max_version.min(max))
                .filter(|&v| v >= min)
                .ok_or(ConnError::Unsupported { addr: addr.to_string(), api, min, max })
        };
        conn.versions = Versions {
            produce: pick(ApiKey::Produce, PRODUCE)?,
            metadata: pick(ApiKey::Metadata, METADATA)?,
            init_producer_id: pick(ApiKey::InitProducerId, INIT_PRODUCER_ID)?,
        };
        if let Some(credentials) = &security.sasl {
            let versions =
                (pick(ApiKey::SaslHandshake, SASL_HANDSHAKE)?, pick(ApiKey::SaslAuthenticate, SASL_AUTHENTICATE)?);
            conn.authenticate(credentials, versions).await?;
        }
        Ok(conn)
    }

    /// The SASL exchange: the mechanism agreed by SaslHandshake, then each message of rsasl's
    /// client in a SaslAuthenticate request until the mechanism is done (SCRAM checks the
    /// broker's proof in the last answer: a broker that does not know the password fails).
    async fn authenticate(
        &mut self,
        credentials: &Credentials,
        (handshake, authenticate): (i16, i16),
    ) -> Result<(), ConnError> {
        use rsasl::prelude::{Mechname, MessageSent, SASLClient, SASLConfig, State};
        let mechanism = credentials.mechanism.name();
        let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let answer: SaslHandshakeResponse =
            self.call(ApiKey::SaslHandshake, &request, handshake, CONNECT_TIMEOUT).await?;
        match ResponseError::try_from_code(answer.error_code) {
            None => {}
            Some(ResponseError::UnsupportedSaslMechanism) => {
                let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
                let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
                return Err(ConnError::Mechanism { addr: self.addr.clone(), mechanism, offered });
            }
            Some(error) => return Err(self.refused(credentials, format!("SaslHandshake answered {error}"))),
        }
        let config = SASLConfig::with_credentials(None, credentials.username.clone(), credentials.password.clone())
            .map_err(|e| self.refused(credentials, e.to_string()))?;
        let name = Mechname::parse(mechanism.as_bytes()).expect("the mechanisms' names are SASL names");
        let mut session =
            SASLClient::new(config).start_suggested(&[name]).map_err(|e| self.refused(credentials, e.to_string()))?;
        let mut input: Option<bytes::Bytes> = None;
        loop {
            let mut message = Vec::new();
            let state =
                session.step(input.as_deref(), &mut message).map_err(|e| self.refused(credentials, e.to_string()))?;
            if state == State::Finished(MessageSent::No) {
                return Ok(());
            }
            let request = SaslAuthenticateRequest::default().with_auth_bytes(message.into());
            let answer: SaslAuthenticateResponse =
                self.call(ApiKey::SaslAuthenticate, &request, authenticate, CONNECT_TIMEOUT).await?;
            if let Some(error) = ResponseError::try_from_code(answer.error_code) {
                let why = answer.error_message.map_or_else(|| error.to_string(), |m| m.to_string());
                return Err(self.refused(credentials, why));
            }
            if state.is_finished() {
                return Ok(());
            }
            input = Some(answer.auth_bytes);
        }
    }

    fn refused(&self, credentials: &Credentials, why: String) -> ConnError {
        ConnError::Refused {
            addr: self.addr.clone(),
            user: credentials.username.clone(),
            mechanism: credentials.mechanism.name(),
            why,
        }
    }

    pub async fn produce(&mut self, request: &ProduceRequest, timeout: Duration) -> Result<ProduceResponse, ConnError> {
        self.call(ApiKey::Produce, request, self.versions.produce, timeout).await
    }

    pub async fn metadata(
        &mut self,
        request: &MetadataRequest,
        timeout: Duration,
    ) -> Result<MetadataResponse, ConnError> {
        self.call(ApiKey::Metadata, request, self.versions.metadata, timeout).await
    }

    pub async fn init_producer_id(
        &mut self,
        request: &InitProducerIdRequest,
        timeout: Duration,
    ) -> Result<InitProducerIdResponse, ConnError> {
        self.call(ApiKey::InitProducerId, request, self.versions.init_producer_id, timeout).await
    }

    /// Sends `request` and reads its answer: one request at a time, so the answer read is
    /// this request's (the correlation id is checked all the same).
    async fn call<Req, Resp>(
        &mut self,
        api: ApiKey,
        request: &Req,
        version: i16,
        timeout: Duration,
    ) -> Result<Resp, ConnError>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("tayga")));
        self.buf.clear();
        self.buf.put_i32(0);
        let encoded = header
            .encode(&mut self.buf, Req::header_version(version))
            .and_then(|()| request.encode(&mut self.buf, version));
        encoded.map_err(|e| self.protocol(format!("cannot encode {api:?} v{version}: {e}")))?;
        let len = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        let exchange = async {
            self.stream.write_all(&self.buf).await?;
            // TLS holds what is written until flushed.
            self.stream.flush().await?;
            let len = self.stream.read_i32().await?;
            if len < 0 || len as usize > MAX_RESPONSE_BYTES {
                return Ok(Err(len));
            }
            self.buf.clear();
            self.buf.resize(len as usize, 0);
            self.stream.read_exact(&mut self.buf).await?;
            Ok(Ok(()))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => return Err(ConnError::Timeout { addr: self.addr.clone(), timeout }),
            Ok(Err(source)) => return Err(io_error(&self.addr, source)),
            Ok(Ok(Err(len))) => return Err(self.protocol(format!("an answer of {len} bytes"))),
            Ok(Ok(Ok(()))) => {}
        }
        let body = self.buf.split().freeze();
        super::plan::read_answer(body, api, version, correlation_id).map_err(|reason| self.protocol(reason))
    }

    fn protocol(&self, reason: String) -> ConnError {
        ConnError::Protocol { addr: self.addr.clone(), reason }
    }
}

/// A connection's failure; with TLS 1.3 a broker's refusal of the client certificate comes
/// as an alert at the first read, after the handshake.
fn io_error(addr: &str, source: std::io::Error) -> ConnError {
    use rustls::AlertDescription as Alert;
    match source.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(
            refused @ rustls::Error::AlertReceived(
                Alert::CertificateRequired | Alert::BadCertificate | Alert::UnknownCA | Alert::CertificateUnknown,
            ),
        ) => ConnError::ClientCertificate { addr: addr.to_string(), why: refused.to_string() },
        _ => ConnError::Io { addr: addr.to_string(), source },
    }
}

/// The TLS handshake over `tcp`, its refusals told apart: a certificate not trusted, a port
/// that does not speak TLS, anything else.
async fn handshake(
    tls: &tokio_rustls::TlsConnector,
    addr: &str,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ConnError> {
    let name = crate::bus::security::server_name(addr).map_err(|why| ConnError::Tls { addr: addr.to_string(), why })?;
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
        .await
        .map_err(|_| ConnError::ConnectTimeout { addr: addr.to_string() })?;
    connected.map_err(|e| {
        let addr = addr.to_string();
        // tokio-rustls hands rustls's error over inside the io::Error.
        match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(refused @ rustls::Error::InvalidCertificate(_)) => {
                ConnError::Untrusted { addr, why: refused.to_string() }
            }
            Some(rustls::Error::InvalidMessage(_)) => ConnError::NotTls { addr },
            Some(rustls::Error::AlertReceived(_)) => match io_error(&addr, e) {
                ConnError::Io { addr, source } => ConnError::Tls { addr, why: source.to_string() },
                refused => refused,
            },
            _ => ConnError::Tls { addr, why: e.to_string() },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SaslMechanism;
    use bytes::Buf;
    use std::sync::Arc;

    /// A broker scripted as far as SASL, written byte by byte from Kafka's protocol guide (the
    /// `kafka-protocol` crate encodes only a client's side): it offers `offered`, speaks only
    /// versions without tagged fields, and refuses every password in the words Kafka's own
    /// brokers use. Scripted because no broker that runs here checks a SASL password
    /// (docs/security.md): this checks the exchange's framing and the line an operator reads,
    /// not a mechanism against a real server.
    async fn refusing_broker(offered: &'static [&'static str]) -> String {
        fn string(buf: &mut BytesMut, text: &str) {
            buf.put_i16(text.len() as i16);
            buf.put_slice(text.as_bytes());
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            while let Ok(len) = stream.read_i32().await {
                let mut request = vec![0; len as usize];
                stream.read_exact(&mut request).await.unwrap();
                let mut request = bytes::Bytes::from(request);
                // Request header v1: key, version, correlation id, client id.
                let (api, version, correlation) = (request.get_i16(), request.get_i16(), request.get_i32());
                let client_id = request.get_i16();
                request.advance(client_id.max(0) as usize);
                let mut out = BytesMut::new();
                out.put_i32(0);
                out.put_i32(correlation);
                match ApiKey::try_from(api).unwrap() {
                    ApiKey::ApiVersions => {
                        let keys = [
                            (ApiKey::Produce, 3, 9),
                            (ApiKey::Metadata, 4, 12),
                            (ApiKey::InitProducerId, 0, 4),
                            (ApiKey::SaslHandshake, 0, 1),
                            (ApiKey::SaslAuthenticate, 0, 1),
                        ];
                        out.put_i16(0);
                        out.put_i32(keys.len() as i32);
                        for (key, min, max) in keys {
                            out.put_i16(key as i16);
                            out.put_i16(min);
                            out.put_i16(max);
                        }
                    }
                    ApiKey::SaslHandshake => {
                        assert_eq!(version, 1);
                        let len = request.get_i16() as usize;
                        let mechanism = String::from_utf8(request.split_to(len).to_vec()).unwrap();
                        let known = offered.contains(&mechanism.as_str());
                        out.put_i16(if known { 0 } else { ResponseError::UnsupportedSaslMechanism.code() });
                        out.put_i32(offered.len() as i32);
                        offered.iter().for_each(|m| string(&mut out, m));
                    }
                    ApiKey::SaslAuthenticate => {
                        assert_eq!(version, 1);
                        assert!(request.get_i32() > 0, "the client's first message");
                        out.put_i16(ResponseError::SaslAuthenticationFailed.code());
                        string(&mut out, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512");
                        out.put_i32(0);
                        out.put_i64(0);
                    }
                    other => panic!("{other:?} before authentication"),
                }
                let len = (out.len() - 4) as i32;
                out[..4].copy_from_slice(&len.to_be_bytes());
                stream.write_all(&out).await.unwrap();
            }
        });
        addr
    }

    fn credentials(mechanism: SaslMechanism) -> Security {
        let password = "not-the-password".to_string();
        Security { tls: None, sasl: Some(Arc::new(Credentials { mechanism, username: "tayga".into(), password })) }
    }

    #[tokio::test]
    async fn a_refused_password_is_one_line_naming_the_broker_the_user_and_what_to_do() {
        let addr = refusing_broker(&["SCRAM-SHA-512", "SCRAM-SHA-256"]).await;
        let Err(err) = Conn::open(&addr, &credentials(SaslMechanism::ScramSha512)).await else { panic!("accepted") };
        assert!(err.needs_the_operator());
        assert_eq!(
            err.to_string(),
            format!(
                "the broker at {addr} refused the user `tayga` (SCRAM-SHA-512: Authentication failed during \
                 authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512): {CREDENTIALS_ADVICE}"
            )
        );
        assert!(!err.to_string().contains("not-the-password"));
    }

    #[tokio::test]
    async fn a_mechanism_the_broker_does_not_offer_is_named_with_those_it_does() {
        let addr = refusing_broker(&["SCRAM-SHA-512"]).await;
        let Err(err) = Conn::open(&addr, &credentials(SaslMechanism::Plain)).await else { panic!("accepted") };
        assert_eq!(
            err.to_string(),
            format!(
                "the broker at {addr} does not accept SASL PLAIN (it offers SCRAM-SHA-512): set [kafka] sasl_mechanism to one it offers"
            )
        );
    }
}
