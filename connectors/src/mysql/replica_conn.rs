//! [`ReplicaConn`]: the dump connection, spoken directly on a socket this source owns.
//!
//! # Why not mysql_async's `BinlogStream`
//!
//! mysql_async 0.37 hides the packet reader (`Conn::read_packet`, `write_command` are
//! crate-private) and its `BinlogStream` hands out parsed `mysql_common` events, never the
//! raw bytes. Behind that stream it also parses every event with `Event::read` (which panics
//! or underflows on malformed input), inflates every TRANSACTION_PAYLOAD with
//! `danger_decompress` (unbounded, and an error becomes an empty payload) and yields the inner
//! events after the payload event with nothing marking where they end. capstan's
//! [`EventReader`](super::EventReader) needs the raw event bytes: it verifies CRC32 itself,
//! bounds and inflates payloads itself, and halts on anything malformed.
//!
//! So the dump connection is ours: TCP, the MySQL handshake, the optional TLS upgrade
//! (rustls), authentication (`caching_sha2_password`, `mysql_native_password`), a handful of
//! text queries (preconditions, positions; see `text_query`), `SET` statements,
//! COM_REGISTER_SLAVE and the dump command, then plain packet reads. The packet layouts
//! themselves come from `mysql_common::packets` (handshake, SSL request, handshake response,
//! dump commands) and its scramble functions; only the framing (4-byte header, 16 MiB
//! continuation) and the auth exchange are written here.
//!
//! The queries run on this connection too, not on a mysql_async one: mysql_async 0.37's
//! `skip_domain_validation` recognises rustls' name-mismatch error by its text, which no
//! longer matches rustls 0.23's `NotValidForNameContext`, so VERIFY_CA against a
//! certificate without names (MySQL's auto-generated one) fails there. For the same reason
//! the snapshot's chunk reader runs on this client too (`query_conn`, ADR-0007).

use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse, SslRequest};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::{scramble_native, scramble_sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::source_config::ValidSourceConfig;
use super::source_error::SourceError;
use super::tls;

/// Largest payload of one wire packet; a longer one continues in the next packet.
const MAX_CHUNK: usize = 0xFF_FFFF;
/// Largest reassembled packet accepted: the server's own `max_allowed_packet` ceiling
/// (1 GiB) plus room for the packet and event headers.
const MAX_PACKET: usize = (1 << 30) + (1 << 16);
/// What the client announces as its max packet size.
const CLIENT_MAX_PACKET: u32 = 1 << 30;
/// utf8mb4_general_ci.
const COLLATION: u8 = 45;
const READ_BUFFER: usize = 256 * 1024;

trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// A server error packet, kept for classification only: the message can quote statements
/// and must never reach an error value or a log.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ServerErr {
    pub(crate) code: u16,
    pub(crate) message: String,
}

impl std::fmt::Debug for ServerErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerErr({})", self.code)
    }
}

/// One packet of the dump stream.
#[derive(Debug)]
pub(crate) enum Frame {
    /// An event (the packet without its leading OK byte) is in the caller's buffer at `1..`.
    Event,
    /// The server ended the stream (EOF packet).
    End,
    /// The server sent an error packet.
    Error(ServerErr),
}

/// The dump connection. See the module documentation.
pub(crate) struct ReplicaConn {
    io: BufReader<Box<dyn Io>>,
    seq: u8,
    server_version: String,
    tls: bool,
}

impl std::fmt::Debug for ReplicaConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaConn")
            .field("server_version", &self.server_version)
            .field("tls", &self.tls)
            .finish()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Plugin {
    Native,
    CachingSha2,
}

impl ReplicaConn {
    /// Connects, upgrades to TLS if configured, and authenticates (the caller bounds the
    /// time).
    pub(crate) async fn connect(config: &ValidSourceConfig) -> Result<ReplicaConn, SourceError> {
        Self::connect_with(config, CapabilityFlags::empty())
            .await
            .map_err(|e| match e {
                ServerOrIo::Server(err) => connect_refusal(&err),
                ServerOrIo::Source(e) => e,
            })
    }

