//! The user and ACL admin codes (`AUTH_CREATE_USER` 3001 to
//! `AUTH_LIST_ACL` 3010), with RocketMQ's headers and bodies.
//!
//! Beyond the check at admission (an action on the cluster), only a super
//! user may create or promote a super user, or change or delete one. With
//! authentication off these codes still work, so users and policies can
//! be set up before it is turned on.

use auth::{AuthError, PolicyType, UserType};
use remoting_protocol::{
    acl,
    body::{self, AclInfo, UserInfo},
    RemotingCommand, ResponseCode,
};

use crate::state::BrokerState;

fn header<'a>(req: &'a RemotingCommand, name: &str) -> &'a str {
    req.ext_fields.get(name).map_or("", |v| v.as_str().trim())
}

fn answer(req: &RemotingCommand, result: Result<Option<Vec<u8>>, AuthError>) -> RemotingCommand {
    match result {
        Ok(None) => req.response_to(ResponseCode::SUCCESS, None),
        Ok(Some(body)) => req.response_to(ResponseCode::SUCCESS, None).with_body(body),
        Err(e @ AuthError::Denied(_) | e @ AuthError::Unauthenticated(_)) => {
            req.response_to(ResponseCode::NO_PERMISSION, Some(e.to_string()))
        }
        Err(e) => req.response_to(ResponseCode::SYSTEM_ERROR, Some(e.to_string())),
    }
}

/// Whether the caller is a super user: it signed as one, or sent no access
/// key (possible only with authentication off).
fn caller_is_super(state: &BrokerState, req: &RemotingCommand) -> bool {
    match acl::access_key(req) {
        None => true,
        Some(name) => state
            .access
            .metadata()
            .user(name)
            .is_ok_and(|u| u.user_type == UserType::Super),
    }
}

fn only_super(state: &BrokerState, req: &RemotingCommand, what: &str) -> Result<(), AuthError> {
    if caller_is_super(state, req) {
        Ok(())
    } else {
        Err(AuthError::Denied(format!(
            "User:{} may not {what}: only a super user may",
            acl::access_key(req).unwrap_or("")
        )))
    }
}

fn user_body(req: &RemotingCommand) -> Result<UserInfo, AuthError> {
    let mut info: UserInfo = body::from_json(&req.body)
        .map_err(|e| AuthError::Invalid(format!("bad user body: {e}")))?;
    let name = header(req, "username");
    if !name.is_empty() {
        info.username = Some(name.to_owned());
    }
    Ok(info)
}

fn is_super_type(info: &UserInfo) -> bool {
    info.user_type
        .as_deref()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("super"))
}

/// `AUTH_CREATE_USER` (3001).
pub(crate) fn create_user(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let result = user_body(req).and_then(|info| {
        if is_super_type(&info) {
            only_super(state, req, "create a super user")?;
        }
        state.access.change(|m| m.create_user(&info))?;
        tracing::info!(user = ?info.username, by = ?acl::access_key(req), "user created");
        Ok(None)
    });
    answer(req, result)
}

/// `AUTH_UPDATE_USER` (3002).
pub(crate) fn update_user(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let result = user_body(req).and_then(|info| {
        let name = info.username.clone().unwrap_or_default();
        let target_is_super = state.access.metadata().user(&name)?.user_type == UserType::Super;
        if target_is_super || is_super_type(&info) {
            only_super(state, req, "change a super user or make one")?;
        }
        state.access.change(|m| m.update_user(&name, &info))?;
        tracing::info!(user = %name, by = ?acl::access_key(req), "user updated");
        Ok(None)
    });
    answer(req, result)
}

/// `AUTH_DELETE_USER` (3003); deleting a user that does not exist succeeds.
pub(crate) fn delete_user(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let name = header(req, "username").to_owned();
    let result = (|| {
        let target_is_super = state
            .access
            .metadata()
            .user(&name)
            .is_ok_and(|u| u.user_type == UserType::Super);
        if target_is_super {
            only_super(state, req, "delete a super user")?;
        }
        if state.access.change(|m| Ok(m.delete_user(&name)))? {
            tracing::info!(user = %name, by = ?acl::access_key(req), "user deleted");
        }
        Ok(None)
    })();
    answer(req, result)
}

/// `AUTH_GET_USER` (3004): the user, password included, or no body.
pub(crate) fn get_user(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let metadata = state.access.metadata();
    let body = metadata
        .user(header(req, "username"))
        .ok()
        .map(|u| body::to_json(&u.to_info(true)));
    answer(req, Ok(body))
}

/// `AUTH_LIST_USER` (3005): the users whose names contain `filter`, or no
/// body when there are none.
pub(crate) fn list_user(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let metadata = state.access.metadata();
    let users: Vec<UserInfo> = metadata
        .users(header(req, "filter"))
        .into_iter()
        .map(|u| u.to_info(true))
        .collect();
    answer(req, Ok((!users.is_empty()).then(|| body::to_json(&users))))
}

fn acl_body(req: &RemotingCommand) -> Result<AclInfo, AuthError> {
    let mut info: AclInfo =
        body::from_json(&req.body).map_err(|e| AuthError::Invalid(format!("bad ACL body: {e}")))?;
    let subject = header(req, "subject");
    if !subject.is_empty() {
        subject.clone_into(&mut info.subject);
    }
    Ok(info)
}

/// `AUTH_CREATE_ACL` (3006) and `AUTH_UPDATE_ACL` (3007), as RocketMQ
/// serves both: create the subject's ACL or add the body's entries to it,
/// each replacing the entries of the same policy type and resource.
pub(crate) fn put_acl(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let result = acl_body(req).and_then(|info| {
        state.access.change(|m| m.put_acl(&info))?;
        tracing::info!(subject = %info.subject, by = ?acl::access_key(req), "ACL changed");
        Ok(None)
    });
    answer(req, result)
}

/// `AUTH_DELETE_ACL` (3008): the subject's entries of `resource` in
/// `policyType` (each, when not given).
pub(crate) fn delete_acl(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let result = (|| {
        let policy = match header(req, "policyType") {
            "" => None,
            p => Some(p.parse::<PolicyType>()?),
        };
        let resource = Some(header(req, "resource")).filter(|r| !r.is_empty());
        let subject = header(req, "subject");
        if state
            .access
            .change(|m| m.delete_acl(subject, policy, resource))?
        {
            tracing::info!(%subject, ?resource, by = ?acl::access_key(req), "ACL entries deleted");
        }
        Ok(None)
    })();
    answer(req, result)
}

/// `AUTH_GET_ACL` (3009): the subject's ACL, or no body.
pub(crate) fn get_acl(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let metadata = state.access.metadata();
    let result = match metadata.acl(header(req, "subject")) {
        Ok(acl) => Ok(Some(body::to_json(&acl.to_info()))),
        Err(AuthError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    };
    answer(req, result)
}

/// `AUTH_LIST_ACL` (3010): the ACLs matching `subjectFilter` and
/// `resourceFilter`, or no body.
pub(crate) fn list_acl(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let metadata = state.access.metadata();
    let acls: Vec<AclInfo> = metadata
        .acls(header(req, "subjectFilter"), header(req, "resourceFilter"))
        .into_iter()
        .map(auth::Acl::to_info)
        .collect();
    answer(req, Ok((!acls.is_empty()).then(|| body::to_json(&acls))))
}
