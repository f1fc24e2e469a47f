//! Tests of one IndexFile: RocketMQ's hash, the bytes at their documented
//! offsets, chains of colliding keys and a full file.
#![allow(clippy::unwrap_used)]

use super::*;

const GEOMETRY: Geometry = Geometry {
    slots: 1000,
    entries: 4000,
};

/// Java's `String.hashCode` written out as its definition,
/// `s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1]` over UTF-16 units, in
/// 64-bit arithmetic and cut to 32 bits at the end.
fn java_hash_code(s: &str) -> i32 {
    let units: Vec<u16> = s.encode_utf16().collect();
    let n = units.len();
    let mut sum: u64 = 0;
    for (i, &u) in units.iter().enumerate() {
        let mut power: u64 = 1;
        for _ in 0..(n - 1 - i) {
            power = power.wrapping_mul(31);
        }
        sum = sum.wrapping_add(u64::from(u).wrapping_mul(power));
    }
    sum as u32 as i32
}

#[test]
fn the_key_hash_is_javas_string_hash_code_made_non_negative() {
    // Known values of Java's "hello".hashCode() and "TopicTest#key1".hashCode().
    assert_eq!(java_hash_code("hello"), 99_162_322);
    assert_eq!(java_hash_code("TopicTest#key1"), -1_655_984_460);
    // Math.abs of a negative hash.
    assert_eq!(key_hash("TopicTest", "key1"), 1_655_984_460);
    // Non-ASCII keys hash by UTF-16 unit.
    assert_eq!(
        key_hash("TopicTest", "ü"),
        java_hash_code("TopicTest#ü").abs()
    );
    assert_eq!(key_hash("TopicTest", "ü"), 1_247_014_714);
    // "T#ajvakuzm".hashCode() is Integer.MIN_VALUE, whose Math.abs is
    // negative: taken as 0.
    assert_eq!(java_hash_code("T#ajvakuzm"), i32::MIN);
    assert_eq!(key_hash("T", "ajvakuzm"), 0);
}

fn get_i32_at(path: &Path, at: usize) -> i32 {
    let raw = std::fs::read(path).unwrap();
    i32::from_be_bytes(raw[at..at + 4].try_into().unwrap())
}

fn get_i64_at(path: &Path, at: usize) -> i64 {
    let raw = std::fs::read(path).unwrap();
    i64::from_be_bytes(raw[at..at + 8].try_into().unwrap())
}

#[test]
fn header_slots_and_entries_sit_at_rocketmq_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20240101000000000");
    let file = IndexFile::create(&path, GEOMETRY, None).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        40 + 1000 * 4 + 4000 * 20
    );
    // A new file: indexCount 1, nothing else.
    assert_eq!(get_i32_at(&path, 36), 1);
    let hash = key_hash("TopicTest", "key1");
    {
        let mut w = file.writer();
        w.put(hash, 4_096, 1_700_000_000_000).unwrap();
        w.put(hash, 8_192, 1_700_000_002_500).unwrap();
    }
    file.flush().unwrap();
    // Header.
    assert_eq!(get_i64_at(&path, 0), 1_700_000_000_000, "beginTimestamp");
    assert_eq!(get_i64_at(&path, 8), 1_700_000_002_500, "endTimestamp");
    assert_eq!(get_i64_at(&path, 16), 4_096, "beginPhyOffset");
    assert_eq!(get_i64_at(&path, 24), 8_192, "endPhyOffset");
    assert_eq!(get_i32_at(&path, 32), 1, "hashSlotCount");
    assert_eq!(get_i32_at(&path, 36), 3, "indexCount");
    // The slot holds the newest entry's number.
    let slot = 40 + (hash as usize % 1000) * 4;
    assert_eq!(get_i32_at(&path, slot), 2);
    // Entry 1 at 40 + 1000*4 + 1*20, entry 2 after it, pointing back.
    let e1 = 40 + 4000 + 20;
    assert_eq!(get_i32_at(&path, e1), hash);
    assert_eq!(get_i64_at(&path, e1 + 4), 4_096);
    assert_eq!(get_i32_at(&path, e1 + 12), 0, "timeDiff of the first");
    assert_eq!(get_i32_at(&path, e1 + 16), 0, "no previous entry");
    let e2 = e1 + 20;
    assert_eq!(get_i32_at(&path, e2), hash);
    assert_eq!(get_i64_at(&path, e2 + 4), 8_192);
    assert_eq!(get_i32_at(&path, e2 + 12), 2, "timeDiff in whole seconds");
    assert_eq!(get_i32_at(&path, e2 + 16), 1, "head insertion");
    // Entry 0 is never written.
    assert_eq!(get_i64_at(&path, 40 + 4000 + 4), 0);
    // Read back by a new mapping.
    drop(file);
    let again = IndexFile::open(&path, GEOMETRY).unwrap();
    assert_eq!(again.header().index_count, 3);
    let wrong = Geometry {
        slots: 999,
        entries: 4000,
    };
    assert!(IndexFile::open(&path, wrong).is_err());
}

