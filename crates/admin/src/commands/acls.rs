//! `acl create`, `update`, `delete`, `get` and `list`: the access control
//! lists of brokers with access control on (`AUTH_CREATE_ACL` 3006 to
//! `AUTH_LIST_ACL` 3010), on `--broker` or every master broker.
//!
//! A list travels as an `AclInfo` JSON body: the subject and its policies,
//! each with a type and entries of a resource, actions, source addresses
//! and a decision; the subject also goes in the `subject` ext field.

use remoting_protocol::{
    body::{to_json, AclInfo, PolicyEntryInfo, PolicyInfo},
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use super::{optional_json, ChangeReport};
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, Align, Report, Table},
};

/// The ext field naming the subject.
const SUBJECT: &str = "subject";

/// What `acl create` and `acl update` set: the subject, the policy type,
/// and one entry per resource with the same actions, source addresses and
/// decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclChange {
    /// `User:alice`.
    pub subject: String,
    /// `Custom` or `Default`.
    pub policy_type: String,
    /// The resources, one entry each.
    pub resources: Vec<String>,
    /// The actions of every entry.
    pub actions: Vec<String>,
    /// The source addresses of every entry; empty for any.
    pub source_ips: Vec<String>,
    /// `Allow` or `Deny`.
    pub decision: String,
}

impl AclChange {
    /// The list this change sends: one policy with one entry per resource.
    pub fn acl_info(&self) -> AclInfo {
        let entries = self
            .resources
            .iter()
            .map(|resource| PolicyEntryInfo {
                resource: resource.clone(),
                actions: self.actions.clone(),
                source_ips: self.source_ips.clone(),
                decision: Some(self.decision.clone()),
            })
            .collect();
        AclInfo {
            subject: self.subject.clone(),
            policies: vec![PolicyInfo {
                policy_type: Some(self.policy_type.clone()),
                entries,
            }],
        }
    }
}

/// An `acl create` (`AUTH_CREATE_ACL`) or `acl update` (`AUTH_UPDATE_ACL`)
/// request for `acl`: its subject in the `subject` ext field, the list as
/// the JSON body.
pub fn acl_write_request(code: RequestCode, acl: &AclInfo) -> RemotingCommand {
    let mut request = RemotingCommand::request(code);
    request.set_ext(SUBJECT, acl.subject.as_str());
    request.with_body(to_json(acl))
}

/// An `acl delete` request (`AUTH_DELETE_ACL`): the subject, and the
/// `policyType` and `resource` ext fields when given.
pub fn acl_delete_request(
    subject: &str,
    policy_type: Option<&str>,
    resource: Option<&str>,
) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_DELETE_ACL);
    request.set_ext(SUBJECT, subject);
    if let Some(policy_type) = policy_type {
        request.set_ext("policyType", policy_type);
    }
    if let Some(resource) = resource {
        request.set_ext("resource", resource);
    }
    request
}

/// An `acl get` request (`AUTH_GET_ACL`): the subject only.
pub fn acl_get_request(subject: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_GET_ACL);
    request.set_ext(SUBJECT, subject);
    request
}

/// An `acl list` request (`AUTH_LIST_ACL`), with the `subjectFilter` and
/// `resourceFilter` ext fields when given.
pub fn acl_list_request(
    subject_filter: Option<&str>,
    resource_filter: Option<&str>,
) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_LIST_ACL);
    if let Some(filter) = subject_filter {
        request.set_ext("subjectFilter", filter);
    }
    if let Some(filter) = resource_filter {
        request.set_ext("resourceFilter", filter);
    }
    request
}

/// `acl get` and `acl list`: the lists each broker asked holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AclReport {
    /// The lists, by broker then subject.
    pub acls: Vec<AclRow>,
    /// `acl get`: the brokers that hold no list of the subject.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub absent_on: Vec<String>,
    /// `acl get`: the subject asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// One subject's list as one broker holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AclRow {
    /// The broker's address.
    pub broker: String,
    /// The list: `subject` and `policies`, as the broker sent them.
    #[serde(flatten)]
    pub acl: AclInfo,
}

