//! The bodies of the user and ACL admin codes (`AUTH_CREATE_USER` 3001 to
//! `AUTH_LIST_ACL` 3010): a user with its secret, type and status, and a
//! subject's policies of allow and deny entries.
//!
//! Enumerated values (`userType`, `policyType`, `decision`, actions) stay
//! strings here, as clients wrote them; the broker reads them case-blind.

use serde::{Deserialize, Serialize};

use super::lenient::{list, string};

/// A user (`UserInfo`): its name (the access key), password (the secret
/// key), type (`Super` or `Normal`) and status (`enable` or `disable`).
/// Fields a request leaves out are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserInfo {
    /// User name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Password, which signs the user's requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `Super` or `Normal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// `enable` or `disable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
}

/// A subject's access control list (`AclInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AclInfo {
    /// Whose policies these are, such as `User:alice`.
    #[serde(deserialize_with = "string")]
    pub subject: String,
    /// The policies, at most one per policy type.
    #[serde(deserialize_with = "list")]
    pub policies: Vec<PolicyInfo>,
}

/// A policy (`PolicyInfo`): its type (`Custom`, or `Default` — consulted
/// only when no custom entry matches) and entries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyInfo {
    /// `Custom` or `Default`; absent means `Custom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
    /// The entries.
    #[serde(deserialize_with = "list")]
    pub entries: Vec<PolicyEntryInfo>,
}

/// One policy entry (`PolicyEntryInfo`): a resource (`Topic:orders`,
/// `Group:billing*`, `Cluster:c1`, `*`), the actions it covers, the
/// source addresses it applies to (none: any), and `Allow` or `Deny`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyEntryInfo {
    /// The resource pattern.
    #[serde(deserialize_with = "string")]
    pub resource: String,
    /// Action names: `All`, `Pub`, `Sub`, `Create`, `Update`, `Delete`,
    /// `Get`, `List`.
    #[serde(deserialize_with = "list")]
    pub actions: Vec<String>,
    /// Addresses or CIDR blocks; empty for any.
    #[serde(deserialize_with = "list")]
    pub source_ips: Vec<String>,
    /// `Allow` or `Deny`; absent means `Allow`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_json};

    #[test]
    fn user_and_acl_bodies_read_as_clients_write_them() {
        let user: UserInfo = from_json(
            br#"{"username":"alice","password":"pw","userType":"Normal","userStatus":"enable","extra":1}"#,
        )
        .unwrap();
        assert_eq!(user.username.as_deref(), Some("alice"));
        assert_eq!(user.user_type.as_deref(), Some("Normal"));
        let partial: UserInfo = from_json(br#"{"username":"bob"}"#).unwrap();
        assert_eq!(partial.password, None);
        assert_eq!(
            String::from_utf8(to_json(&partial)).unwrap(),
            r#"{"username":"bob"}"#
        );
        let acl: AclInfo = from_json(
            br#"{"subject":"User:alice","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:t","actions":["Pub","Sub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}"#,
        )
        .unwrap();
        assert_eq!(acl.subject, "User:alice");
        let entry = &acl.policies[0].entries[0];
        assert_eq!(entry.actions, ["Pub", "Sub"]);
        assert_eq!(entry.source_ips, ["10.0.0.0/8"]);
        let back: AclInfo = from_json(&to_json(&acl)).unwrap();
        assert_eq!(back, acl);
        let bare: AclInfo = from_json(br#"{"subject":"User:x","policies":null}"#).unwrap();
        assert!(bare.policies.is_empty());
    }
}