    /// [`ReplicaConn::connect`] announcing `extra` capabilities as well (those the server
    /// offers), keeping a server refusal as its error packet (the query connection
    /// classifies it by code).
    pub(crate) async fn connect_with(
        config: &ValidSourceConfig,
        extra: CapabilityFlags,
    ) -> Result<ReplicaConn, ServerOrIo> {
        let tls_config = tls::client_config(&config.tls)?;
        let mut tcp = TcpStream::connect((config.host.as_str(), config.port))
            .await
            .map_err(|e| SourceError::io(&e))?;
        tcp.set_nodelay(true).map_err(|e| SourceError::io(&e))?;
        let mut seq = 0u8;
        let mut first = Vec::new();
        read_packet(&mut tcp, &mut seq, &mut first).await?;
        if first.first() == Some(&0xFF) {
            return Err(ServerOrIo::Server(parse_err(&first)));
        }
        let hs: HandshakePacket<'_> =
            ParseBuf(&first)
                .parse(())
                .map_err(|_| SourceError::UnexpectedPacket {
                    site: "initial handshake",
                })?;
        let server_version = hs.server_version_str().into_owned();
        let version = hs.server_version_parsed().unwrap_or((8, 0, 0));
        let nonce = hs.nonce();
        let plugin = match hs.auth_plugin() {
            None | Some(AuthPlugin::MysqlNativePassword) => Plugin::Native,
            Some(AuthPlugin::CachingSha2Password) => Plugin::CachingSha2,
            Some(_) => return Err(SourceError::AuthenticationFailed.into()),
        };
        let mut caps = extra
            | CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | CapabilityFlags::CLIENT_LONG_FLAG
            | CapabilityFlags::CLIENT_TRANSACTIONS;
        caps &= hs.capabilities();
        let io: Box<dyn Io> = match &tls_config {
            None => Box::new(tcp),
            Some(cfg) => {
                if !hs.capabilities().contains(CapabilityFlags::CLIENT_SSL) {
                    return Err(SourceError::TlsFailed {
                        reason: "server offers no tls",
                    }
                    .into());
                }
                caps |= CapabilityFlags::CLIENT_SSL;
                let mut req = Vec::new();
                SslRequest::new(caps, CLIENT_MAX_PACKET, COLLATION).serialize(&mut req);
                write_packet(&mut tcp, &mut seq, &req).await?;
                let name = tls::server_name(&config.host)?;
                let stream = tokio_rustls::TlsConnector::from(Arc::clone(cfg))
                    .connect(name, tcp)
                    .await
                    .map_err(|e| match e.kind() {
                        // rustls refused the peer (certificate, protocol): definite
                        std::io::ErrorKind::InvalidData => SourceError::TlsFailed {
                            reason: "handshake",
                        },
                        // the socket failed during the handshake: retried like any other
                        _ => SourceError::io(&e),
                    })?;
                Box::new(stream)
            }
        };
        let mut conn = ReplicaConn {
            io: BufReader::with_capacity(READ_BUFFER, io),
            seq,
            server_version,
            tls: tls_config.is_some(),
        };
        let password = config.password.expose().as_bytes();
        let scramble = conn.scramble(plugin, &nonce, password);
        let auth_plugin = match plugin {
            Plugin::Native => AuthPlugin::MysqlNativePassword,
            Plugin::CachingSha2 => AuthPlugin::CachingSha2Password,
        };
        let mut resp = Vec::new();
        HandshakeResponse::new(
            Some(scramble),
            version,
            Some(config.user.as_bytes()),
            None::<&[u8]>,
            Some(auth_plugin),
            caps,
            None,
            CLIENT_MAX_PACKET,
        )
        .serialize(&mut resp);
        conn.write(&resp).await?;
        conn.authenticate(plugin, nonce, password).await?;
        Ok(conn)
    }

    fn scramble(&self, plugin: Plugin, nonce: &[u8], password: &[u8]) -> Vec<u8> {
        if password.is_empty() {
            return Vec::new();
        }
        match plugin {
            Plugin::Native => scramble_native(nonce, password).map(|s| s.to_vec()),
            Plugin::CachingSha2 => scramble_sha256(nonce, password).map(|s| s.to_vec()),
        }
        .unwrap_or_default()
    }

