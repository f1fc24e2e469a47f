//! Who may do what on this broker: the users and policies kept in the
//! config directory (`users.json`, `acls.json`), and the check every
//! remoting request passes at admission when authentication is on.
//!
//! A request is authenticated by its `AccessKey` and `Signature` ext
//! fields (verified with the user's secret), then authorized by the
//! checks its code needs ([`requirements`]). A refusal answers
//! `NO_PERMISSION` with a remark that names the user, the action and the
//! resource; the request is not queued. Requests the gRPC endpoint
//! submits are checked by the endpoint itself.

mod requirements;

use std::{
    collections::HashSet,
    net::IpAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError, RwLock,
    },
};

use auth::{
    metadata::{AclsDocument, UsersDocument},
    AuthError, Metadata, User,
};
use remoting_protocol::{acl, RemotingCommand};
pub use requirements::requirements;

use crate::{config::AuthSection, persist};

/// The broker's users and policies and its authentication settings.
#[derive(Debug)]
pub struct Access {
    metadata: RwLock<Metadata>,
    authentication: bool,
    authorization: bool,
    authentication_whitelist: HashSet<i32>,
    authorization_whitelist: HashSet<i32>,
    cluster: String,
    users_path: PathBuf,
    acls_path: PathBuf,
    /// Serializes writes of the two files.
    persist: Mutex<()>,
    /// Refusals since the last warning line, by kind (authentication,
    /// authorization).
    refused: [AtomicU64; 2],
    /// When the last warning line of each kind was written.
    last_warn_ms: [AtomicU64; 2],
}

