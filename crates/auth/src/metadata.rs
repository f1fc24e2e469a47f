//! The users and policies a broker holds: authentication of an access key,
//! authorization of what its user asks, and the admin changes.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use remoting_protocol::body::{AclInfo, UserInfo};
use serde::{Deserialize, Serialize};

use crate::{
    model::{parse_subject, PolicyType},
    Acl, Action, AuthError, Decision, Entry, Pattern, Resource, User, UserType,
};

/// One check a request needs: an action on a resource, where any one of
/// `actions` suffices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// What the request touches.
    pub resource: Resource,
    /// The actions that would allow it (any one).
    pub actions: &'static [Action],
}

impl Requirement {
    /// `actions` (any one) on `resource`.
    pub fn new(resource: Resource, actions: &'static [Action]) -> Self {
        Self { resource, actions }
    }
}

/// Users and their ACLs, both by user name.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    users: BTreeMap<String, Arc<User>>,
    /// By user name (the subject `User:<name>` without its prefix).
    acls: BTreeMap<String, Acl>,
}

/// The persisted users: `{"users":[UserInfo, ...]}`, passwords included.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct UsersDocument {
    /// Every user.
    #[serde(default)]
    pub users: Vec<UserInfo>,
}

/// The persisted ACLs: `{"acls":[AclInfo, ...]}`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct AclsDocument {
    /// Every ACL.
    #[serde(default)]
    pub acls: Vec<AclInfo>,
}

impl Metadata {
    /// Users and ACLs from their persisted documents.
    ///
    /// # Errors
    /// A user or ACL in them is not valid.
    pub fn from_documents(users: &UsersDocument, acls: &AclsDocument) -> Result<Self, AuthError> {
        let mut metadata = Self::default();
        for info in &users.users {
            let user = User::from_info(info)?;
            metadata.users.insert(user.username.clone(), Arc::new(user));
        }
        for info in &acls.acls {
            let acl = Acl::from_info(info)?;
            metadata
                .acls
                .insert(user_name(&acl.subject).to_owned(), acl);
        }
        Ok(metadata)
    }

    /// The users as a document to persist.
    pub fn users_document(&self) -> UsersDocument {
        UsersDocument {
            users: self.users.values().map(|u| u.to_info(true)).collect(),
        }
    }

    /// The ACLs as a document to persist.
    pub fn acls_document(&self) -> AclsDocument {
        AclsDocument {
            acls: self.acls.values().map(Acl::to_info).collect(),
        }
    }

    /// The user named by `access_key`, when it exists and is enabled; the
    /// caller then checks the request's signature with its password.
    ///
    /// # Errors
    /// No access key, an unknown user, or a disabled one.
    pub fn authenticate(&self, access_key: Option<&str>) -> Result<Arc<User>, AuthError> {
        let Some(name) = access_key.filter(|k| !k.is_empty()) else {
            return Err(AuthError::Unauthenticated(
                "authentication is required: the request carries no AccessKey".into(),
            ));
        };
        match self.users.get(name) {
            None => Err(AuthError::Unauthenticated(format!(
                "User:{name} does not exist"
            ))),
            Some(user) if !user.enabled => Err(AuthError::Unauthenticated(format!(
                "User:{name} is disabled"
            ))),
            Some(user) => Ok(Arc::clone(user)),
        }
    }

    /// Whether `user`, asking from `ip`, may do what `need` says. Super
    /// users may do everything. Otherwise the user's custom entries that
    /// cover the resource, one of the actions and the address decide, the
    /// most specific resource pattern first (a deny before an allow of the
    /// same pattern); default entries only when no custom one matches.
    ///
    /// # Errors
    /// No entry matches, or the deciding one denies; the message names the
    /// user, the action, the resource and the address.
    pub fn authorize(&self, user: &User, need: &Requirement, ip: IpAddr) -> Result<(), AuthError> {
        if user.user_type == UserType::Super {
            return Ok(());
        }
        let entries = self
            .acls
            .get(&user.username)
            .map_or(&[][..], |acl| acl.entries.as_slice());
        let matching = |kind: PolicyType| {
            entries
                .iter()
                .filter(move |e| {
                    e.policy == kind
                        && e.resource.covers(&need.resource)
                        && e.covers_action(need.actions)
                        && e.covers_source(ip)
                })
                .min_by(|a, b| {
                    a.resource
                        .specificity(&b.resource)
                        .then_with(|| deny_first(a).cmp(&deny_first(b)))
                })
        };
        let verb = need
            .actions
            .iter()
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(" or ");
        match matching(PolicyType::Custom).or_else(|| matching(PolicyType::Default)) {
            Some(entry) if entry.decision == Decision::Allow => Ok(()),
            Some(entry) => Err(AuthError::Denied(format!(
                "User:{} may not {verb} {} from {ip}: denied by the policy entry for {}",
                user.username, need.resource, entry.resource
            ))),
            None => Err(AuthError::Denied(format!(
                "User:{} may not {verb} {} from {ip}: no policy entry allows it",
                user.username, need.resource
            ))),
        }
    }

