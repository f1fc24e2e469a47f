//! What a request does to a resource.

use std::{fmt, str::FromStr};

use crate::AuthError;

/// An action of ACL 2.0. `All` in a policy entry covers every action;
/// `Any` in a requirement is met by an entry with any action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Every action.
    All,
    /// Any one action.
    Any,
    /// Send messages.
    Pub,
    /// Consume messages.
    Sub,
    /// Create a topic, group, user or policy.
    Create,
    /// Change one.
    Update,
    /// Delete one.
    Delete,
    /// Read one's configuration or state.
    Get,
    /// List them.
    List,
}

impl Action {
    /// The action's name as RocketMQ writes it.
    pub fn name(self) -> &'static str {
        match self {
            Action::All => "All",
            Action::Any => "Any",
            Action::Pub => "Pub",
            Action::Sub => "Sub",
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Delete => "Delete",
            Action::Get => "Get",
            Action::List => "List",
        }
    }

    const EVERY: [Action; 9] = [
        Action::All,
        Action::Any,
        Action::Pub,
        Action::Sub,
        Action::Create,
        Action::Update,
        Action::Delete,
        Action::Get,
        Action::List,
    ];
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Action {
    type Err = AuthError;

    /// Reads an action name, ignoring case.
    fn from_str(s: &str) -> Result<Self, AuthError> {
        let s = s.trim();
        Action::EVERY
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                AuthError::Invalid(format!(
                    "unknown action {s:?}; allowed: All, Pub, Sub, Create, Update, Delete, Get, List"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_read_case_blind_and_unknown_ones_are_named() {
        assert_eq!("pub".parse::<Action>().unwrap(), Action::Pub);
        assert_eq!(" SUB ".parse::<Action>().unwrap(), Action::Sub);
        for a in Action::EVERY {
            assert_eq!(a.name().parse::<Action>().unwrap(), a);
        }
        let err = "publish".parse::<Action>().unwrap_err().to_string();
        assert!(err.contains("\"publish\""), "{err}");
    }
}
