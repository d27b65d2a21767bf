//! The gateway's listening socket, plain or TLS (rustls, certificate and key from PEM files).
//!
//! Connections are accepted and their TLS handshakes run in tasks of their own, so a client
//! that stalls its handshake holds up nobody; finished connections reach the server through a
//! channel.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;

/// A client's TLS handshake must finish within this.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(15);

/// A connection, plain or over TLS.
pub type Connection = Either<TcpStream, TlsStream<TcpStream>>;

/// The address a request came from: what per-client limits count by.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

pub struct Incoming {
    local: SocketAddr,
    accepted: mpsc::Receiver<(Connection, SocketAddr)>,
}

impl Listener for Incoming {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        match self.accepted.recv().await {
            Some(conn) => conn,
            // The accepting task ended (the runtime is shutting down): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

impl Connected<IncomingStream<'_, Incoming>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Incoming>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// The application protocol a door speaks over TLS, agreed in the handshake (ALPN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// HTTP/1.1 only: the lotus door (lotus's client speaks it).
    Http1,
    /// HTTP/2 only: the gRPC door (gRPC clients insist on `h2` being agreed).
    H2,
}

/// The TLS settings of a certificate chain and key in PEM files, for a door speaking `alpn`.
pub fn tls_acceptor(cert: &Path, key: &Path, alpn: Alpn) -> Result<TlsAcceptor> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .with_context(|| format!("gateway.tls_cert: reading {}", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "gateway.tls_cert: {} holds no PEM certificate",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "gateway.tls_key: reading a PEM private key from {}",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("initialising TLS")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("gateway.tls_cert and gateway.tls_key do not make a usable pair")?;
    config.alpn_protocols = match alpn {
        Alpn::Http1 => vec![b"http/1.1".to_vec()],
        Alpn::H2 => vec![b"h2".to_vec()],
    };
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Listen on `addr`, over TLS when `tls` is given.
pub async fn bind(addr: &str, tls: Option<TlsAcceptor>) -> Result<Incoming> {
    let tcp = TcpListener::bind(addr)
        .await
        .with_context(|| format!("gateway: listening on {addr}"))?;
    let local = tcp.local_addr().context("gateway: the bound address")?;
    let (tx, accepted) = mpsc::channel(64);
    tokio::spawn(accept_loop(tcp, tls, tx));
    Ok(Incoming { local, accepted })
}

async fn accept_loop(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    tx: mpsc::Sender<(Connection, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "gateway: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let tx = tx.clone();
        match &tls {
            None => {
                if tx.send((Either::Left(stream), peer)).await.is_err() {
                    return;
                }
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_WITHIN, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((Either::Right(tls), peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::info!(%peer, error = %e, "gateway: TLS handshake failed")
                        }
                        Err(_) => tracing::info!(%peer, "gateway: TLS handshake timed out"),
                    }
                });
            }
        }
    }
}