    /// Creates a user.
    ///
    /// # Errors
    /// The body is not valid, or the user exists.
    pub fn create_user(&mut self, info: &UserInfo) -> Result<(), AuthError> {
        let user = User::from_info(info)?;
        if self.users.contains_key(&user.username) {
            return Err(AuthError::Invalid(format!(
                "User:{} already exists",
                user.username
            )));
        }
        self.users.insert(user.username.clone(), Arc::new(user));
        Ok(())
    }

    /// Creates a super user unless one of that name exists (the broker's
    /// initial and inner users); true when it was created.
    ///
    /// # Errors
    /// The name or password is not valid.
    pub fn ensure_super_user(&mut self, username: &str, password: &str) -> Result<bool, AuthError> {
        if self.users.contains_key(username) {
            return Ok(false);
        }
        self.create_user(&UserInfo {
            username: Some(username.to_owned()),
            password: Some(password.to_owned()),
            user_type: Some("Super".into()),
            user_status: None,
        })?;
        Ok(true)
    }

    /// Changes a user's password, type or status.
    ///
    /// # Errors
    /// The user does not exist or the body is not valid.
    pub fn update_user(&mut self, username: &str, info: &UserInfo) -> Result<(), AuthError> {
        let user = self.user(username)?.updated(info)?;
        self.users.insert(username.to_owned(), Arc::new(user));
        Ok(())
    }

    /// Deletes a user and its ACL; false when there was no such user.
    pub fn delete_user(&mut self, username: &str) -> bool {
        self.acls.remove(username);
        self.users.remove(username).is_some()
    }

    /// A user.
    ///
    /// # Errors
    /// It does not exist.
    pub fn user(&self, username: &str) -> Result<&Arc<User>, AuthError> {
        self.users
            .get(username)
            .ok_or_else(|| AuthError::NotFound(format!("User:{username} does not exist")))
    }

    /// The users whose names contain `filter` (all for an empty one).
    pub fn users(&self, filter: &str) -> Vec<&Arc<User>> {
        self.users
            .values()
            .filter(|u| u.username.contains(filter))
            .collect()
    }

    /// Creates a subject's ACL or adds the body's entries to it, each
    /// replacing the entries of the same policy type and resource. The
    /// subject's user must exist.
    ///
    /// # Errors
    /// The body is not valid, or names a user that does not exist.
    pub fn put_acl(&mut self, info: &AclInfo) -> Result<(), AuthError> {
        let acl = Acl::from_info(info)?;
        let name = user_name(&acl.subject).to_owned();
        self.user(&name)?;
        match self.acls.get_mut(&name) {
            Some(existing) => existing.merge(acl),
            None => {
                self.acls.insert(name, acl);
            }
        }
        Ok(())
    }

    /// Deletes a subject's entries: those of `resource` (all when `None`)
    /// in `policy` (both types when `None`); false when nothing matched.
    ///
    /// # Errors
    /// The subject or resource is not valid.
    pub fn delete_acl(
        &mut self,
        subject: &str,
        policy: Option<PolicyType>,
        resource: Option<&str>,
    ) -> Result<bool, AuthError> {
        let subject = parse_subject(subject)?;
        let resource = resource.map(str::parse::<Pattern>).transpose()?;
        let Some(acl) = self.acls.get_mut(user_name(&subject)) else {
            return Ok(false);
        };
        let before = acl.entries.len();
        acl.entries.retain(|e| {
            !(policy.is_none_or(|p| e.policy == p)
                && resource.as_ref().is_none_or(|r| &e.resource == r))
        });
        let removed = acl.entries.len() != before;
        if acl.entries.is_empty() {
            self.acls.remove(user_name(&subject));
        }
        Ok(removed)
    }

    /// A subject's ACL.
    ///
    /// # Errors
    /// The subject is not valid or has no ACL.
    pub fn acl(&self, subject: &str) -> Result<&Acl, AuthError> {
        let subject = parse_subject(subject)?;
        self.acls
            .get(user_name(&subject))
            .ok_or_else(|| AuthError::NotFound(format!("{subject} has no ACL")))
    }

