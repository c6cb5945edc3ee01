//! Which client sent a request: the connection's peer, or, when that peer is a proxy this
//! service trusts (`[web] trusted_proxies`: nginx in the compose stack), the address the
//! proxy wrote last in `X-Forwarded-For`.
//!
//! One hop only: a trusted proxy is expected to write the address it saw itself (nginx's
//! `$remote_addr`, after its own `real_ip` resolved any load balancer in front of it), so
//! what a client writes in the header is never believed. IPv6 clients are counted by their
//! /64, the block one subscriber usually holds.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};

use crate::configuration::proxies::TrustedProxies;

const FORWARDED_FOR: &str = "x-forwarded-for";

/// The connection's peer, which the server puts on every request as
/// `ConnectInfo<PeerAddress>` (see `drain::ClosingListener`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddress(pub SocketAddr);

/// The client of a request with these headers and extensions (the server puts the
/// connection's peer there); `None` when the request came through no socket (a test
/// calling the router directly).
pub fn client(
    proxies: &TrustedProxies,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Option<ClientAddress> {
    let peer = extensions.get::<ConnectInfo<PeerAddress>>()?.0.0.ip();
    let address = if proxies.trusts(peer) {
        last_forwarded(headers).unwrap_or(peer)
    } else {
        peer
    };
    Some(ClientAddress::of(address))
}

/// The last address of the last `X-Forwarded-For` header: the one the nearest proxy wrote.
fn last_forwarded(headers: &HeaderMap) -> Option<IpAddr> {
    let value = headers.get_all(FORWARDED_FOR).iter().next_back()?;
    let last = value.to_str().ok()?.rsplit(',').next()?.trim();
    last.parse::<IpAddr>()
        .ok()
        .or_else(|| last.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// A client as limits count it: an IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientAddress(IpAddr);

impl ClientAddress {
    pub fn of(address: IpAddr) -> Self {
        match address.to_canonical() {
            IpAddr::V6(v6) => {
                let block = u128::from(v6) & !((1u128 << 64) - 1);
                Self(IpAddr::V6(Ipv6Addr::from(block)))
            }
            v4 => Self(v4),
        }
    }
}

impl std::fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
            v4 => write!(f, "{v4}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn request(peer: &str, forwarded: &[&str]) -> (HeaderMap, Extensions) {
        let mut headers = HeaderMap::new();
        for f in forwarded {
            headers.append(FORWARDED_FOR, HeaderValue::from_str(f).unwrap());
        }
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(PeerAddress(peer.parse().unwrap())));
        (headers, extensions)
    }

    fn client(trusted: &[&str], peer: &str, forwarded: &[&str]) -> String {
        let (headers, extensions) = request(peer, forwarded);
        let proxies = TrustedProxies::parse(trusted.iter().copied()).unwrap();
        super::client(&proxies, &headers, &extensions)
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_forwarded_address_is_believed_only_from_a_trusted_peer() {
        let sent = ["6.6.6.6"];
        assert_eq!(client(&[], "10.0.0.5:4000", &sent), "10.0.0.5");
        assert_eq!(client(&["10.0.0.0/8"], "10.0.0.5:4000", &sent), "6.6.6.6");
        assert_eq!(client(&["10.0.0.9"], "10.0.0.5:4000", &sent), "10.0.0.5");
    }

    #[test]
    fn the_address_the_nearest_proxy_wrote_wins_over_what_the_client_wrote() {
        let trusted = ["127.0.0.1"];
        let chain = ["1.1.1.1, 2.2.2.2", "3.3.3.3"];
        assert_eq!(client(&trusted, "127.0.0.1:1", &chain), "3.3.3.3");
        assert_eq!(
            client(&trusted, "127.0.0.1:1", &["9.9.9.9, 4.4.4.4"]),
            "4.4.4.4"
        );
        assert_eq!(
            client(&trusted, "127.0.0.1:1", &["garbage"]),
            "127.0.0.1",
            "an unreadable header leaves the peer"
        );
        assert_eq!(client(&trusted, "127.0.0.1:1", &[]), "127.0.0.1");
    }

    #[test]
    fn ipv6_clients_count_by_their_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(
            client(&[], "[2001:db8:1:2:aaaa::1]:80", &[]),
            "2001:db8:1:2::/64"
        );
        assert_eq!(client(&[], "[::ffff:192.0.2.7]:80", &[]), "192.0.2.7");
        assert_eq!(
            client(&["::1"], "[::1]:80", &["[2001:db8::5]:443"]),
            "2001:db8::/64"
        );
    }
}
