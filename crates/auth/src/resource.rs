//! What a request touches, and the patterns policy entries name.
//!
//! A resource is written `Type:name`: `Topic:orders`, `Group:billing`,
//! `Cluster:DefaultCluster`. A pattern is a resource, `Type:prefix*` (every
//! name with that prefix), `Type:*` (every name of that type) or `*`
//! (everything).

use std::{cmp::Ordering, fmt, str::FromStr};

use crate::AuthError;

/// The kinds of resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// A cluster (the broker's `brokerClusterName`): its configuration,
    /// its users and policies.
    Cluster,
    /// A namespace.
    Namespace,
    /// A topic.
    Topic,
    /// A consumer or producer group.
    Group,
}

impl ResourceType {
    /// The type's name as RocketMQ writes it.
    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Cluster => "Cluster",
            ResourceType::Namespace => "Namespace",
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            ResourceType::Cluster,
            ResourceType::Namespace,
            ResourceType::Topic,
            ResourceType::Group,
        ]
        .into_iter()
        .find(|t| t.name().eq_ignore_ascii_case(s))
    }
}

/// One named resource a request touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// Its type.
    pub kind: ResourceType,
    /// Its name.
    pub name: String,
}

impl Resource {
    /// A topic.
    pub fn topic(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceType::Topic,
            name: name.into(),
        }
    }

    /// A group.
    pub fn group(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceType::Group,
            name: name.into(),
        }
    }

    /// A cluster.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceType::Cluster,
            name: name.into(),
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.name)
    }
}

/// The resources a policy entry covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// Everything (`*`).
    Everything,
    /// Every name of a type (`Topic:*`).
    AnyOf(ResourceType),
    /// Names of a type that start with a prefix (`Topic:order*`).
    Prefix(ResourceType, String),
    /// One resource (`Topic:orders`).
    Literal(Resource),
}

impl Pattern {
    /// Whether the pattern covers `resource`.
    pub fn covers(&self, resource: &Resource) -> bool {
        match self {
            Pattern::Everything => true,
            Pattern::AnyOf(kind) => *kind == resource.kind,
            Pattern::Prefix(kind, prefix) => {
                *kind == resource.kind && resource.name.starts_with(prefix.as_str())
            }
            Pattern::Literal(r) => r == resource,
        }
    }

    /// Orders patterns from the most specific: a literal, then prefixes
    /// (longer first), then a whole type, then everything.
    pub fn specificity(&self, other: &Pattern) -> Ordering {
        fn rank(p: &Pattern) -> (u8, usize) {
            match p {
                Pattern::Literal(_) => (0, 0),
                Pattern::Prefix(_, prefix) => (1, usize::MAX - prefix.len()),
                Pattern::AnyOf(_) => (2, 0),
                Pattern::Everything => (3, 0),
            }
        }
        rank(self).cmp(&rank(other))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Everything => f.write_str("*"),
            Pattern::AnyOf(kind) => write!(f, "{}:*", kind.name()),
            Pattern::Prefix(kind, prefix) => write!(f, "{}:{prefix}*", kind.name()),
            Pattern::Literal(r) => r.fmt(f),
        }
    }
}

impl FromStr for Pattern {
    type Err = AuthError;

    /// Reads `*`, `Type:*`, `Type:prefix*` or `Type:name`; the type is
    /// read case-blind.
    fn from_str(s: &str) -> Result<Self, AuthError> {
        let s = s.trim();
        if s == "*" {
            return Ok(Pattern::Everything);
        }
        let invalid = || {
            AuthError::Invalid(format!(
                "bad resource {s:?}: expected *, or Type:name, Type:prefix* or Type:* with Type one of Cluster, Namespace, Topic, Group"
            ))
        };
        let (kind, name) = s.split_once(':').ok_or_else(invalid)?;
        let kind = ResourceType::parse(kind.trim()).ok_or_else(invalid)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(invalid());
        }
        Ok(match name.strip_suffix('*') {
            Some("") => Pattern::AnyOf(kind),
            Some(prefix) => Pattern::Prefix(kind, prefix.to_owned()),
            None => Pattern::Literal(Resource {
                kind,
                name: name.to_owned(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        s.parse().unwrap()
    }

    #[test]
    fn patterns_cover_what_they_name() {
        let orders = Resource::topic("orders");
        assert!(p("Topic:orders").covers(&orders));
        assert!(p("topic:orders").covers(&orders));
        assert!(p("Topic:ord*").covers(&orders));
        assert!(p("Topic:*").covers(&orders));
        assert!(p("*").covers(&orders));
        assert!(!p("Topic:order").covers(&orders));
        assert!(!p("Topic:ordersX*").covers(&orders));
        assert!(!p("Group:orders").covers(&orders));
        assert!(!p("Group:*").covers(&orders));
        assert!(p("Cluster:c1").covers(&Resource::cluster("c1")));
    }

    #[test]
    fn patterns_print_as_they_are_read() {
        for s in ["*", "Topic:*", "Group:bill*", "Cluster:DefaultCluster"] {
            assert_eq!(p(s).to_string(), s);
        }
    }

    #[test]
    fn bad_patterns_are_named() {
        for bad in ["", "orders", "Queue:x", "Topic:", ":x"] {
            let err = bad.parse::<Pattern>().unwrap_err().to_string();
            assert!(err.contains(&format!("{:?}", bad.trim())), "{err}");
        }
    }

    #[test]
    fn literals_are_more_specific_than_longer_prefixes_than_shorter_ones() {
        let mut all = [
            p("*"),
            p("Topic:o*"),
            p("Topic:orders"),
            p("Topic:*"),
            p("Topic:ord*"),
        ];
        all.sort_by(Pattern::specificity);
        let names: Vec<String> = all.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            ["Topic:orders", "Topic:ord*", "Topic:o*", "Topic:*", "*"]
        );
    }
}
