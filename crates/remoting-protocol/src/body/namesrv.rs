//! Bodies of the name server's administration answers: the topic lists of
//! `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206) and `GET_TOPICS_BY_CLUSTER`
//! (224). The key-value answers of `GET_KVLIST_BY_NAMESPACE` (219) are a
//! [`super::KvTable`].
//!
//! Written with [`super::to_fastjson`] (fields sorted by name, an absent
//! `brokerAddr` left out) and read leniently (see [`super::lenient`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize};

use super::lenient::{list, string};

fn string_set<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<String>, D::Error> {
    #[derive(Deserialize)]
    struct Name(#[serde(deserialize_with = "string")] String);
    Ok(list::<D, Name>(d)?.into_iter().map(|n| n.0).collect())
}

/// A set of topic names, sorted (RocketMQ's `TopicList`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    /// Address of the broker the list is about; absent in the name server's
    /// answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    /// The topic names.
    #[serde(deserialize_with = "string_set")]
    pub topic_list: BTreeSet<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_fastjson};

    fn list_of(names: &[&str]) -> TopicList {
        TopicList {
            broker_addr: None,
            topic_list: names.iter().map(|&n| n.to_owned()).collect(),
        }
    }

    #[test]
    fn topic_list_golden_encoding() {
        let list = list_of(&["TopicB", "%RETRY%g", "TopicA"]);
        assert_eq!(
            std::str::from_utf8(&to_fastjson(&list)).unwrap(),
            r#"{"topicList":["%RETRY%g","TopicA","TopicB"]}"#
        );
        assert_eq!(
            std::str::from_utf8(&to_fastjson(&TopicList::default())).unwrap(),
            r#"{"topicList":[]}"#
        );
        let with_addr = TopicList {
            broker_addr: Some("10.0.0.1:10911".into()),
            ..list_of(&["T"])
        };
        assert_eq!(
            std::str::from_utf8(&to_fastjson(&with_addr)).unwrap(),
            r#"{"brokerAddr":"10.0.0.1:10911","topicList":["T"]}"#
        );
    }

    #[test]
    fn topic_list_reads_java_output_leniently() {
        let java = br#"{"topicList":["B","A","B"]}"#;
        assert_eq!(from_json::<TopicList>(java).unwrap(), list_of(&["A", "B"]));
        let odd = br#"{"brokerAddr":null,"topicList":[1,"x"],"other":true}"#;
        assert_eq!(from_json::<TopicList>(odd).unwrap(), list_of(&["1", "x"]));
        assert_eq!(
            from_json::<TopicList>(br#"{"topicList":null}"#).unwrap(),
            TopicList::default()
        );
        assert!(from_json::<TopicList>(br#"{"topicList":{"a":1}}"#).is_err());
    }
}
