//! What the load does: the operation mix
//! (`list=68,get=10,create=14,update=5,delete=1,collection=1,viewer=1`), parsed once, and
//! the weighted pick of one operation per request.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

/// The mix `--mix` defaults to.
pub const DEFAULT_MIX: &str = "list=68,get=10,create=14,update=5,delete=1,collection=1,viewer=1";

/// One kind of API request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `GET /api/bookmarks?limit=20`, a quarter of them in one of the tenant's collections
    List,
    /// `GET /api/bookmarks/{id}`
    Get,
    /// `POST /api/bookmarks`, filed in one of the tenant's collections or none, with
    /// random states
    Create,
    /// `PATCH /api/bookmarks/{id}`: a new title, collection and states
    Update,
    /// `DELETE /api/bookmarks/{id}`
    Delete,
    /// `POST /api/collections`, at the top or inside one of the tenant's collections
    Collection,
    /// `POST /api/bookmarks` with the tenant's viewer key: refused (403), and never stored
    Viewer,
    /// `POST /api/bookmarks/batch`: a create and an update of a known bookmark (when the
    /// tenant has one) in one transaction, both applied or neither
    Batch,
}

impl Op {
    pub const ALL: [Op; 8] = [
        Op::List,
        Op::Get,
        Op::Create,
        Op::Update,
        Op::Delete,
        Op::Collection,
        Op::Viewer,
        Op::Batch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::List => "list",
            Op::Get => "get",
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Collection => "collection",
            Op::Viewer => "viewer",
            Op::Batch => "batch",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Relative weights of the operations; they need not sum to 100.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    weights: [u32; 8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    #[error("entry {0:?} is not OP=WEIGHT (e.g. list=70)")]
    Shape(String),
    #[error(
        "entry {0:?} names no operation; use list, get, create, update, delete, collection, viewer or batch"
    )]
    UnknownOp(String),
    #[error("entry {0:?} has a weight that is not a whole number between 0 and 1000000")]
    Weight(String),
    #[error("entry {0:?} repeats an operation")]
    Repeated(String),
    #[error("every weight is 0; at least one operation needs a positive weight")]
    AllZero,
}

impl FromStr for Mix {
    type Err = MixError;

    fn from_str(s: &str) -> Result<Self, MixError> {
        let mut weights = [0u32; 8];
        let mut seen = [false; 8];
        for entry in s.split(',').map(str::trim) {
            let (op, weight) = entry
                .split_once('=')
                .ok_or_else(|| MixError::Shape(entry.to_owned()))?;
            let i = Op::ALL
                .iter()
                .position(|o| o.name() == op.trim())
                .ok_or_else(|| MixError::UnknownOp(entry.to_owned()))?;
            let w: u32 = weight
                .trim()
                .parse()
                .ok()
                .filter(|w| *w <= 1_000_000)
                .ok_or_else(|| MixError::Weight(entry.to_owned()))?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(MixError::Repeated(entry.to_owned()));
            }
            weights[i] = w;
        }
        if weights.iter().all(|w| *w == 0) {
            return Err(MixError::AllZero);
        }
        Ok(Mix { weights })
    }
}

impl Default for Mix {
    fn default() -> Self {
        DEFAULT_MIX.parse().expect("the default mix parses")
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = Op::ALL
            .iter()
            .zip(self.weights)
            .filter(|(_, w)| *w > 0)
            .map(|(op, w)| format!("{op}={w}"))
            .collect();
        f.write_str(&entries.join(","))
    }
}

impl serde::Serialize for Mix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Mix {
    /// The weight of `op`.
    pub fn weight(&self, op: Op) -> u32 {
        self.weights[op as usize]
    }

    /// One operation, with probability proportional to its weight.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> Op {
        let total: u64 = self.weights.iter().map(|w| u64::from(*w)).sum();
        let mut x = rng.random_range(0..total);
        for (op, w) in Op::ALL.iter().zip(self.weights) {
            if x < u64::from(w) {
                return *op;
            }
            x -= u64::from(w);
        }
        unreachable!("x < total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn the_default_mix_parses_and_prints_back() {
        let mix = Mix::default();
        assert_eq!(mix.weight(Op::List), 68);
        assert_eq!(mix.weight(Op::Delete), 1);
        assert_eq!(mix.weight(Op::Viewer), 1);
        assert_eq!(mix.to_string(), DEFAULT_MIX);
    }

    #[test]
    fn unnamed_operations_get_no_weight_and_weights_need_not_sum_to_100() {
        let mix: Mix = " list = 3 , create=1".parse().unwrap();
        assert_eq!(mix.weight(Op::List), 3);
        assert_eq!(mix.weight(Op::Get), 0);
        assert_eq!(mix.to_string(), "list=3,create=1");
    }

    #[test]
    fn a_bad_entry_is_named_in_the_error() {
        let cases = [
            ("list=70,gett=10", MixError::UnknownOp("gett=10".into())),
            ("list=70,get", MixError::Shape("get".into())),
            ("list=seventy", MixError::Weight("list=seventy".into())),
            ("list=-1", MixError::Weight("list=-1".into())),
            ("list=1,list=2", MixError::Repeated("list=2".into())),
            ("list=0,get=0", MixError::AllZero),
            ("", MixError::Shape("".into())),
            ("list=1,", MixError::Shape("".into())),
        ];
        for (input, expected) in cases {
            assert_eq!(input.parse::<Mix>().unwrap_err(), expected, "{input}");
        }
        let message = "list=70,gett=10".parse::<Mix>().unwrap_err().to_string();
        assert!(message.contains("gett=10"), "{message}");
    }

    #[test]
    fn picks_follow_the_weights() {
        let mix: Mix = "list=6,create=3,delete=1".parse().unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            *counts.entry(mix.pick(&mut rng)).or_insert(0u32) += 1;
        }
        let share = |op| f64::from(counts.get(&op).copied().unwrap_or(0)) / 100_000.0;
        assert!((share(Op::List) - 0.6).abs() < 0.01);
        assert!((share(Op::Create) - 0.3).abs() < 0.01);
        assert!((share(Op::Delete) - 0.1).abs() < 0.01);
        assert_eq!(share(Op::Get), 0.0);
    }
}
