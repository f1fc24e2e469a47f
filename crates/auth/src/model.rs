//! Users and their policies, checked and ready for decisions; read from
//! and written as the admin bodies ([`UserInfo`], [`AclInfo`]).

use std::{fmt, net::IpAddr, str::FromStr};

use ipnet::IpNet;
use remoting_protocol::body::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};

use crate::{Action, AuthError, Pattern};

/// A user's kind: a super user may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserType {
    /// Passes every authorization check.
    Super,
    /// Needs a policy for what it does.
    Normal,
}

/// The prefix of a user's subject name.
pub const USER_SUBJECT_PREFIX: &str = "User:";

/// A user: its name is the access key, its password the secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    /// Name (access key).
    pub username: String,
    /// Password (secret key).
    pub password: String,
    /// Super or normal.
    pub user_type: UserType,
    /// A disabled user's requests are refused.
    pub enabled: bool,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .field("user_type", &self.user_type)
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl User {
    /// The subject its policies are filed under, `User:<name>`.
    pub fn subject(&self) -> String {
        format!("{USER_SUBJECT_PREFIX}{}", self.username)
    }

    /// A new user from a create request's body: name and password are
    /// required; the type defaults to normal and the status to enabled.
    ///
    /// # Errors
    /// A field is missing or not an allowed value.
    pub fn from_info(info: &UserInfo) -> Result<Self, AuthError> {
        let username = required(info.username.as_deref(), "username")?;
        check_name(username)?;
        let password = required(info.password.as_deref(), "password")?;
        check_password(password)?;
        Ok(Self {
            username: username.to_owned(),
            password: password.to_owned(),
            user_type: user_type(info.user_type.as_deref())?.unwrap_or(UserType::Normal),
            enabled: user_status(info.user_status.as_deref())?.unwrap_or(true),
        })
    }

    /// This user with the fields an update request's body gives changed.
    ///
    /// # Errors
    /// A field given is not an allowed value.
    pub fn updated(&self, info: &UserInfo) -> Result<Self, AuthError> {
        let mut user = self.clone();
        if let Some(password) = info.password.as_deref().filter(|p| !p.is_empty()) {
            check_password(password)?;
            password.clone_into(&mut user.password);
        }
        if let Some(kind) = user_type(info.user_type.as_deref())? {
            user.user_type = kind;
        }
        if let Some(enabled) = user_status(info.user_status.as_deref())? {
            user.enabled = enabled;
        }
        Ok(user)
    }

    /// The user as an admin body; the password only when `with_password`.
    pub fn to_info(&self, with_password: bool) -> UserInfo {
        UserInfo {
            username: Some(self.username.clone()),
            password: with_password.then(|| self.password.clone()),
            user_type: Some(
                match self.user_type {
                    UserType::Super => "Super",
                    UserType::Normal => "Normal",
                }
                .to_owned(),
            ),
            user_status: Some(if self.enabled { "enable" } else { "disable" }.to_owned()),
        }
    }
}

fn required<'a>(value: Option<&'a str>, key: &str) -> Result<&'a str, AuthError> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| AuthError::Invalid(format!("{key} is required")))
}

/// HMAC pads short keys with zero bytes, so a password with a NUL byte
/// would share its signatures with another; such passwords are refused.
fn check_password(password: &str) -> Result<(), AuthError> {
    if password.contains('\0') {
        Err(AuthError::Invalid(
            "a password may not contain NUL characters".into(),
        ))
    } else {
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), AuthError> {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        && name.len() <= 64
    {
        Ok(())
    } else {
        Err(AuthError::Invalid(format!(
            "bad username {name:?}: up to 64 letters, digits and - _ . @"
        )))
    }
}

fn user_type(value: Option<&str>) -> Result<Option<UserType>, AuthError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("super") => Ok(Some(UserType::Super)),
        Some(v) if v.eq_ignore_ascii_case("normal") => Ok(Some(UserType::Normal)),
        Some(v) => Err(AuthError::Invalid(format!(
            "bad userType {v:?}: Super or Normal"
        ))),
    }
}