    /// The ACLs whose subject contains `subject_filter` and that have an
    /// entry whose resource contains `resource_filter` (empty filters
    /// match all).
    pub fn acls(&self, subject_filter: &str, resource_filter: &str) -> Vec<&Acl> {
        self.acls
            .values()
            .filter(|a| a.subject.contains(subject_filter))
            .filter(|a| {
                resource_filter.is_empty()
                    || a.entries
                        .iter()
                        .any(|e| e.resource.to_string().contains(resource_filter))
            })
            .collect()
    }
}

/// The user name of a subject (`User:<name>`, as `parse_subject` makes
/// them): what ACLs are kept by.
fn user_name(subject: &str) -> &str {
    subject
        .strip_prefix(crate::model::USER_SUBJECT_PREFIX)
        .unwrap_or(subject)
}

fn deny_first(entry: &Entry) -> u8 {
    u8::from(entry.decision == Decision::Allow)
}

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{PolicyEntryInfo, PolicyInfo};

    use super::*;

    const PUB: &[Action] = &[Action::Pub];
    const SUB_OR_GET: &[Action] = &[Action::Sub, Action::Get];

    fn user(name: &str, kind: &str) -> UserInfo {
        UserInfo {
            username: Some(name.into()),
            password: Some(format!("{name}-secret")),
            user_type: Some(kind.into()),
            user_status: None,
        }
    }

    fn entry(
        policy: &str,
        resource: &str,
        actions: &[&str],
        ips: &[&str],
        decision: &str,
    ) -> AclInfo {
        AclInfo {
            subject: "User:alice".into(),
            policies: vec![PolicyInfo {
                policy_type: Some(policy.into()),
                entries: vec![PolicyEntryInfo {
                    resource: resource.into(),
                    actions: actions.iter().map(|s| (*s).to_owned()).collect(),
                    source_ips: ips.iter().map(|s| (*s).to_owned()).collect(),
                    decision: Some(decision.into()),
                }],
            }],
        }
    }

    fn local() -> IpAddr {
        "127.0.0.1".parse().unwrap()
    }

    fn with_alice() -> Metadata {
        let mut m = Metadata::default();
        m.create_user(&user("alice", "Normal")).unwrap();
        m.create_user(&user("root", "Super")).unwrap();
        m
    }

    fn may(m: &Metadata, need: Requirement, ip: IpAddr) -> Result<(), AuthError> {
        let alice = m.user("alice").unwrap().clone();
        m.authorize(&alice, &need, ip)
    }

    #[test]
    fn authentication_names_a_missing_unknown_or_disabled_user() {
        let mut m = with_alice();
        assert!(m.authenticate(Some("alice")).is_ok());
        for (key, wanted) in [
            (None, "no AccessKey"),
            (Some(""), "no AccessKey"),
            (Some("mallory"), "User:mallory does not exist"),
        ] {
            let err = m.authenticate(key).unwrap_err();
            assert!(matches!(err, AuthError::Unauthenticated(_)));
            assert!(err.to_string().contains(wanted), "{err}");
        }
        m.update_user(
            "alice",
            &UserInfo {
                user_status: Some("disable".into()),
                ..UserInfo::default()
            },
        )
        .unwrap();
        let err = m.authenticate(Some("alice")).unwrap_err().to_string();
        assert!(err.contains("User:alice is disabled"), "{err}");
    }

    #[test]
    fn without_an_entry_a_normal_user_may_do_nothing_and_a_super_user_everything() {
        let m = with_alice();
        let need = Requirement::new(Resource::topic("orders"), PUB);
        let err = may(&m, need.clone(), local()).unwrap_err().to_string();
        assert_eq!(
            err,
            "User:alice may not Pub Topic:orders from 127.0.0.1: no policy entry allows it"
        );
        assert!(!err.contains("alice-secret"));
        let root = m.user("root").unwrap().clone();
        assert!(m.authorize(&root, &need, local()).is_ok());
    }

    #[test]
    fn entries_allow_their_actions_on_their_resources_from_their_sources() {
        let mut m = with_alice();
        m.put_acl(&entry(
            "Custom",
            "Topic:ord*",
            &["Pub"],
            &["127.0.0.0/8"],
            "Allow",
        ))
        .unwrap();
        m.put_acl(&entry("Custom", "Group:g1", &["All"], &[], "Allow"))
            .unwrap();
        assert!(may(
            &m,
            Requirement::new(Resource::topic("orders"), PUB),
            local()
        )
        .is_ok());
        assert!(may(&m, Requirement::new(Resource::topic("other"), PUB), local()).is_err());
        let sub = Requirement::new(Resource::topic("orders"), SUB_OR_GET);
        let err = may(&m, sub, local()).unwrap_err().to_string();
        assert!(err.contains("may not Sub or Get Topic:orders"), "{err}");
        let far: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(may(&m, Requirement::new(Resource::topic("orders"), PUB), far).is_err());
        assert!(may(&m, Requirement::new(Resource::group("g1"), SUB_OR_GET), far).is_ok());
    }

    #[test]
    fn the_most_specific_entry_decides_and_deny_wins_a_tie() {
        let mut m = with_alice();
        m.put_acl(&entry("Custom", "Topic:*", &["Pub"], &[], "Allow"))
            .unwrap();
        m.put_acl(&entry("Custom", "Topic:secret*", &["Pub"], &[], "Deny"))
            .unwrap();
        m.put_acl(&entry("Custom", "Topic:secret-ok", &["Pub"], &[], "Allow"))
            .unwrap();
        let pubs = |t: &str| may(&m, Requirement::new(Resource::topic(t), PUB), local());
        assert!(pubs("plain").is_ok());
        let err = pubs("secret-x").unwrap_err().to_string();
        assert!(
            err.contains("denied by the policy entry for Topic:secret*"),
            "{err}"
        );
        assert!(pubs("secret-ok").is_ok());
        // Same pattern, allow and deny from different sources: where both
        // apply, deny wins.
        let mut tie = with_alice();
        tie.put_acl(&entry("Custom", "Topic:t", &["Pub"], &[], "Allow"))
            .unwrap();
        tie.put_acl(&entry("Custom", "Topic:t", &["Sub"], &[], "Allow"))
            .unwrap();
        let mut deny = entry("Custom", "Topic:t", &["Pub"], &["127.0.0.1"], "Deny");
        deny.policies[0].policy_type = Some("Custom".into());
        // Entries of one body are added together, replacing those of the
        // same resource (the two above).
        let mut both = entry("Custom", "Topic:t", &["Pub"], &[], "Allow");
        both.policies[0]
            .entries
            .push(deny.policies[0].entries[0].clone());
        tie.put_acl(&both).unwrap();
        assert!(may(&tie, Requirement::new(Resource::topic("t"), PUB), local()).is_err());
        let far: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(may(&tie, Requirement::new(Resource::topic("t"), PUB), far).is_ok());
    }

    #[test]
    fn default_entries_apply_only_where_no_custom_one_matches() {
        let mut m = with_alice();
        m.put_acl(&entry("Default", "*", &["All"], &[], "Allow"))
            .unwrap();
        m.put_acl(&entry("Custom", "Topic:locked", &["Pub"], &[], "Deny"))
            .unwrap();
        assert!(may(&m, Requirement::new(Resource::topic("free"), PUB), local()).is_ok());
        assert!(may(
            &m,
            Requirement::new(Resource::topic("locked"), PUB),
            local()
        )
        .is_err());
    }

    #[test]
    fn admin_changes_persist_through_documents() {
        let mut m = with_alice();
        assert!(m.create_user(&user("alice", "Normal")).is_err(), "exists");
        assert!(m
            .put_acl(&AclInfo {
                subject: "User:ghost".into(),
                ..entry("Custom", "*", &["All"], &[], "Allow")
            })
            .is_err());
        m.put_acl(&entry("Custom", "Topic:t", &["Pub"], &[], "Allow"))
            .unwrap();
        m.put_acl(&entry("Default", "Group:g", &["Sub"], &[], "Deny"))
            .unwrap();
        let users = serde_json::to_string(&m.users_document()).unwrap();
        let acls = serde_json::to_string(&m.acls_document()).unwrap();
        let back = Metadata::from_documents(
            &serde_json::from_str(&users).unwrap(),
            &serde_json::from_str(&acls).unwrap(),
        )
        .unwrap();
        assert_eq!(back.users("").len(), 2);
        assert_eq!(
            back.acl("User:alice").unwrap(),
            m.acl("User:alice").unwrap()
        );
        assert_eq!(back.acls("ali", "Group").len(), 1);
        assert_eq!(back.acls("", "Topic:x").len(), 0);
        assert!(back.user("alice").unwrap().password == "alice-secret");

        let mut m = back;
        assert!(m
            .delete_acl("User:alice", Some(PolicyType::Custom), None)
            .unwrap());
        assert_eq!(m.acl("User:alice").unwrap().entries.len(), 1);
        assert!(!m
            .delete_acl("User:alice", None, Some("Topic:nope"))
            .unwrap());
        assert!(m.delete_acl("User:alice", None, Some("Group:g")).unwrap());
        assert!(
            m.acl("User:alice").is_err(),
            "an ACL without entries is gone"
        );
        assert!(m.delete_user("alice"));
        assert!(!m.delete_user("alice"));
        assert!(m.ensure_super_user("admin", "pw").unwrap());
        assert!(!m.ensure_super_user("admin", "other").unwrap());
        assert_eq!(m.user("admin").unwrap().password, "pw");
    }
}
