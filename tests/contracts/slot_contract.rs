//! The key→slot hash is a permanent contract: every golden vector must match bit for bit.

use bookmarks_sharded::sharding::{SLOT_COUNT, ShardKey, Slot};

const GOLDEN: &str = include_str!("../slot-vectors.tsv");

fn golden_vectors() -> Vec<(String, String, u16)> {
    GOLDEN
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "malformed golden line {l:?}");
            (
                cols[0].to_owned(),
                cols[1].to_owned(),
                cols[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_golden_vector_hashes_to_its_pinned_slot() {
    let vectors = golden_vectors();
    assert!(vectors.len() >= 9, "the golden file lost vectors");
    for (kind, key, expected) in vectors {
        let slot = match kind.as_str() {
            "str" => ShardKey::Str(&key).slot(),
            "int" => ShardKey::Int(key.parse().unwrap()).slot(),
            other => panic!("unknown key kind {other:?}"),
        };
        assert_eq!(slot.index(), expected, "{kind} key {key:?}");
    }
}

#[test]
fn byte_keys_hash_like_the_same_text() {
    for key in ["tenant-1", "acme-corp", "", "ünïcödé", "a\u{0}b"] {
        assert_eq!(
            ShardKey::Bytes(key.as_bytes()).slot(),
            ShardKey::Str(key).slot()
        );
    }
}

#[test]
fn integer_keys_and_their_decimal_text_are_different_keys() {
    assert_ne!(ShardKey::Int(42).slot(), ShardKey::Str("42").slot());
}

#[test]
fn extreme_integers_hash_into_the_slot_space() {
    for i in [i64::MIN, i64::MAX, -1, 0] {
        assert!(ShardKey::Int(i).slot().index() < SLOT_COUNT);
    }
}

#[test]
fn slot_constructor_rejects_indices_past_the_last_slot() {
    assert_eq!(Slot::new(16383).map(Slot::index), Some(16383));
    assert!(Slot::new(16384).is_none());
    assert_eq!(Slot::all().count(), 16384);
}
