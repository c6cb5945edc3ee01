//! [`Relay`]: a TCP relay to a Postgres server on loopback that can be frozen (connections
//! stay open, no byte is forwarded either way: what a frozen VM or a network split looks
//! like to the app) and thawed.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP relay to a Postgres server on loopback that can be frozen and thawed.
pub struct Relay {
    pub port: u16,
    frozen: watch::Sender<bool>,
}

impl Relay {
    pub async fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (frozen, _) = watch::channel(false);
        let gate = frozen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let gate = gate.subscribe();
                tokio::spawn(relay_connection(client, upstream, gate));
            }
        });
        Relay { port, frozen }
    }

    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

/// Waits until the relay is not frozen; false if the relay is gone.
async fn open_gate(gate: &mut watch::Receiver<bool>) -> bool {
    gate.wait_for(|frozen| !frozen).await.is_ok()
}

async fn relay_connection(client: TcpStream, upstream: u16, mut gate: watch::Receiver<bool>) {
    // A frozen server's kernel still completes the handshake; nothing more happens.
    if !open_gate(&mut gate).await {
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, gate.clone()),
        pump(server_read, client_write, gate)
    );
}

/// Copies bytes one way, holding each chunk while the relay is frozen.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut gate: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !open_gate(&mut gate).await || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
