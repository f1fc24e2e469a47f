//! Tag filters of POP consumers: `*` (or nothing) for every message, or a
//! list of tags joined by `||`, as RocketMQ's TAG filter expressions.
//!
//! The ConsumeQueue keeps each message's tag hash, so most messages are
//! judged without reading them; a message whose hash matches is then checked
//! against its actual `TAGS` property, because different tags may share a
//! hash.

use std::collections::{BTreeSet, HashSet};

use super::PopError;

/// Most tags one expression may list.
const MAX_TAGS: usize = 1024;

/// A parsed TAG filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    /// `None` accepts everything; otherwise the accepted tags and their hashes.
    tags: Option<(BTreeSet<String>, HashSet<i64>)>,
}

impl TagFilter {
    /// The filter that accepts every message.
    pub fn all() -> Self {
        Self { tags: None }
    }

    /// Parses `*`, an empty or blank string (both: every message) or
    /// `a||b||c` (messages tagged with one of them; blanks around tags are
    /// ignored, and a `*` among them accepts everything).
    ///
    /// # Errors
    /// [`PopError::IllegalFilter`] when the list names no tag or more than
    /// 1024 tags.
    pub fn parse(expression: &str) -> Result<Self, PopError> {
        let expression = expression.trim();
        if expression.is_empty() || expression == "*" {
            return Ok(Self::all());
        }
        let mut tags = BTreeSet::new();
        for tag in expression.split("||").map(str::trim) {
            if tag == "*" {
                return Ok(Self::all());
            }
            if !tag.is_empty() {
                tags.insert(tag.to_owned());
            }
        }
        if tags.is_empty() {
            return Err(PopError::IllegalFilter(format!(
                "{expression:?} names no tag (use \"*\" for all or \"a||b\" for a list)"
            )));
        }
        if tags.len() > MAX_TAGS {
            return Err(PopError::IllegalFilter(format!(
                "{} tags listed, at most {MAX_TAGS} allowed",
                tags.len()
            )));
        }
        let codes = tags.iter().map(|t| message_model::tag_hash(t)).collect();
        Ok(Self {
            tags: Some((tags, codes)),
        })
    }

    /// Whether the filter accepts every message.
    pub fn is_all(&self) -> bool {
        self.tags.is_none()
    }

    /// Whether a message with these tags (its `TAGS` property) passes.
    pub fn matches(&self, tags: Option<&str>) -> bool {
        match &self.tags {
            None => true,
            Some((set, _)) => tags.is_some_and(|t| set.contains(t)),
        }
    }

    /// Whether a ConsumeQueue entry's tag hash may belong to an accepted
    /// message (a hash match still needs [`TagFilter::matches`]).
    pub fn matches_code(&self, tags_code: i64) -> bool {
        match &self.tags {
            None => true,
            Some((_, codes)) => codes.contains(&tags_code),
        }
    }
}

impl Default for TagFilter {
    fn default() -> Self {
        Self::all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_blank_accept_everything() {
        for expr in ["*", "", "  ", " * ", "a||*"] {
            let f = TagFilter::parse(expr).unwrap();
            assert!(f.is_all(), "{expr:?}");
            assert!(f.matches(None));
            assert!(f.matches(Some("x")));
            assert!(f.matches_code(12345));
        }
    }

    #[test]
    fn tag_lists_accept_only_their_tags() {
        let f = TagFilter::parse("TagA || TagB||").unwrap();
        assert!(!f.is_all());
        assert!(f.matches(Some("TagA")));
        assert!(f.matches(Some("TagB")));
        assert!(!f.matches(Some("TagC")));
        assert!(!f.matches(None));
        assert!(f.matches_code(message_model::tag_hash("TagA")));
        assert!(!f.matches_code(message_model::tag_hash("TagC")));
    }

    #[test]
    fn empty_lists_are_refused() {
        for expr in ["||", " || || "] {
            let err = TagFilter::parse(expr).unwrap_err();
            assert!(err.to_string().contains("names no tag"), "{err}");
        }
        let many: Vec<String> = (0..=MAX_TAGS).map(|i| format!("t{i}")).collect();
        let err = TagFilter::parse(&many.join("||")).unwrap_err();
        assert!(err.to_string().contains("at most"), "{err}");
    }
}