    /// The rest of the auth exchange: plugin switches and `caching_sha2_password`'s fast or
    /// full authentication.
    async fn authenticate(
        &mut self,
        mut plugin: Plugin,
        mut nonce: Vec<u8>,
        password: &[u8],
    ) -> Result<(), ServerOrIo> {
        let mut buf = Vec::new();
        for _ in 0..8 {
            self.read(&mut buf).await?;
            match buf.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(ServerOrIo::Server(parse_err(&buf))),
                Some(0xFE) => {
                    // AuthSwitchRequest: plugin name NUL, then the new nonce (NUL-terminated)
                    let rest = buf.get(1..).unwrap_or_default();
                    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                    plugin = match &rest[..end] {
                        b"mysql_native_password" => Plugin::Native,
                        b"caching_sha2_password" => Plugin::CachingSha2,
                        _ => return Err(SourceError::AuthenticationFailed.into()),
                    };
                    let data = rest.get(end + 1..).unwrap_or_default();
                    nonce = match data {
                        [head @ .., 0] => head.to_vec(),
                        all => all.to_vec(),
                    };
                    let scramble = self.scramble(plugin, &nonce, password);
                    self.write(&scramble).await?;
                }
                Some(0x01) if plugin == Plugin::CachingSha2 => match buf.get(1) {
                    Some(0x03) => {} // fast auth succeeded; OK follows
                    Some(0x04) => self.full_sha2_auth(&nonce, password).await?,
                    _ => return Err(SourceError::UnexpectedPacket { site: "auth" }.into()),
                },
                _ => return Err(SourceError::UnexpectedPacket { site: "auth" }.into()),
            }
        }
        Err(SourceError::UnexpectedPacket { site: "auth" }.into())
    }

    async fn full_sha2_auth(&mut self, nonce: &[u8], password: &[u8]) -> Result<(), SourceError> {
        let mut clear = password.to_vec();
        clear.push(0);
        if self.tls {
            return self.write(&clear).await;
        }
        // no TLS: ask for the server's RSA key and send the password encrypted with it
        self.write(&[0x02]).await?;
        let mut key = Vec::new();
        self.read(&mut key).await?;
        if key.first() != Some(&0x01) {
            return Err(SourceError::AuthenticationFailed);
        }
        if nonce.is_empty() {
            return Err(SourceError::AuthenticationFailed);
        }
        for (i, b) in clear.iter_mut().enumerate() {
            *b ^= nonce[i % nonce.len()];
        }
        let encrypted = mysql_common::crypto::encrypt(&clear, key.get(1..).unwrap_or_default());
        self.write(&encrypted).await
    }

    /// A connection over `io`, as after authentication (unit tests script the server).
    #[cfg(test)]
    pub(crate) fn over(
        io: impl AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    ) -> ReplicaConn {
        ReplicaConn {
            io: BufReader::with_capacity(READ_BUFFER, Box::new(io)),
            seq: 0,
            server_version: String::new(),
            tls: false,
        }
    }

    /// Runs a statement that returns no rows (`SET …`).
    pub(crate) async fn execute(&mut self, sql: &str) -> Result<(), ServerOrIo> {
        let mut cmd = Vec::with_capacity(sql.len() + 1);
        cmd.push(0x03);
        cmd.extend_from_slice(sql.as_bytes());
        self.command(&cmd).await?;
        self.expect_ok().await
    }

    /// Sends a command packet (sequence restarts at 0).
    pub(crate) async fn command(&mut self, payload: &[u8]) -> Result<(), SourceError> {
        self.seq = 0;
        self.write(payload).await
    }

    /// Sends a serialized `mysql_common` command.
    pub(crate) async fn command_struct(
        &mut self,
        cmd: &impl MySerialize,
    ) -> Result<(), SourceError> {
        let mut buf = Vec::new();
        cmd.serialize(&mut buf);
        self.command(&buf).await
    }

    /// Reads an OK (or an error) packet.
    pub(crate) async fn expect_ok(&mut self) -> Result<(), ServerOrIo> {
        let mut buf = Vec::new();
        self.read(&mut buf).await?;
        match buf.first() {
            Some(0x00) => Ok(()),
            Some(0xFF) => Err(ServerOrIo::Server(parse_err(&buf))),
            _ => Err(ServerOrIo::Source(SourceError::UnexpectedPacket {
                site: "command response",
            })),
        }
    }

    /// Reads the next dump-stream packet into `buf`.
    pub(crate) async fn next_frame(&mut self, buf: &mut Vec<u8>) -> Result<Frame, SourceError> {
        self.read(buf).await?;
        match buf.first() {
            Some(0x00) => Ok(Frame::Event),
            Some(0xFF) => Ok(Frame::Error(parse_err(buf))),
            Some(0xFE) if buf.len() < 8 => Ok(Frame::End),
            _ => Err(SourceError::UnexpectedPacket {
                site: "dump stream",
            }),
        }
    }

    /// True if a whole packet is already buffered, so the next [`ReplicaConn::next_frame`]
    /// completes without waiting for the socket.
    pub(crate) fn has_buffered_packet(&self) -> bool {
        let b = self.io.buffer();
        match b.get(..3) {
            Some(h) => {
                let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
                len < MAX_CHUNK && b.len() >= 4 + len
            }
            None => false,
        }
    }

    /// Reads one packet into `buf`.
    /// The next packet read is the first of a reply to a one-packet command: for a reply to
    /// the earlier of two commands written back to back (the packet sequence restarts with
    /// every command, so after the second the count is that command's).
    pub(crate) fn expect_reply(&mut self) {
        self.seq = 1;
    }

    pub(crate) async fn read(&mut self, buf: &mut Vec<u8>) -> Result<(), SourceError> {
        read_packet(&mut self.io, &mut self.seq, buf).await
    }

    async fn write(&mut self, payload: &[u8]) -> Result<(), SourceError> {
        write_packet(&mut self.io, &mut self.seq, payload).await
    }
}

