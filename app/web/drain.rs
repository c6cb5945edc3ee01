//! Leaving without failing a request: what a replica does between SIGTERM and exit.
//!
//! The proxy in front (nginx) keeps idle connections to each replica and has no health
//! checks of its own, so "stop accepting and close idle connections" at once (what a plain
//! graceful shutdown does) races it: a request written onto a connection the replica is
//! closing may have been received, so the proxy cannot safely send a POST on to the other
//! replica, and the client gets a 502. Leaving therefore goes in three steps:
//!
//! 1. **Draining** for a while (`--drain-ms`): readiness answers 503, every response says
//!    `Connection: close`, and new connections are still accepted and served. The proxy's
//!    idle connections are retired by the proxy itself (its upstream `keepalive_timeout` is
//!    shorter than the drain), the others after one more response.
//! 2. **Closing the listener**: what the kernel has already queued is taken first, then the
//!    socket is closed, so that every later connection attempt is *refused*, which the
//!    proxy knows was never delivered and sends to the other replica, whatever the method.
//! 3. **Finishing** what is in flight (bounded by the request timeout), then exiting.
//!    hyper's graceful shutdown closes idle connections and lets busy ones finish, but it
//!    also drops a connection whose first bytes it has not read yet, and under load one
//!    accepted just before the close often has not. So it is started only once every
//!    accepted connection has delivered its first bytes or closed ([`OpenConnections`]
//!    counts both), and the server returns when none is left.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::http::HeaderValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};

use super::client_address::PeerAddress;

/// Whether this replica is on its way out; shared by readiness and the response headers.
#[derive(Clone, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    pub fn start(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Connection: close` while draining, so that no connection is kept for a next request.
    pub fn connection_header(&self) -> Option<HeaderValue> {
        self.is_on().then(|| HeaderValue::from_static("close"))
    }
}

/// How many accepted connections are still open.
#[derive(Clone, Default)]
pub struct OpenConnections(Arc<Counted>);

#[derive(Default)]
struct Counted {
    open: AtomicUsize,
    /// Open and not a byte read from yet.
    unread: AtomicUsize,
    changed: Notify,
}

impl OpenConnections {
    pub fn count(&self) -> usize {
        self.0.open.load(Ordering::Acquire)
    }

    /// Resolves once every open connection has delivered bytes (its request is being read).
    pub async fn all_read(&self) {
        self.until(|c| c.unread.load(Ordering::Acquire) == 0).await;
    }