fn lookup(hash: i32) -> Lookup {
    Lookup {
        hash,
        begin: 0,
        end: i64::MAX,
        min_phy_offset: 0,
        max: 100,
    }
}

fn offsets(file: &IndexFile, l: &Lookup) -> Vec<i64> {
    let mut out = Vec::new();
    file.select(l, &mut out);
    out.iter().map(|h| h.phy_offset).collect()
}

#[test]
fn keys_sharing_a_slot_chain_and_only_their_own_hash_matches() {
    let dir = tempfile::tempdir().unwrap();
    let file = IndexFile::create(&dir.path().join("f"), GEOMETRY, None).unwrap();
    // Two hashes in one slot, a third elsewhere.
    let (a, b, c) = (7, 7 + 1000, 8);
    {
        let mut w = file.writer();
        for (i, h) in [a, b, a, c, b, a].into_iter().enumerate() {
            w.put(h, i as i64 * 100, 1_000_000 + i as i64 * 1000)
                .unwrap();
        }
    }
    let h = file.header();
    assert_eq!(h.hash_slot_count, 2, "slots 7 and 8");
    assert_eq!(offsets(&file, &lookup(a)), [500, 200, 0], "newest first");
    assert_eq!(offsets(&file, &lookup(b)), [400, 100]);
    assert_eq!(offsets(&file, &lookup(c)), [300]);
    assert!(offsets(&file, &lookup(9)).is_empty());
    // The limit, the time range and the minimum offset.
    assert_eq!(
        offsets(
            &file,
            &Lookup {
                max: 2,
                ..lookup(a)
            }
        ),
        [500, 200]
    );
    assert_eq!(
        offsets(
            &file,
            &Lookup {
                begin: 1_001_000,
                end: 1_004_000,
                ..lookup(a)
            }
        ),
        [200]
    );
    assert_eq!(
        offsets(
            &file,
            &Lookup {
                min_phy_offset: 100,
                ..lookup(a)
            }
        ),
        [500, 200]
    );
}

#[test]
fn a_full_file_refuses_further_keys() {
    let dir = tempfile::tempdir().unwrap();
    let small = Geometry {
        slots: 10,
        entries: 4,
    };
    let file = IndexFile::create(&dir.path().join("f"), small, None).unwrap();
    let mut w = file.writer();
    assert_eq!(w.room(), 3, "entry 0 is never used");
    for i in 0..3 {
        w.put(i, i64::from(i), 1).unwrap();
    }
    assert_eq!(w.room(), 0);
    assert!(matches!(w.put(5, 5, 1), Err(PutError::Full)));
    assert_eq!(w.header().index_count, 4);
}

#[test]
fn a_file_after_a_full_one_starts_from_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let before = IndexHeader {
        begin_timestamp: 10,
        end_timestamp: 5_000,
        begin_phy_offset: 0,
        end_phy_offset: 900,
        hash_slot_count: 3,
        index_count: 4000,
    };
    let file = IndexFile::create(&dir.path().join("f"), GEOMETRY, Some(&before)).unwrap();
    let h = file.header();
    assert_eq!(
        (
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.index_count
        ),
        (5_000, 5_000, 900, 900, 1)
    );
    assert!(h.has_indexed(), "the full file's last message is indexed");
    let mut w = file.writer();
    w.put(1, 1_000, 9_000).unwrap();
    let h = *w.header();
    assert_eq!((h.begin_timestamp, h.begin_phy_offset), (9_000, 1_000));
}

#[test]
fn a_damaged_file_neither_loops_nor_reads_past_its_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let hash = key_hash("TopicTest", "key1");
    let other = hash + 1000; // same slot, another key: never a hit
    {
        let file = IndexFile::create(&path, GEOMETRY, None).unwrap();
        let mut w = file.writer();
        w.put(other, 4_096, 1_700_000_000_000).unwrap();
        w.put(other, 8_192, 1_700_000_000_000).unwrap();
        drop(w);
        file.flush().unwrap();
    }
    let mut raw = std::fs::read(&path).unwrap();
    // Entry 1 points forward to entry 2, which points back to 1: a loop.
    let e1 = 40 + 4000 + 20;
    raw[e1 + 16..e1 + 20].copy_from_slice(&2i32.to_be_bytes());
    // And the header claims more entries than the file has.
    raw[36..40].copy_from_slice(&i32::MAX.to_be_bytes());
    std::fs::write(&path, &raw).unwrap();

    let file = IndexFile::open(&path, GEOMETRY).unwrap();
    assert_eq!(file.header().index_count, 4000);
    assert_eq!(offsets(&file, &lookup(hash)), Vec::<i64>::new());
    assert_eq!(offsets(&file, &lookup(other)), [8_192, 4_096]);
    // A slot naming an entry past the end is no entry.
    let slot = 40 + (hash as usize % 1000) * 4;
    raw[slot..slot + 4].copy_from_slice(&4500i32.to_be_bytes());
    std::fs::write(&path, &raw).unwrap();
    let file = IndexFile::open(&path, GEOMETRY).unwrap();
    assert_eq!(offsets(&file, &lookup(hash)), Vec::<i64>::new());
}
