//! Migrating from RocketMQ: its `broker.conf` (Java properties: `key=value`
//! lines) loads as it is. A key that RocketMQ's broker knows but Sluice does
//! not implement is accepted with a warning that names it; a key that
//! neither knows is an error that suggests the nearest known key.

use std::{collections::BTreeSet, sync::LazyLock};

/// RocketMQ's broker settings by name.
static ROCKETMQ_KEYS: LazyLock<BTreeSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../data/rocketmq-keys.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// Whether RocketMQ's broker has a setting of this name.
pub fn is_rocketmq_key(key: &str) -> bool {
    ROCKETMQ_KEYS.contains(key)
}

/// What an unknown key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// A RocketMQ setting Sluice does not implement: accepted, no effect.
    RocketMq,
    /// Neither Sluice's nor RocketMQ's; the nearest known key, if any is
    /// close.
    Typo(Option<String>),
}

/// Classifies a key that is not one of Sluice's (`known`).
pub fn classify(key: &str, known: &BTreeSet<String>) -> Unknown {
    if is_rocketmq_key(key) {
        return Unknown::RocketMq;
    }
    let candidates = known
        .iter()
        .map(String::as_str)
        .chain(ROCKETMQ_KEYS.iter().copied());
    Unknown::Typo(nearest(key, candidates))
}

/// The candidate closest to `key` (case-insensitive edit distance), if it is
/// within a third of the key's length (at least 2 edits).
fn nearest<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let wanted = key.to_ascii_lowercase();
    let limit = (key.len() / 3).max(2);
    candidates
        .map(|c| (distance(&wanted, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c.to_owned())
}

/// Levenshtein distance over bytes.
fn distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Reads a Java properties file as RocketMQ's `broker.conf` is written:
/// `key=value`, `key: value` or `key value` lines, `#` and `!` comments,
/// a trailing `\` continuing a line. Returns the pairs in order.
///
/// # Errors
/// A line with a key but no separator and no value, naming the line.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut first_line = 0;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        if logical.is_empty() {
            first_line = n + 1;
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
        }
        match line.strip_suffix('\\') {
            Some(continued) => {
                logical.push_str(continued);
                continue;
            }
            None => logical.push_str(line),
        }
        let entry = std::mem::take(&mut logical);
        let entry = entry.trim();
        let split = entry
            .find(['=', ':'])
            .map(|i| (&entry[..i], &entry[i + 1..]))
            .or_else(|| entry.split_once(char::is_whitespace));
        match split {
            Some((key, value)) if !key.trim().is_empty() => {
                out.push((key.trim().to_owned(), value.trim().to_owned()));
            }
            _ => return Err(format!("line {first_line}: {entry:?} is not `key=value`")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rocketmq_broker_conf_reads_as_java_reads_it() {
        let text = "# RocketMQ\nbrokerClusterName = DefaultCluster\nbrokerName=broker-a\n\
                    ! old comment\n\n  deleteWhen: 04\nbrokerRole ASYNC_MASTER\n\
                    namesrvAddr=10.0.0.1:9876;\\\n    10.0.0.2:9876\n";
        let pairs = parse_properties(text).unwrap();
        assert_eq!(
            pairs,
            [
                ("brokerClusterName", "DefaultCluster"),
                ("brokerName", "broker-a"),
                ("deleteWhen", "04"),
                ("brokerRole", "ASYNC_MASTER"),
                ("namesrvAddr", "10.0.0.1:9876;10.0.0.2:9876"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert!(parse_properties("lonely\n").unwrap_err().contains("line 1"));
    }

    #[test]
    fn unknown_keys_are_rocketmq_settings_or_typos_with_a_suggestion() {
        let known: BTreeSet<String> = ["flushDiskType", "listenPort"].map(str::to_owned).into();
        assert_eq!(classify("brokerRole", &known), Unknown::RocketMq);
        assert_eq!(classify("aclEnable", &known), Unknown::RocketMq);
        assert_eq!(
            classify("flushDiskTyp", &known),
            Unknown::Typo(Some("flushDiskType".into()))
        );
        assert_eq!(
            classify("listenport", &known),
            Unknown::Typo(Some("listenPort".into()))
        );
        assert_eq!(
            classify("brokerRoel", &known),
            Unknown::Typo(Some("brokerRole".into()))
        );
        assert_eq!(classify("zzzzzzzzzz", &known), Unknown::Typo(None));
    }

    #[test]
    fn edit_distance() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }
}