fn user_status(value: Option<&str>) -> Result<Option<bool>, AuthError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("enable") => Ok(Some(true)),
        Some(v) if v.eq_ignore_ascii_case("disable") => Ok(Some(false)),
        Some(v) => Err(AuthError::Invalid(format!(
            "bad userStatus {v:?}: enable or disable"
        ))),
    }
}

/// Which of a subject's policies an entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyType {
    /// Set by an operator; consulted first.
    Custom,
    /// Consulted only when no custom entry matches.
    Default,
}

impl PolicyType {
    /// The type's name as RocketMQ writes it.
    pub fn name(self) -> &'static str {
        match self {
            PolicyType::Custom => "Custom",
            PolicyType::Default => "Default",
        }
    }
}

impl FromStr for PolicyType {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Self, AuthError> {
        match s.trim() {
            v if v.eq_ignore_ascii_case("custom") || v.is_empty() => Ok(PolicyType::Custom),
            v if v.eq_ignore_ascii_case("default") => Ok(PolicyType::Default),
            v => Err(AuthError::Invalid(format!(
                "bad policyType {v:?}: Custom or Default"
            ))),
        }
    }
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The entry grants its actions.
    Allow,
    /// The entry refuses them.
    Deny,
}

/// One policy entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The custom or default policy it is part of.
    pub policy: PolicyType,
    /// The resources it covers.
    pub resource: Pattern,
    /// The actions it covers.
    pub actions: Vec<Action>,
    /// The source addresses it applies to; empty for any.
    pub source_ips: Vec<IpNet>,
    /// Allow or deny.
    pub decision: Decision,
}

impl Entry {
    /// Whether the entry covers one of `wanted` (any one suffices).
    pub fn covers_action(&self, wanted: &[Action]) -> bool {
        self.actions.contains(&Action::All)
            || wanted
                .iter()
                .any(|w| *w == Action::Any || self.actions.contains(w))
    }

    /// Whether the entry applies to requests from `ip`.
    pub fn covers_source(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.source_ips.is_empty() || self.source_ips.iter().any(|net| net.contains(&ip))
    }

    fn from_info(policy: PolicyType, info: &PolicyEntryInfo) -> Result<Self, AuthError> {
        let resource: Pattern = info.resource.parse()?;
        if info.actions.is_empty() {
            return Err(AuthError::Invalid(format!(
                "the entry for {resource} names no actions"
            )));
        }
        let actions = info
            .actions
            .iter()
            .map(|a| a.parse())
            .collect::<Result<Vec<Action>, _>>()?;
        let source_ips = info
            .source_ips
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| source_net(s))
            .collect::<Result<Vec<_>, _>>()?;
        let decision = match info.decision.as_deref().map(str::trim) {
            None | Some("") => Decision::Allow,
            Some(d) if d.eq_ignore_ascii_case("allow") => Decision::Allow,
            Some(d) if d.eq_ignore_ascii_case("deny") => Decision::Deny,
            Some(d) => {
                return Err(AuthError::Invalid(format!(
                    "bad decision {d:?}: Allow or Deny"
                )))
            }
        };
        Ok(Self {
            policy,
            resource,
            actions,
            source_ips,
            decision,
        })
    }

    fn to_info(&self) -> PolicyEntryInfo {
        PolicyEntryInfo {
            resource: self.resource.to_string(),
            actions: self.actions.iter().map(|a| a.name().to_owned()).collect(),
            source_ips: self.source_ips.iter().map(ToString::to_string).collect(),
            decision: Some(
                match self.decision {
                    Decision::Allow => "Allow",
                    Decision::Deny => "Deny",
                }
                .to_owned(),
            ),
        }
    }
}

/// IPv4 addresses mapped into IPv6 (a dual-stack listener's peers) are
/// matched as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn source_net(s: &str) -> Result<IpNet, AuthError> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            AuthError::Invalid(format!(
                "bad source address {s:?}: an IP address or a CIDR block such as 10.0.0.0/8"
            ))
        })
}

