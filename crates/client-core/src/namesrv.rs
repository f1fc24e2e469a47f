//! The name-server list (`namesrvAddr`) and the order it is asked in.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Deserializer};

/// Name servers, asked in turn: each lookup starts at the one that answered
/// last, and moves on past one that failed.
#[derive(Debug)]
pub struct NameServers {
    addrs: Vec<String>,
    next: AtomicUsize,
}

impl NameServers {
    /// The name servers at `addrs` (`host:port` each).
    pub fn new(addrs: Vec<String>) -> Self {
        Self {
            addrs,
            next: AtomicUsize::new(0),
        }
    }

    /// Every address, in configuration order.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// Every address once, starting with the one to ask first.
    pub fn in_turn(&self) -> impl Iterator<Item = (usize, &str)> {
        let n = self.addrs.len();
        let first = self.next.load(Ordering::Relaxed);
        (0..n).map(move |i| {
            let index = (first + i) % n;
            (index, self.addrs[index].as_str())
        })
    }

    /// The name server at `index` answered: ask it first next time.
    pub fn answered(&self, index: usize) {
        self.next.store(index, Ordering::Relaxed);
    }

    /// The name server at `index` failed: start after it next time.
    pub fn failed(&self, index: usize) {
        if !self.addrs.is_empty() {
            self.next
                .store((index + 1) % self.addrs.len(), Ordering::Relaxed);
        }
    }
}

/// Addresses of a `namesrvAddr` string: `host:port` separated by `;` (as
/// RocketMQ writes them) or `,`; blanks are skipped.
pub fn split_addrs(text: &str) -> Vec<String> {
    text.split([';', ','])
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Deserializes `namesrvAddr` from a list of addresses or from one string
/// as [`split_addrs`] reads it (`deserialize_with`).
///
/// # Errors
/// Neither a string nor a list of strings.
pub fn addr_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum TextOrList {
        Text(String),
        List(Vec<String>),
    }
    Ok(match TextOrList::deserialize(d)? {
        TextOrList::Text(t) => split_addrs(&t),
        TextOrList::List(l) => l,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_on_either_separator() {
        assert_eq!(split_addrs(" a:1; b:2 ,c:3;;"), ["a:1", "b:2", "c:3"]);
        assert!(split_addrs(" ; ").is_empty());
    }

    #[test]
    fn the_list_deserializes_from_a_string_or_a_list() {
        #[derive(Deserialize)]
        struct C {
            #[serde(deserialize_with = "addr_list")]
            a: Vec<String>,
        }
        let text: C = serde_json::from_str(r#"{"a":"x:1;y:2"}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text.a, ["x:1", "y:2"]);
        let list: C = serde_json::from_str(r#"{"a":["x:1"]}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(list.a, ["x:1"]);
    }

    #[test]
    fn lookups_start_at_the_last_server_that_answered() {
        let ns = NameServers::new(vec!["a".into(), "b".into(), "c".into()]);
        let order = |ns: &NameServers| ns.in_turn().map(|(_, a)| a.to_owned()).collect::<Vec<_>>();
        assert_eq!(order(&ns), ["a", "b", "c"]);
        ns.failed(0);
        assert_eq!(order(&ns), ["b", "c", "a"]);
        ns.answered(2);
        assert_eq!(order(&ns), ["c", "a", "b"]);
        NameServers::new(Vec::new()).failed(0);
    }
}
