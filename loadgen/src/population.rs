//! Who the load is for: a population of tenants (`tenant-0001` …), a few named whales that
//! each take a fixed share of all requests, and the pick of one tenant per request (whales
//! by share, the rest uniform or Zipf-skewed over the population).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::{Distribution, Zipf};
use serde::Serialize;

/// Largest population `--tenants` accepts (names are kept in memory).
pub const MAX_TENANTS: usize = 1_000_000;

/// A tenant that receives a fixed share of all requests: `NAME=SHARE`, e.g. `acme-corp=0.5`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Whale {
    pub name: String,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhaleError {
    #[error("{0:?} is not NAME=SHARE (e.g. acme-corp=0.5)")]
    Shape(String),
    #[error(
        "{0:?} is not a tenant id (1–64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit)"
    )]
    Name(String),
    #[error("share {0:?} is not a number between 0 and 1 (exclusive)")]
    Share(String),
}

impl FromStr for Whale {
    type Err = WhaleError;

    fn from_str(s: &str) -> Result<Self, WhaleError> {
        let (name, share) = s
            .split_once('=')
            .ok_or_else(|| WhaleError::Shape(s.to_owned()))?;
        let name = name.trim();
        if !is_tenant_id(name) {
            return Err(WhaleError::Name(name.to_owned()));
        }
        let share_text = share.trim();
        let share: f64 = share_text
            .parse()
            .map_err(|_| WhaleError::Share(share_text.to_owned()))?;
        if !(share > 0.0 && share < 1.0) {
            return Err(WhaleError::Share(share_text.to_owned()));
        }
        Ok(Whale {
            name: name.to_owned(),
            share,
        })
    }
}

impl fmt::Display for Whale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.share)
    }
}

/// The service's tenant id rule (checked here so a typo fails before any request is sent).
fn is_tenant_id(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(ok_char)
}

/// Why a set of whales and a population cannot go together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PopulationError {
    #[error("--tenants must be between 1 and {MAX_TENANTS}, not {0}")]
    Tenants(usize),
    #[error("--zipf must be a finite number ≥ 0, not {0}")]
    Zipf(f64),
    #[error(
        "--whale shares sum to {0}; they must sum to less than 1 so the other tenants get the rest"
    )]
    SharesTooLarge(f64),
    #[error("--whale {0} is given twice")]
    Duplicate(String),
    #[error(
        "--whale {0} is also a member of the --tenants population; give the whale another name"
    )]
    InPopulation(String),
}

/// The name of population member `i` (0-based): `tenant-0001` for `i = 0`.
pub fn population_name(i: usize) -> String {
    format!("tenant-{:04}", i + 1)
}

/// Tenants by index: whales first (in the order given), then the population.
#[derive(Debug, Clone)]
pub struct Population {
    names: Vec<String>,
    whales: Vec<Whale>,
    /// Cumulative whale shares, for the pick.
    cumulative: Vec<f64>,
    zipf: Option<Zipf<f64>>,
}

