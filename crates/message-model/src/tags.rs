//! The tag hash stored in every ConsumeQueue entry.

/// Returns the hash of a tag exactly as Java's `String.hashCode()` computes
/// it (31-based over UTF-16 code units, wrapping 32-bit arithmetic),
/// sign-extended to 64 bits, which is what RocketMQ stores as `tagsCode`.
pub fn tag_hash(tag: &str) -> i64 {
    let mut h: i32 = 0;
    for unit in tag.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    i64::from(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_hash_matches_java_string_hash_code() {
        // Values of "".hashCode(), "TagA".hashCode() and "hello".hashCode() in Java.
        assert_eq!(tag_hash(""), 0);
        assert_eq!(tag_hash("TagA"), 2_598_919);
        assert_eq!(tag_hash("hello"), 99_162_322);
    }

    #[test]
    fn tag_hash_wraps_and_sign_extends() {
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE in Java.
        assert_eq!(tag_hash("polygenelubricants"), i64::from(i32::MIN));
    }

    #[test]
    fn tag_hash_counts_utf16_units_not_bytes() {
        // U+1F600 is a surrogate pair: 0xD83D, 0xDE00.
        assert_eq!(tag_hash("😀"), 0xD83D * 31 + 0xDE00);
    }
}