/// A subject's policy entries, custom and default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// Whose they are (`User:alice`).
    pub subject: String,
    /// The entries, custom ones and default ones.
    pub entries: Vec<Entry>,
}

impl Acl {
    /// Reads an admin body; the subject must be `User:<name>`.
    ///
    /// # Errors
    /// No subject, no policies, or an entry that does not parse.
    pub fn from_info(info: &AclInfo) -> Result<Self, AuthError> {
        let subject = parse_subject(&info.subject)?;
        if info.policies.iter().all(|p| p.entries.is_empty()) {
            return Err(AuthError::Invalid(format!(
                "the ACL of {subject} has no policy entries"
            )));
        }
        let mut entries = Vec::new();
        for policy in &info.policies {
            let kind: PolicyType = policy.policy_type.as_deref().unwrap_or("").parse()?;
            for entry in &policy.entries {
                entries.push(Entry::from_info(kind, entry)?);
            }
        }
        Ok(Self { subject, entries })
    }

    /// Adds `other`'s entries; those it has replace every entry of the same
    /// policy type and resource.
    pub fn merge(&mut self, other: Acl) {
        self.entries.retain(|e| {
            !other
                .entries
                .iter()
                .any(|o| o.policy == e.policy && o.resource == e.resource)
        });
        self.entries.extend(other.entries);
    }

    /// The ACL as an admin body: one policy per type that has entries.
    pub fn to_info(&self) -> AclInfo {
        let policies = [PolicyType::Custom, PolicyType::Default]
            .into_iter()
            .filter_map(|kind| {
                let entries: Vec<PolicyEntryInfo> = self
                    .entries
                    .iter()
                    .filter(|e| e.policy == kind)
                    .map(Entry::to_info)
                    .collect();
                (!entries.is_empty()).then(|| PolicyInfo {
                    policy_type: Some(kind.name().to_owned()),
                    entries,
                })
            })
            .collect();
        AclInfo {
            subject: self.subject.clone(),
            policies,
        }
    }
}