impl Population {
    pub fn new(tenants: usize, zipf: f64, whales: &[Whale]) -> Result<Self, PopulationError> {
        if !(1..=MAX_TENANTS).contains(&tenants) {
            return Err(PopulationError::Tenants(tenants));
        }
        if !(zipf.is_finite() && zipf >= 0.0) {
            return Err(PopulationError::Zipf(zipf));
        }
        let sum: f64 = whales.iter().map(|w| w.share).sum();
        if sum >= 1.0 {
            return Err(PopulationError::SharesTooLarge((sum * 1e6).round() / 1e6));
        }
        let mut names: Vec<String> = Vec::with_capacity(whales.len() + tenants);
        for w in whales {
            if names.contains(&w.name) {
                return Err(PopulationError::Duplicate(w.name.clone()));
            }
            let in_population = w
                .name
                .strip_prefix("tenant-")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|i| (1..=tenants).contains(&i) && population_name(i - 1) == w.name);
            if in_population {
                return Err(PopulationError::InPopulation(w.name.clone()));
            }
            names.push(w.name.clone());
        }
        names.extend((0..tenants).map(population_name));
        let cumulative = whales
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w.share;
                Some(*acc)
            })
            .collect();
        let zipf = if zipf > 0.0 {
            Some(Zipf::new(tenants as f64, zipf).map_err(|_| PopulationError::Zipf(zipf))?)
        } else {
            None
        };
        Ok(Population {
            names,
            whales: whales.to_vec(),
            cumulative,
            zipf,
        })
    }

    /// Every tenant's name, indexed as [`Population::pick`] returns them.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn whales(&self) -> &[Whale] {
        &self.whales
    }

    /// Whether tenant `i` is a whale.
    pub fn is_whale(&self, i: usize) -> bool {
        i < self.whales.len()
    }

    /// The tenant of one request: a whale with its share's probability, otherwise a member of
    /// the population (uniform, or rank `k` with weight `1/k^s` under `--zipf s`).
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.random();
        if let Some(w) = self.cumulative.iter().position(|&c| u < c) {
            return w;
        }
        let members = self.names.len() - self.whales.len();
        let member = match &self.zipf {
            // Zipf samples ranks 1..=n as floats.
            Some(z) => (z.sample(rng) as usize).clamp(1, members) - 1,
            None => rng.random_range(0..members),
        };
        self.whales.len() + member
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn whale(s: &str) -> Whale {
        s.parse().unwrap()
    }

    #[test]
    fn a_whale_parses_from_name_and_share() {
        assert_eq!(
            whale("acme-corp=0.5"),
            Whale {
                name: "acme-corp".into(),
                share: 0.5
            }
        );
        assert_eq!(whale(" big.co = 0.25 ").share, 0.25);
    }

    #[test]
    fn a_malformed_whale_says_what_is_wrong() {
        assert!(matches!(
            "acme-corp".parse::<Whale>(),
            Err(WhaleError::Shape(_))
        ));
        assert!(matches!("=0.5".parse::<Whale>(), Err(WhaleError::Name(_))));
        assert!(matches!(
            "-acme=0.5".parse::<Whale>(),
            Err(WhaleError::Name(_))
        ));
        for bad in ["a=0", "a=1", "a=1.5", "a=-0.1", "a=half", "a=NaN", "a="] {
            assert!(
                matches!(bad.parse::<Whale>(), Err(WhaleError::Share(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn whale_shares_summing_to_one_or_more_are_refused_naming_the_flag() {
        let err = Population::new(10, 0.0, &[whale("a=0.6"), whale("b=0.4")]).unwrap_err();
        assert!(matches!(err, PopulationError::SharesTooLarge(_)));
        assert!(err.to_string().starts_with("--whale"), "{err}");
        assert!(Population::new(10, 0.0, &[whale("a=0.6"), whale("b=0.39")]).is_ok());
    }

    #[test]
    fn a_population_must_be_non_empty_and_whales_distinct() {
        assert_eq!(
            Population::new(0, 0.0, &[]).unwrap_err(),
            PopulationError::Tenants(0)
        );
        assert!(matches!(
            Population::new(5, 0.0, &[whale("a=0.1"), whale("a=0.2")]),
            Err(PopulationError::Duplicate(_))
        ));
        assert!(matches!(
            Population::new(5, 0.0, &[whale("tenant-0003=0.1")]),
            Err(PopulationError::InPopulation(_))
        ));
        assert!(Population::new(5, 0.0, &[whale("tenant-0006=0.1")]).is_ok());
        assert!(matches!(
            Population::new(5, -1.0, &[]),
            Err(PopulationError::Zipf(_))
        ));
    }

    #[test]
    fn names_list_whales_first_then_the_population() {
        let p = Population::new(3, 0.0, &[whale("acme-corp=0.5")]).unwrap();
        assert_eq!(
            p.names(),
            ["acme-corp", "tenant-0001", "tenant-0002", "tenant-0003"]
        );
        assert!(p.is_whale(0));
        assert!(!p.is_whale(1));
    }

    fn shares(p: &Population, seed: u64, n: usize) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut counts = vec![0usize; p.len()];
        for _ in 0..n {
            counts[p.pick(&mut rng)] += 1;
        }
        counts.into_iter().map(|c| c as f64 / n as f64).collect()
    }

    #[test]
    fn whales_get_their_share_and_the_rest_is_spread_uniformly() {
        let p = Population::new(10, 0.0, &[whale("acme=0.5"), whale("globex=0.2")]).unwrap();
        let s = shares(&p, 7, 100_000);
        assert!((s[0] - 0.5).abs() < 0.01, "{s:?}");
        assert!((s[1] - 0.2).abs() < 0.01, "{s:?}");
        for member in &s[2..] {
            assert!((member - 0.03).abs() < 0.005, "{s:?}");
        }
    }

    #[test]
    fn zipf_skews_the_population_toward_low_ranks() {
        let p = Population::new(100, 1.0, &[]).unwrap();
        let s = shares(&p, 7, 100_000);
        // Harmonic number H(100) ≈ 5.187: rank 1 gets ≈ 19.3 %, rank 2 ≈ 9.6 %.
        assert!((s[0] - 0.193).abs() < 0.01, "{:?}", &s[..5]);
        assert!((s[1] - 0.096).abs() < 0.01, "{:?}", &s[..5]);
        assert!(s[0] > s[9] && s[9] > s[99]);
    }

    #[test]
    fn the_same_seed_picks_the_same_tenants() {
        let p = Population::new(50, 0.8, &[whale("acme=0.3")]).unwrap();
        let picks = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200).map(|_| p.pick(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(picks(42), picks(42));
        assert_ne!(picks(42), picks(43));
    }
}
