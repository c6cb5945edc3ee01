//! [`Relay`]: a TCP relay to a Postgres server on loopback that can be frozen (connections
//! stay open, no byte is forwarded either way: what a frozen VM or a network split looks
//! like to the app) and thawed, and whose open connections can be cut (what a reset or a
//! lost link looks like).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP relay to a Postgres server on loopback that can be frozen and thawed.
pub struct Relay {
    pub port: u16,
    frozen: watch::Sender<bool>,
    /// Bumped by [`Relay::cut`]: every connection open then is closed.
    cuts: watch::Sender<u64>,
}

impl Relay {
    pub async fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (frozen, _) = watch::channel(false);
        let (cuts, _) = watch::channel(0);
        let gate = frozen.clone();
        let cut = cuts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let gate = gate.subscribe();
                let mut cut = cut.subscribe();
                cut.mark_unchanged();
                tokio::spawn(relay_connection(client, upstream, gate, cut));
            }
        });
        Relay { port, frozen, cuts }
    }

    /// Closes the app's side of every connection open now; the server's side stays open
    /// (what it sends is dropped) until the server closes it. Later connections are relayed
    /// as before.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
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

async fn relay_connection(
    client: TcpStream,
    upstream: u16,
    mut gate: watch::Receiver<bool>,
    mut cut: watch::Receiver<u64>,
) {
    // A frozen server's kernel still completes the handshake; nothing more happens.
    if !open_gate(&mut gate).await {
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let relayed = async {
        tokio::join!(
            pump(&mut client_read, &mut server_write, gate.clone()),
            pump(&mut server_read, &mut client_write, gate)
        )
    };
    tokio::select! {
        _ = relayed => return,
        _ = cut.changed() => {}
    }
    drop((client_read, client_write));
    let mut sink = vec![0u8; 16 * 1024];
    while let Ok(1..) = server_read.read(&mut sink).await {}
}

/// Copies bytes one way, holding each chunk while the relay is frozen.
async fn pump(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
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