/// A server error (to classify) or a source error.
#[derive(Debug)]
pub(crate) enum ServerOrIo {
    /// The server answered with an error packet.
    Server(ServerErr),
    /// Anything else.
    Source(SourceError),
}

impl From<SourceError> for ServerOrIo {
    fn from(e: SourceError) -> Self {
        ServerOrIo::Source(e)
    }
}

/// Reads one logical packet (joining 16 MiB continuations) into `out`.
async fn read_packet<R: AsyncRead + Unpin + ?Sized>(
    r: &mut R,
    seq: &mut u8,
    out: &mut Vec<u8>,
) -> Result<(), SourceError> {
    out.clear();
    loop {
        let mut header = [0u8; 4];
        r.read_exact(&mut header)
            .await
            .map_err(|e| SourceError::io(&e))?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        if header[3] != *seq {
            return Err(SourceError::UnexpectedPacket {
                site: "packet sequence",
            });
        }
        *seq = seq.wrapping_add(1);
        let start = out.len();
        if start + len > MAX_PACKET {
            return Err(SourceError::UnexpectedPacket {
                site: "packet too large",
            });
        }
        out.resize(start + len, 0);
        r.read_exact(&mut out[start..])
            .await
            .map_err(|e| SourceError::io(&e))?;
        if len < MAX_CHUNK {
            return Ok(());
        }
    }
}

/// Writes one packet (payloads here are always below 16 MiB).
async fn write_packet<W: AsyncWrite + Unpin + ?Sized>(
    w: &mut W,
    seq: &mut u8,
    payload: &[u8],
) -> Result<(), SourceError> {
    if payload.len() >= MAX_CHUNK {
        return Err(SourceError::UnexpectedPacket {
            site: "outgoing packet too large",
        });
    }
    let len = payload.len();
    let header = [len as u8, (len >> 8) as u8, (len >> 16) as u8, *seq];
    *seq = seq.wrapping_add(1);
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&header);
    frame.extend_from_slice(payload);
    w.write_all(&frame).await.map_err(|e| SourceError::io(&e))?;
    w.flush().await.map_err(|e| SourceError::io(&e))
}

/// Parses an error packet: `0xFF`, code (u16 LE), optional `#` + SQLSTATE, message.
pub(crate) fn parse_err(packet: &[u8]) -> ServerErr {
    let code = match packet.get(1..3) {
        Some(c) => u16::from_le_bytes([c[0], c[1]]),
        None => 0,
    };
    let mut msg = packet.get(3..).unwrap_or_default();
    if msg.first() == Some(&b'#') {
        msg = msg.get(6..).unwrap_or_default();
    }
    ServerErr {
        code,
        message: String::from_utf8_lossy(msg).into_owned(),
    }
}

/// A refusal during connect or authentication.
fn connect_refusal(err: &ServerErr) -> SourceError {
    match err.code {
        1045 | 1044 | 1698 | 1130 | 1129 | 1251 => SourceError::AuthenticationFailed,
        code => SourceError::QueryFailed { code },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_packets_parse_without_the_sqlstate() {
        let mut p = vec![0xFF, 0xD4, 0x04, b'#'];
        p.extend_from_slice(b"HY000could not find first log file name");
        let e = parse_err(&p);
        assert_eq!(e.code, 1236);
        assert_eq!(e.message, "could not find first log file name");
        assert_eq!(format!("{e:?}"), "ServerErr(1236)");
        assert_eq!(parse_err(&[0xFF]).code, 0);
    }

    #[tokio::test]
    async fn packets_join_continuations_and_check_sequence() {
        let mut wire = Vec::new();
        let big = vec![7u8; MAX_CHUNK];
        wire.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0]);
        wire.extend_from_slice(&big);
        wire.extend_from_slice(&[2, 0, 0, 1, 8, 9]);
        let mut seq = 0;
        let mut out = Vec::new();
        read_packet(&mut wire.as_slice(), &mut seq, &mut out)
            .await
            .unwrap();
        assert_eq!(out.len(), MAX_CHUNK + 2);
        assert_eq!(&out[MAX_CHUNK..], &[8, 9]);
        assert_eq!(seq, 2);
        let mut seq = 5;
        let err = read_packet(&mut [1u8, 0, 0, 0, 0].as_slice(), &mut seq, &mut out).await;
        assert_eq!(err.unwrap_err().code(), "unexpected_stream_packet");
    }
}
