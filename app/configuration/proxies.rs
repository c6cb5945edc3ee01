//! `[web] trusted_proxies`: the proxies whose `X-Forwarded-For` the app believes (see
//! `web::client_address`), as addresses and CIDR blocks that cannot hold anything else.

use std::net::IpAddr;

use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed; parsed from addresses and CIDR blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

/// Why a `trusted_proxies` entry is not an address or a block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither an IP address nor a CIDR block (such as \"10.0.0.0/8\")")]
pub struct NotAnAddress(pub String);

impl TrustedProxies {
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, NotAnAddress> {
        entries
            .into_iter()
            .map(|entry| {
                let entry = entry.trim();
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| NotAnAddress(entry.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn none() -> Self {
        Self::default()
    }

    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|net| net.contains(&peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_that_are_not_addresses_are_refused_by_name() {
        assert_eq!(
            TrustedProxies::parse(["10.0.0.0/8", "nginx"]),
            Err(NotAnAddress("nginx".to_owned()))
        );
        let parsed = TrustedProxies::parse(["10.1.2.3/8", "::1"]).unwrap();
        assert_eq!(
            parsed,
            TrustedProxies(vec![
                "10.0.0.0/8".parse().unwrap(),
                "::1/128".parse().unwrap()
            ]),
            "a block is kept as its network"
        );
        assert!(parsed.trusts("10.200.0.1".parse().unwrap()));
        assert!(
            parsed.trusts("::ffff:10.0.0.1".parse().unwrap()),
            "mapped IPv4 too"
        );
        assert!(!parsed.trusts("11.0.0.1".parse().unwrap()));
    }
}