    async fn until(&self, done: impl Fn(&Counted) -> bool) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(&self.0) {
                return;
            }
            changed.await;
        }
    }

    fn track(&self, stream: TcpStream) -> Connection {
        self.0.open.fetch_add(1, Ordering::AcqRel);
        self.0.unread.fetch_add(1, Ordering::AcqRel);
        Connection {
            stream,
            open: self.clone(),
            unread: true,
        }
    }

    fn first_bytes(&self) {
        self.0.unread.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

/// An accepted connection, counted in [`OpenConnections`] until it is dropped.
pub struct Connection {
    stream: TcpStream,
    open: OpenConnections,
    unread: bool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.unread {
            self.open.0.unread.fetch_sub(1, Ordering::AcqRel);
        }
        self.open.0.open.fetch_sub(1, Ordering::AcqRel);
        self.open.0.changed.notify_waiters();
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if self.unread && buf.filled().len() > before {
            self.unread = false;
            self.open.first_bytes();
        }
        read
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A TCP listener that can be closed from outside (step 2 above) while the server keeps
/// serving the connections it accepted; counts them, and says when it has closed.
pub struct ClosingListener {
    open: Option<TcpListener>,
    addr: SocketAddr,
    close: Arc<Notify>,
    accepted_before_close: VecDeque<(TcpStream, SocketAddr)>,
    closed: Option<oneshot::Sender<()>>,
    connections: OpenConnections,
}

/// Closes a [`ClosingListener`].
#[derive(Clone)]
pub struct CloseHandle(Arc<Notify>);

impl CloseHandle {
    pub fn close(&self) {
        // A stored permit: the listener sees it even if it is busy handing out a connection.
        self.0.notify_one();
    }
}

impl ClosingListener {
    /// The listener, a handle that closes it, and a future that resolves once it is closed
    /// and every connection it accepted has been handed to the server.
    pub fn new(listener: TcpListener) -> io::Result<(Self, CloseHandle, oneshot::Receiver<()>)> {
        let close = Arc::new(Notify::new());
        let (closed_tx, closed_rx) = oneshot::channel();
        let me = Self {
            addr: listener.local_addr()?,
            open: Some(listener),
            close: close.clone(),
            accepted_before_close: VecDeque::new(),
            closed: Some(closed_tx),
            connections: OpenConnections::default(),
        };
        Ok((me, CloseHandle(close), closed_rx))
    }

    /// The connections it accepted that are still open.
    pub fn connections(&self) -> OpenConnections {
        self.connections.clone()
    }

    /// Takes every connection the kernel has already completed, then closes the socket.
    fn close_now(&mut self) {
        let Some(listener) = self.open.take() else {
            return;
        };
        let listener = match listener.into_std() {
            Ok(listener) => listener,
            Err(e) => {
                tracing::error!(error = %e, "cannot take the listener back to close it");
                return;
            }
        };
        // Still non-blocking (tokio set it): accept until the queue is empty.
        loop {
            match listener.accept() {
                Ok((stream, peer)) => {
                    // An accepted socket does not inherit the listener's non-blocking mode.
                    let stream = stream
                        .set_nonblocking(true)
                        .and_then(|()| TcpStream::from_std(stream));
                    match stream {
                        Ok(stream) => self.accepted_before_close.push_back((stream, peer)),
                        Err(e) => tracing::warn!(error = %e, "dropped a queued connection"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed while closing the listener");
                    break;
                }
            }
        }
        drop(listener);
        tracing::info!(
            queued = self.accepted_before_close.len(),
            "listener closed: new connections are refused"
        );
    }
}

enum Next {
    Accepted(io::Result<(TcpStream, SocketAddr)>),
    Close,
}

impl axum::serve::Listener for ClosingListener {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        loop {
            if let Some((stream, peer)) = self.accepted_before_close.pop_front() {
                return (self.connections.track(stream), peer);
            }
            let Some(listener) = &self.open else {
                if let Some(closed) = self.closed.take() {
                    let _ = closed.send(());
                }
                return std::future::pending().await;
            };
            let next = tokio::select! {
                biased;
                () = self.close.notified() => Next::Close,
                accepted = listener.accept() => Next::Accepted(accepted),
            };
            match next {
                Next::Close => self.close_now(),
                Next::Accepted(Ok((stream, peer))) => {
                    return (self.connections.track(stream), peer);
                }
                Next::Accepted(Err(e)) if is_connection_error(&e) => {}
                Next::Accepted(Err(e)) => {
                    // Out of file descriptors, most likely: give connections time to close.
                    tracing::error!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// What the server records of each connection for its requests: the peer's address.
impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, ClosingListener>>
    for PeerAddress
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, ClosingListener>) -> Self {
        PeerAddress(*stream.remote_addr())
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn a_closed_listener_hands_out_what_was_queued_then_refuses_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (mut listener, close, closed) = ClosingListener::new(listener).unwrap();
        let connections = listener.connections();
        let addr = listener.local_addr().unwrap();
        let first = TcpStream::connect(addr).await.unwrap();
        let (served_first, peer) = listener.accept().await;
        assert_eq!(peer, first.local_addr().unwrap());
        // Completed by the kernel, not yet accepted by the server, when the close comes.
        let queued = TcpStream::connect(addr).await.unwrap();
        close.close();
        let (served_queued, peer) = listener.accept().await;
        assert_eq!(
            peer,
            queued.local_addr().unwrap(),
            "the queued one is served"
        );
        assert_eq!(connections.count(), 2);
        let refused = TcpStream::connect(addr).await;
        assert_eq!(
            refused.unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused,
            "after the close, a connection attempt is refused, never left hanging"
        );
        let waiting = tokio::spawn(async move {
            listener.accept().await;
        });
        closed
            .await
            .expect("the server is told nothing more will come");
        assert!(!waiting.is_finished(), "and accept never returns again");
        waiting.abort();
        drop(served_first);
        assert_eq!(connections.count(), 1, "one connection is still open");
        drop(served_queued);
        assert_eq!(connections.count(), 0);
    }
}
