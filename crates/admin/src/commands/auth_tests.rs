//! Unit tests of `user` and `acl`: the requests (codes, ext fields, JSON
//! bodies), the lenient reading of answers, and the text and JSON reports.

use bytes::Bytes;
use remoting_protocol::{
    body::{AclInfo, UserInfo},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::{json, Value};

use super::*;
use crate::render::{render, Report};

fn body_json(request: &RemotingCommand) -> Value {
    serde_json::from_slice(&request.body).unwrap_or_else(|e| panic!("{e}"))
}

fn fields(request: &RemotingCommand) -> Vec<(String, String)> {
    request
        .ext_fields
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
        .collect()
}

fn answer(body: &'static str) -> RemotingCommand {
    RemotingCommand::response(ResponseCode::SUCCESS, None)
        .with_body(Bytes::from_static(body.as_bytes()))
}

#[test]
fn user_create_sends_the_name_in_the_header_and_the_user_as_json() {
    let user = user_info("alice", Some("pw"), Some("Super"), Some("enable"));
    let request = user_write_request(RequestCode::AUTH_CREATE_USER, &user);
    assert_eq!(request.request_code(), RequestCode::AUTH_CREATE_USER);
    assert_eq!(request.code, 3001);
    assert_eq!(fields(&request), [("username".into(), "alice".into())]);
    assert_eq!(
        std::str::from_utf8(&request.body).unwrap_or_default(),
        r#"{"username":"alice","password":"pw","userType":"Super","userStatus":"enable"}"#
    );
}

#[test]
fn user_update_leaves_out_what_was_not_given() {
    let user = user_info("alice", None, None, Some("disable"));
    let request = user_write_request(RequestCode::AUTH_UPDATE_USER, &user);
    assert_eq!(request.code, 3002);
    assert_eq!(request.ext("username"), Some("alice"));
    assert_eq!(
        body_json(&request),
        json!({"username": "alice", "userStatus": "disable"})
    );
    let create = user_write_request(
        RequestCode::AUTH_CREATE_USER,
        &user_info("bob", Some("pw"), None, None),
    );
    assert_eq!(
        body_json(&create),
        json!({"username": "bob", "password": "pw"})
    );
}

#[test]
fn user_delete_get_and_list_carry_only_their_header_fields() {
    let delete = user_delete_request("alice");
    assert_eq!((delete.code, delete.body.len()), (3003, 0));
    assert_eq!(fields(&delete), [("username".into(), "alice".into())]);
    let get = user_get_request("alice");
    assert_eq!((get.code, get.body.len()), (3004, 0));
    assert_eq!(fields(&get), [("username".into(), "alice".into())]);
    let list = user_list_request(Some("ali"));
    assert_eq!(list.code, 3005);
    assert_eq!(fields(&list), [("filter".into(), "ali".into())]);
    assert!(user_list_request(None).ext_fields.is_empty());
}

fn change() -> AclChange {
    AclChange {
        subject: "User:alice".into(),
        policy_type: "Custom".into(),
        resources: vec!["Topic:orders".into()],
        actions: vec!["Pub".into(), "Sub".into()],
        source_ips: vec!["10.0.0.0/8".into()],
        decision: "Allow".into(),
    }
}

#[test]
fn acl_create_sends_the_subject_in_the_header_and_the_list_as_json() {
    let request = acl_write_request(RequestCode::AUTH_CREATE_ACL, &change().acl_info());
    assert_eq!(request.code, 3006);
    assert_eq!(fields(&request), [("subject".into(), "User:alice".into())]);
    assert_eq!(
        std::str::from_utf8(&request.body).unwrap_or_default(),
        r#"{"subject":"User:alice","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:orders","actions":["Pub","Sub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}"#
    );
}

#[test]
fn acl_update_makes_one_entry_per_resource_with_the_same_actions() {
    let mut c = change();
    c.resources = vec!["Topic:orders".into(), "Group:billing".into()];
    c.source_ips.clear();
    c.decision = "Deny".into();
    c.policy_type = "Default".into();
    let request = acl_write_request(RequestCode::AUTH_UPDATE_ACL, &c.acl_info());
    assert_eq!(request.code, 3007);
    assert_eq!(
        body_json(&request),
        json!({"subject": "User:alice", "policies": [{"policyType": "Default", "entries": [
            {"resource": "Topic:orders", "actions": ["Pub", "Sub"], "sourceIps": [], "decision": "Deny"},
            {"resource": "Group:billing", "actions": ["Pub", "Sub"], "sourceIps": [], "decision": "Deny"}
        ]}]})
    );
}

#[test]
fn acl_delete_get_and_list_carry_only_the_fields_given() {
    let all = acl_delete_request("User:alice", None, None);
    assert_eq!((all.code, all.body.len()), (3008, 0));
    assert_eq!(fields(&all), [("subject".into(), "User:alice".into())]);
    let one = acl_delete_request("User:alice", Some("Custom"), Some("Topic:orders"));
    assert_eq!(one.ext("policyType"), Some("Custom"));
    assert_eq!(one.ext("resource"), Some("Topic:orders"));
    assert_eq!(one.ext_fields.len(), 3);
    let get = acl_get_request("User:alice");
    assert_eq!(get.code, 3009);
    assert_eq!(fields(&get), [("subject".into(), "User:alice".into())]);
    let list = acl_list_request(Some("User:a"), Some("Topic:o"));
    assert_eq!(list.code, 3010);
    assert_eq!(list.ext("subjectFilter"), Some("User:a"));
    assert_eq!(list.ext("resourceFilter"), Some("Topic:o"));
    assert!(acl_list_request(None, None).ext_fields.is_empty());
    assert_eq!(acl_list_request(None, Some("T")).ext_fields.len(), 1);
}

#[test]
fn answers_read_leniently_and_no_body_is_none() {
    let user: Option<UserInfo> = optional_json(
        "b:1",
        RequestCode::AUTH_GET_USER,
        &answer(r#"{"username":"alice","userType":"Normal","createdAt":17,"extra":{"a":1}}"#),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let user = user.unwrap_or_default();
    assert_eq!(user.username.as_deref(), Some("alice"));
    assert_eq!((user.password, user.user_status), (None, None));
    let none: Option<UserInfo> = optional_json("b:1", RequestCode::AUTH_GET_USER, &answer(""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none, None);
    let null: Option<Option<Vec<AclInfo>>> =
        optional_json("b:1", RequestCode::AUTH_LIST_ACL, &answer("null"))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(null.flatten(), None);
    let acls: Option<Vec<AclInfo>> = optional_json(
        "b:1",
        RequestCode::AUTH_LIST_ACL,
        &answer(r#"[{"subject":"User:a","policies":[{"entries":[{"resource":"Topic:t","actions":["Pub"]}]}]},{"subject":"User:b"}]"#),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let acls = acls.unwrap_or_default();
    assert_eq!(acls.len(), 2);
    assert!(acls[1].policies.is_empty());
    let broken = optional_json::<UserInfo>("b:1", RequestCode::AUTH_GET_USER, &answer("{oops"));
    let text = broken.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("b:1") && text.contains("AUTH_GET_USER"),
        "{text}"
    );
}

fn users(show_password: bool) -> UserReport {
    let alice = user_info("alice", Some("secret-pw"), Some("Super"), Some("enable"));
    let bob = UserInfo {
        username: Some("bob".into()),
        ..UserInfo::default()
    };
    UserReport {
        users: vec![
            UserRow::of("a:1", alice, show_password),
            UserRow::of("a:1", bob, show_password),
        ],
        ..UserReport::default()
    }
}

#[test]
fn users_render_with_passwords_masked_unless_asked_for() {
    let masked = users(false);
    assert_eq!(
        masked.text(),
        "Broker  Username  Password  Type   Status\n\
         a:1     alice     ***       Super  enable\n\
         a:1     bob       -         -      -\n"
    );
    let json: Value =
        serde_json::from_str(&render(&masked, true)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["users"][0]["password"], "***");
    assert_eq!(json["users"][0]["userType"], "Super");
    assert_eq!(json["users"][1]["password"], Value::Null);
    assert!(!render(&masked, true).contains("secret-pw"));
    let shown = users(true);
    assert!(shown.text().contains("secret-pw"), "{}", shown.text());
    assert_eq!(
        serde_json::from_str::<Value>(&render(&shown, true)).unwrap_or_default()["users"][0]
            ["password"],
        "secret-pw"
    );
}

#[test]
fn a_missing_user_or_an_empty_list_says_so() {
    let missing = UserReport {
        username: Some("carol".into()),
        absent_on: vec!["a:1".into()],
        ..UserReport::default()
    };
    assert_eq!(missing.text(), "user carol does not exist on a:1\n");
    let json: Value = serde_json::from_str(&render(&missing, true)).unwrap_or_default();
    assert_eq!(json["absentOn"][0], "a:1");
    assert_eq!(UserReport::default().text(), "no users\n");
    assert_eq!(AclReport::default().text(), "no access control lists\n");
}

#[test]
fn acls_render_one_row_per_entry() {
    let mut two = change();
    two.resources.push("Group:billing".into());
    let bare = AclInfo {
        subject: "User:bob".into(),
        ..AclInfo::default()
    };
    let report = AclReport {
        acls: vec![
            AclRow {
                broker: "a:1".into(),
                acl: two.acl_info(),
            },
            AclRow {
                broker: "a:1".into(),
                acl: bare,
            },
        ],
        ..AclReport::default()
    };
    assert_eq!(
        report.text(),
        "Broker  Subject     Policy  Resource       Actions  SourceIps   Decision\n\
         a:1     User:alice  Custom  Topic:orders   Pub,Sub  10.0.0.0/8  Allow\n\
         a:1     User:alice  Custom  Group:billing  Pub,Sub  10.0.0.0/8  Allow\n\
         a:1     User:bob\n"
    );
    let json: Value = serde_json::from_str(&render(&report, true)).unwrap_or_default();
    assert_eq!(json["acls"][0]["broker"], "a:1");
    assert_eq!(json["acls"][0]["subject"], "User:alice");
    assert_eq!(
        json["acls"][0]["policies"][0]["entries"][1]["resource"],
        "Group:billing"
    );
    let absent = AclReport {
        subject: Some("User:carol".into()),
        absent_on: vec!["a:1".into(), "b:1".into()],
        ..AclReport::default()
    };
    assert_eq!(
        absent.text(),
        "User:carol has no access control list on a:1\nUser:carol has no access control list on b:1\n"
    );
}

#[test]
fn changes_report_each_broker() {
    let report = ChangeReport {
        action: "created user alice".into(),
        brokers: vec!["a:1".into(), "b:1".into()],
    };
    assert_eq!(
        report.text(),
        "created user alice on a:1\ncreated user alice on b:1\n"
    );
}
