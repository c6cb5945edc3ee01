//! The breaker against refused and silent loopback sockets: what opens it, what keeps it
//! closed, and when it closes again.

use super::*;

/// A breaker for a server on loopback `port`, probing with a short timeout.
fn breaker_on(port: u16) -> Arc<Breaker> {
    let url = DbUrl::parse(&format!("postgres://u:p@127.0.0.1:{port}/db")).unwrap();
    Breaker::new(
        "test server".to_owned(),
        Role::Primary,
        url,
        Duration::from_millis(200),
    )
}

/// A port nothing listens on: connections are refused.
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A server that accepts connections and never says a word (a partition).
async fn silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (port, serve_silently(listener, || {}))
}

/// Accepts connections on `listener` and never says a word, running `meanwhile` each time
/// it accepts one: an event that happens while a check of it is underway, whatever the
/// machine's load.
fn serve_silently(
    listener: tokio::net::TcpListener,
    meanwhile: impl Fn() + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            meanwhile();
            held.push(socket);
        }
    })
}

#[tokio::test]
async fn a_breaker_opens_once_per_outage_stays_open_while_nothing_answers_and_closes_again() {
    let breaker = breaker_on(refused_port());
    assert!(!breaker.is_open());
    breaker.trip("connect failed");
    breaker.trip("connect failed");
    let open = breaker.snapshot();
    assert!(open.open);
    assert_eq!(open.trips, 1, "one outage, one trip");
    assert_eq!(open.reason, Some("connect failed"));
    // Its recovery task keeps probing a server that refuses: the breaker stays open.
    tokio::time::sleep(RECOVERY_EVERY * 3).await;
    assert!(breaker.is_open());
    // A probe that answers closes it (as the recovery task does).
    breaker.close();
    let closed = breaker.snapshot();
    assert!(!closed.open);
    assert_eq!((closed.reason, closed.open_for_ms), (None, None));
    breaker.trip("statement deadline passed, server silent");
    assert_eq!(breaker.snapshot().trips, 2);
}

#[test]
fn a_timeout_is_silence_only_when_the_server_answered_nothing_else_meanwhile() {
    let breaker = breaker_on(refused_port());
    let began = Instant::now();
    assert!(breaker.silent(&Miss::TimedOut("connect timed out"), began));
    assert!(breaker.silent(&Miss::Failed("connect failed"), began));
    breaker.answered();
    assert!(
        !breaker.silent(&Miss::TimedOut("connect timed out"), began),
        "slow, not silent: it answered someone else"
    );
    assert!(
        breaker.silent(&Miss::Failed("connect failed"), began),
        "a refusal is proof whatever else answered"
    );
}

#[test]
fn only_a_failed_or_timed_out_connect_says_the_server_is_unreachable() {
    use deadpool::managed::{PoolError, TimeoutType};
    let miss = |e: CheckoutError| unreachable(&e).map(|m| m.reason());
    assert_eq!(
        miss(PoolError::Timeout(TimeoutType::Create)),
        Some("connect timed out")
    );
    assert_eq!(
        miss(PoolError::Timeout(TimeoutType::Recycle)),
        Some("pooled connection check timed out")
    );
    let refused = diesel_async::pooled_connection::PoolError::ConnectionError(
        diesel::ConnectionError::BadConnection("refused".to_owned()),
    );
    assert_eq!(miss(PoolError::Backend(refused)), Some("connect failed"));
    // Waiting for a free connection says the pool is busy, not that the server is gone.
    assert_eq!(miss(PoolError::Timeout(TimeoutType::Wait)), None);
}

#[tokio::test]
async fn a_refused_liveness_check_opens_the_breaker_at_once() {
    let breaker = breaker_on(refused_port());
    let mut live = Liveness::default();
    check_server(std::slice::from_ref(&breaker), &mut live).await;
    assert!(breaker.is_open());
}

#[tokio::test]
async fn a_silent_server_opens_the_breaker_on_the_second_timed_out_check_in_a_row() {
    let (port, server) = silent_server().await;
    let breaker = breaker_on(port);
    let mut live = Liveness::default();
    check_server(std::slice::from_ref(&breaker), &mut live).await;
    assert!(
        !breaker.is_open(),
        "one slow check on a busy machine is not silence"
    );
    assert_eq!(live.misses, 1);
    check_server(std::slice::from_ref(&breaker), &mut live).await;
    assert!(breaker.is_open());
    assert_eq!(live.misses, 0, "counting starts again after a trip");
    server.abort();
}

#[tokio::test]
async fn timed_out_checks_of_a_server_that_answers_others_never_open_the_breaker() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let breaker = breaker_on(listener.local_addr().unwrap().port());
    // Another session gets an answer while each check waits on its silent connection.
    let server = serve_silently(listener, {
        let breaker = Arc::clone(&breaker);
        move || breaker.answered()
    });
    let mut live = Liveness::default();
    for _ in 0..3 {
        check_server(std::slice::from_ref(&breaker), &mut live).await;
        assert_eq!(live.misses, 0);
    }
    assert!(!breaker.is_open());
    server.abort();
}

#[tokio::test]
async fn one_check_serves_every_database_of_a_server_and_a_refusal_opens_all_their_breakers() {
    let port = refused_port();
    let shards = [breaker_on(port), breaker_on(port)];
    let mut live = Liveness::default();
    check_server(&shards, &mut live).await;
    assert!(shards.iter().all(|b| b.is_open()));
}

#[tokio::test]
async fn a_server_that_answers_one_of_its_shards_is_not_silent_for_the_others() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shards = [breaker_on(port), breaker_on(port)];
    // The second shard's requests get an answer while each check waits on its silent
    // connection.
    let server = serve_silently(listener, {
        let other = Arc::clone(&shards[1]);
        move || other.answered()
    });
    let mut live = Liveness::default();
    for _ in 0..3 {
        check_server(&shards, &mut live).await;
        assert_eq!(live.misses, 0);
    }
    assert!(shards.iter().all(|b| !b.is_open()));
    server.abort();
}

#[test]
fn the_monitor_groups_breakers_by_server_so_each_server_is_checked_once() {
    let (a, b) = (refused_port(), refused_port());
    let breakers: Vec<_> = [a, b, a, a].into_iter().map(breaker_on).collect();
    let groups = by_server(breakers);
    let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 1], "in the order each server first appears");
}