impl Access {
    /// Loads the users and policies from `config_dir` and creates the
    /// configured initial and inner super users when missing.
    ///
    /// # Errors
    /// A file exists but cannot be read or holds an invalid user or ACL,
    /// or a setting is not valid.
    pub fn load(config_dir: &Path, section: &AuthSection, cluster: &str) -> std::io::Result<Self> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let users_path = config_dir.join("users.json");
        let acls_path = config_dir.join("acls.json");
        let users: UsersDocument = persist::read_json(&users_path)?;
        let acls: AclsDocument = persist::read_json(&acls_path)?;
        let mut metadata = Metadata::from_documents(&users, &acls).map_err(|e| {
            invalid(format!(
                "{} or {}: {e}",
                users_path.display(),
                acls_path.display()
            ))
        })?;
        let mut created = Vec::new();
        if let Some((name, password)) = section.init_user().map_err(|e| invalid(e.to_string()))? {
            if metadata
                .ensure_super_user(&name, &password)
                .map_err(|e| invalid(format!("initAuthenticationUser: {e}")))?
            {
                created.push(name);
            }
        }
        if let Some(c) = section
            .inner_credentials()
            .map_err(|e| invalid(e.to_string()))?
        {
            if metadata
                .ensure_super_user(&c.access_key, &c.secret_key)
                .map_err(|e| invalid(format!("innerClientAuthenticationCredentials: {e}")))?
            {
                created.push(c.access_key);
            }
        }
        let whitelist = |codes: Result<Vec<i32>, _>| -> std::io::Result<HashSet<i32>> {
            Ok(codes
                .map_err(|e: crate::config::ConfigError| invalid(e.to_string()))?
                .into_iter()
                .collect())
        };
        let access = Self {
            metadata: RwLock::new(metadata),
            authentication: section.authentication_enabled,
            authorization: section.authorization_enabled,
            authentication_whitelist: whitelist(section.authentication_whitelist())?,
            authorization_whitelist: whitelist(section.authorization_whitelist())?,
            cluster: cluster.to_owned(),
            users_path,
            acls_path,
            persist: Mutex::new(()),
            refused: Default::default(),
            last_warn_ms: Default::default(),
        };
        if !created.is_empty() {
            access.persist()?;
            tracing::info!(users = ?created, "created configured super users");
        }
        if access.authentication && access.metadata().users("").is_empty() {
            tracing::warn!(
                "authentication is on and there are no users: every request will be refused; \
                 set initAuthenticationUser to create a first super user"
            );
        }
        Ok(access)
    }

    /// Whether requests must be signed.
    pub fn authentication_enabled(&self) -> bool {
        self.authentication
    }

    /// The users and policies, for reading.
    pub fn metadata(&self) -> std::sync::RwLockReadGuard<'_, Metadata> {
        self.metadata.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` to the users and policies and persists them; the
    /// change is kept in memory only if it succeeded and was written.
    ///
    /// # Errors
    /// `change`'s error, or the files could not be written.
    pub fn change<T>(
        &self,
        change: impl FnOnce(&mut Metadata) -> Result<T, AuthError>,
    ) -> Result<T, AuthError> {
        let _writing = self.persist.lock().unwrap_or_else(PoisonError::into_inner);
        let mut updated = self.metadata().clone();
        let out = change(&mut updated)?;
        write_documents(&updated, &self.users_path, &self.acls_path)
            .map_err(|e| AuthError::Invalid(format!("cannot save users and ACLs: {e}")))?;
        *self
            .metadata
            .write()
            .unwrap_or_else(PoisonError::into_inner) = updated;
        Ok(out)
    }

    fn persist(&self) -> std::io::Result<()> {
        let _writing = self.persist.lock().unwrap_or_else(PoisonError::into_inner);
        write_documents(&self.metadata(), &self.users_path, &self.acls_path)
    }

    /// Checks a remoting request from `peer`: `Ok` with its user (`None`
    /// when authentication is off or the code is whitelisted), or why it is
    /// refused; the broker answers that `NO_PERMISSION`.
    ///
    /// # Errors
    /// The request is not signed by an enabled user with its secret, or
    /// its user may not do what it asks.
    pub fn check(
        &self,
        request: &RemotingCommand,
        peer: IpAddr,
    ) -> Result<Option<Arc<User>>, AuthError> {
        if !self.authentication || self.authentication_whitelist.contains(&request.code) {
            return Ok(None);
        }
        let metadata = self.metadata();
        let user = metadata.authenticate(acl::access_key(request))?;
        if !acl::verify(request, user.password.as_bytes()) {
            return Err(AuthError::Unauthenticated(format!(
                "the signature of User:{} does not verify: wrong secret key, or the request was changed",
                user.username
            )));
        }
        if self.authorization && !self.authorization_whitelist.contains(&request.code) {
            for need in requirements(request, &self.cluster) {
                metadata.authorize(&user, &need, peer)?;
            }
        }
        Ok(Some(user))
    }
}

impl Access {
    /// Counts a refusal of `what` (a request code or RPC name) from `peer`
    /// over `protocol` in `sluice_access_refusals_total{kind,protocol}`,
    /// logs it at debug level, and as a warning at most once a second per
    /// kind, with how many were refused since the previous line.
    pub(crate) fn note_refusal(
        &self,
        protocol: &'static str,
        peer: IpAddr,
        what: &str,
        e: &AuthError,
    ) {
        let (kind, index) = match e {
            AuthError::Denied(_) => ("authorization", 1),
            _ => ("authentication", 0),
        };
        metrics::counter!("sluice_access_refusals_total", "kind" => kind, "protocol" => protocol)
            .increment(1);
        tracing::debug!(kind, protocol, %peer, request = %what, reason = %e,
            "request refused by access control");
        self.refused[index].fetch_add(1, Ordering::Relaxed);
        if crate::throttle::once_a_second(&self.last_warn_ms[index]) {
            let refused = self.refused[index].swap(0, Ordering::Relaxed);
            tracing::warn!(
                kind,
                protocol,
                %peer,
                request = %what,
                refused,
                reason = %e,
                "requests refused by access control (logged at most once a second per kind; \
                 refused: how many since the previous line)"
            );
        }
    }

    /// Checks a gRPC call from `peer` by its `authorization` and
    /// `x-mq-date-time` headers, then `needs` (computed only when
    /// authorization is on): `Ok` when it may go ahead. Calls are checked
    /// only while authentication is on; an `authorization` header with an
    /// empty credential (some clients always send one) is anonymous.
    ///
    /// # Errors
    /// Why not, naming the user, the action and the resource.
    pub(crate) fn check_grpc(
        &self,
        authorization: Option<&str>,
        date_time: Option<&str>,
        peer: IpAddr,
        needs: impl FnOnce() -> Vec<auth::Requirement>,
    ) -> Result<(), AuthError> {
        if !self.authentication {
            return Ok(());
        }
        let parsed = authorization
            .map(auth::grpc::Authorization::parse)
            .transpose()?
            .flatten();
        let metadata = self.metadata();
        let user = metadata.authenticate(parsed.as_ref().map(|a| a.access_key.as_str()))?;
        let verified = parsed
            .as_ref()
            .is_some_and(|a| a.verify(user.password.as_bytes(), date_time.unwrap_or("")));
        if !verified {
            return Err(AuthError::Unauthenticated(format!(
                "the signature of User:{} does not verify: wrong secret key, or {} changed",
                user.username,
                auth::grpc::DATE_TIME
            )));
        }
        if self.authorization {
            for need in needs() {
                metadata.authorize(&user, &need, peer)?;
            }
        }
        Ok(())
    }
}

fn write_documents(metadata: &Metadata, users: &Path, acls: &Path) -> std::io::Result<()> {
    persist::write_private(users, &body_json(&metadata.users_document()))?;
    persist::write_private(acls, &body_json(&metadata.acls_document()))
}

fn body_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_logged_at_most_once_a_second_per_kind_and_counted_between() {
        let dir = tempfile::tempdir().unwrap();
        let access = Access::load(dir.path(), &AuthSection::default(), "C").unwrap();
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let who = AuthError::Unauthenticated("no AccessKey".into());
        let what = AuthError::Denied("may not Pub".into());
        // The first of each kind is logged at once (its count taken).
        access.note_refusal("remoting", peer, "SEND_MESSAGE", &who);
        access.note_refusal("grpc", peer, "SendMessage", &what);
        assert_eq!(access.refused[0].load(Ordering::Relaxed), 0);
        assert_eq!(access.refused[1].load(Ordering::Relaxed), 0);
        // Within the second, the next ones are only counted for the next
        // line (unless a second has passed on a slow machine: then one
        // more line took the count).
        let before = access.last_warn_ms[0].load(Ordering::Relaxed);
        for _ in 0..3 {
            access.note_refusal("remoting", peer, "SEND_MESSAGE", &who);
        }
        let logged_again = access.last_warn_ms[0].load(Ordering::Relaxed) != before;
        let counted = access.refused[0].load(Ordering::Relaxed);
        assert!(counted == 3 || logged_again, "{counted}");
        assert_eq!(access.refused[1].load(Ordering::Relaxed), 0, "kinds apart");
    }
}