impl Report for AclReport {
    fn text(&self) -> String {
        let mut out = String::new();
        if !self.acls.is_empty() {
            let mut t = Table::new(&[
                ("Broker", Align::Left),
                ("Subject", Align::Left),
                ("Policy", Align::Left),
                ("Resource", Align::Left),
                ("Actions", Align::Left),
                ("SourceIps", Align::Left),
                ("Decision", Align::Left),
            ]);
            for row in &self.acls {
                let subject = || vec![row.broker.clone(), row.acl.subject.clone()];
                if row.acl.policies.iter().all(|p| p.entries.is_empty()) {
                    t.row(subject());
                }
                for policy in &row.acl.policies {
                    // An absent policy type is `Custom`, an absent decision
                    // `Allow`.
                    let kind = policy.policy_type.as_deref().unwrap_or("Custom");
                    for e in &policy.entries {
                        let mut cells = subject();
                        cells.extend([
                            kind.to_owned(),
                            e.resource.clone(),
                            e.actions.join(","),
                            if e.source_ips.is_empty() {
                                "any".to_owned()
                            } else {
                                e.source_ips.join(",")
                            },
                            e.decision.as_deref().unwrap_or("Allow").to_owned(),
                        ]);
                        t.row(cells);
                    }
                }
            }
            out = t.to_string();
        }
        let who = self.subject.as_deref().unwrap_or_default();
        let absent: String = self
            .absent_on
            .iter()
            .map(|b| format!("{who} has no access control list on {b}\n"))
            .collect();
        if !absent.is_empty() {
            section(&mut out, "", &absent);
        }
        if out.is_empty() {
            out.push_str("no access control lists\n");
        }
        out
    }
}

/// Creates (`AUTH_CREATE_ACL`) or updates (`AUTH_UPDATE_ACL`) the list of
/// `change` on `broker` or every master broker.
///
/// # Errors
/// The first broker that refuses or fails; the brokers before it keep the
/// change.
pub async fn acl_write(
    admin: &Admin,
    code: RequestCode,
    change: &AclChange,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let acl = change.acl_info();
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        admin
            .call(Peer::Broker, addr, acl_write_request(code, &acl))
            .await?;
    }
    let verb = if code == RequestCode::AUTH_CREATE_ACL {
        "created"
    } else {
        "updated"
    };
    Ok(ChangeReport {
        action: format!(
            "{verb} the {} policy of {} ({} {} on {})",
            change.policy_type,
            change.subject,
            change.decision,
            change.actions.join(","),
            change.resources.join(",")
        ),
        brokers,
    })
}

/// Deletes the list of `subject` (`AUTH_DELETE_ACL`), or only its policy
/// of `policy_type`, or only the entry of `resource`, on `broker` or every
/// master broker.
///
/// # Errors
/// The first broker that refuses or fails.
pub async fn acl_delete(
    admin: &Admin,
    subject: &str,
    policy_type: Option<&str>,
    resource: Option<&str>,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        let request = acl_delete_request(subject, policy_type, resource);
        admin.call(Peer::Broker, addr, request).await?;
    }
    let mut action = format!("deleted the access control list of {subject}");
    if let Some(kind) = policy_type {
        action.push_str(&format!(" ({kind} policy)"));
    }
    if let Some(resource) = resource {
        action.push_str(&format!(" for {resource}"));
    }
    Ok(ChangeReport { action, brokers })
}

/// The list of `subject` on `broker` or every master broker
/// (`AUTH_GET_ACL`; an answer without a body: none).
///
/// # Errors
/// The first broker that refuses or fails, or an answer that cannot be
/// read.
pub async fn acl_get(
    admin: &Admin,
    subject: &str,
    broker: Option<&str>,
) -> Result<AclReport, AdminError> {
    let mut report = AclReport {
        subject: Some(subject.to_owned()),
        ..AclReport::default()
    };
    for addr in admin.targets(broker).await? {
        let answer = admin
            .call(Peer::Broker, &addr, acl_get_request(subject))
            .await?;
        match optional_json::<Option<AclInfo>>(&addr, RequestCode::AUTH_GET_ACL, &answer)?.flatten()
        {
            Some(acl) => report.acls.push(AclRow { broker: addr, acl }),
            None => report.absent_on.push(addr),
        }
    }
    Ok(report)
}

/// Every list on `broker` or every master broker, or those matching the
/// filters (`AUTH_LIST_ACL`), sorted by broker then subject.
///
/// # Errors
/// The first broker that refuses or fails, or an answer that cannot be
/// read.
pub async fn acl_list(
    admin: &Admin,
    subject_filter: Option<&str>,
    resource_filter: Option<&str>,
    broker: Option<&str>,
) -> Result<AclReport, AdminError> {
    let mut report = AclReport::default();
    for addr in admin.targets(broker).await? {
        let request = acl_list_request(subject_filter, resource_filter);
        let answer = admin.call(Peer::Broker, &addr, request).await?;
        let mut acls: Vec<AclInfo> =
            optional_json::<Option<Vec<AclInfo>>>(&addr, RequestCode::AUTH_LIST_ACL, &answer)?
                .flatten()
                .unwrap_or_default();
        acls.sort_by(|a, b| a.subject.cmp(&b.subject));
        report.acls.extend(acls.into_iter().map(|acl| AclRow {
            broker: addr.clone(),
            acl,
        }));
    }
    Ok(report)
}