/// Reads a subject (`User:alice`, the type case-blind) into its canonical
/// form.
///
/// # Errors
/// Not a user subject, or a bad user name.
pub fn parse_subject(subject: &str) -> Result<String, AuthError> {
    let subject = subject.trim();
    let name = subject
        .split_once(':')
        .filter(|(kind, _)| kind.eq_ignore_ascii_case("user"))
        .map(|(_, name)| name.trim())
        .ok_or_else(|| {
            AuthError::Invalid(format!("bad subject {subject:?}: expected User:<username>"))
        })?;
    check_name(name)?;
    Ok(format!("{USER_SUBJECT_PREFIX}{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_read_from_admin_bodies_with_defaults_and_checked() {
        let user = User::from_info(&UserInfo {
            username: Some("alice".into()),
            password: Some("pw".into()),
            ..UserInfo::default()
        })
        .unwrap();
        assert_eq!(user.user_type, UserType::Normal);
        assert!(user.enabled);
        assert_eq!(user.subject(), "User:alice");
        let missing = User::from_info(&UserInfo {
            username: Some("bob".into()),
            ..UserInfo::default()
        })
        .unwrap_err();
        assert!(missing.to_string().contains("password"), "{missing}");
        let bad = User::from_info(&UserInfo {
            username: Some("a b".into()),
            password: Some("x".into()),
            ..UserInfo::default()
        })
        .unwrap_err();
        assert!(bad.to_string().contains("\"a b\""), "{bad}");
        let nul = User::from_info(&UserInfo {
            username: Some("c".into()),
            password: Some("pw\0".into()),
            ..UserInfo::default()
        })
        .unwrap_err();
        assert!(nul.to_string().contains("NUL"), "{nul}");
        let updated = user
            .updated(&UserInfo {
                user_status: Some("DISABLE".into()),
                user_type: Some("super".into()),
                ..UserInfo::default()
            })
            .unwrap();
        assert!(!updated.enabled);
        assert_eq!(updated.user_type, UserType::Super);
        assert_eq!(updated.password, "pw", "kept when not given");
        assert_eq!(updated.to_info(false).password, None);
        assert!(!format!("{updated:?}").contains("pw"));
    }

    #[test]
    fn acls_read_and_write_as_admin_bodies() {
        let body = AclInfo {
            subject: "user:alice".into(),
            policies: vec![PolicyInfo {
                policy_type: None,
                entries: vec![PolicyEntryInfo {
                    resource: "Topic:ord*".into(),
                    actions: vec!["pub".into(), "Sub".into()],
                    source_ips: vec!["10.0.0.0/8".into(), "192.168.1.7".into()],
                    decision: None,
                }],
            }],
        };
        let acl = Acl::from_info(&body).unwrap();
        assert_eq!(acl.subject, "User:alice");
        let e = &acl.entries[0];
        assert_eq!(e.policy, PolicyType::Custom);
        assert_eq!(e.decision, Decision::Allow);
        assert!(e.covers_source("10.1.2.3".parse().unwrap()));
        assert!(e.covers_source("::ffff:192.168.1.7".parse().unwrap()));
        assert!(!e.covers_source("192.168.1.8".parse().unwrap()));
        let info = acl.to_info();
        assert_eq!(info.policies[0].entries[0].actions, ["Pub", "Sub"]);
        assert_eq!(Acl::from_info(&info).unwrap(), acl);
    }

    #[test]
    fn bad_acls_are_refused_with_what_is_wrong() {
        let entry = |resource: &str, actions: &[&str], ip: &str, decision: &str| AclInfo {
            subject: "User:a".into(),
            policies: vec![PolicyInfo {
                policy_type: Some("Custom".into()),
                entries: vec![PolicyEntryInfo {
                    resource: resource.into(),
                    actions: actions.iter().map(|s| (*s).to_owned()).collect(),
                    source_ips: vec![ip.into()],
                    decision: Some(decision.into()),
                }],
            }],
        };
        for (info, wanted) in [
            (entry("Topic:t", &["Pub"], "", "Allow"), None),
            (entry("Queue:t", &["Pub"], "", "Allow"), Some("Queue:t")),
            (entry("Topic:t", &[], "", "Allow"), Some("no actions")),
            (entry("Topic:t", &["Push"], "", "Allow"), Some("Push")),
            (
                entry("Topic:t", &["Pub"], "10.0.0/8", "Allow"),
                Some("10.0.0/8"),
            ),
            (entry("Topic:t", &["Pub"], "", "Maybe"), Some("Maybe")),
            (
                AclInfo {
                    subject: "Role:x".into(),
                    ..entry("Topic:t", &["Pub"], "", "Allow")
                },
                Some("Role:x"),
            ),
            (
                AclInfo {
                    subject: "User:a".into(),
                    policies: vec![],
                },
                Some("no policy entries"),
            ),
        ] {
            match (Acl::from_info(&info), wanted) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{e} lacks {w}"),
                (got, w) => panic!("{info:?}: {got:?}, expected error {w:?}"),
            }
        }
    }

    #[test]
    fn merging_replaces_entries_of_the_same_type_and_resource() {
        let acl = |resource: &str, action: &str| {
            Acl::from_info(&AclInfo {
                subject: "User:a".into(),
                policies: vec![PolicyInfo {
                    policy_type: None,
                    entries: vec![PolicyEntryInfo {
                        resource: resource.into(),
                        actions: vec![action.into()],
                        ..PolicyEntryInfo::default()
                    }],
                }],
            })
            .unwrap()
        };
        let mut a = acl("Topic:t", "Pub");
        a.merge(acl("Topic:t", "Sub"));
        a.merge(acl("Group:g", "Sub"));
        assert_eq!(a.entries.len(), 2);
        assert_eq!(a.entries[0].actions, [Action::Sub]);
    }
}
