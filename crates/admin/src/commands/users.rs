//! `user create`, `update`, `delete`, `get` and `list`: the users of
//! brokers with access control on (`AUTH_CREATE_USER` 3001 to
//! `AUTH_LIST_USER` 3005), on `--broker` or every master broker.
//!
//! A user travels as a `UserInfo` JSON body (`username`, `password`,
//! `userType`, `userStatus`), fields not given left out; the user name
//! also goes in the `username` ext field. Passwords are printed as `***`
//! unless asked for.

use remoting_protocol::{
    body::{from_json, to_json, UserInfo},
    RemotingCommand, RequestCode,
};
use serde::{de::DeserializeOwned, Serialize};

use super::ChangeReport;
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{or_dash, section, Align, Report, Table},
};

/// What a masked password is printed as.
pub const MASKED: &str = "***";

/// The ext field naming the user.
const USERNAME: &str = "username";

/// A `user create` (`AUTH_CREATE_USER`) or `user update`
/// (`AUTH_UPDATE_USER`) request for `user`: its name in the `username`
/// ext field, the user as the JSON body.
pub fn user_write_request(code: RequestCode, user: &UserInfo) -> RemotingCommand {
    let mut request = RemotingCommand::request(code);
    if let Some(name) = &user.username {
        request.set_ext(USERNAME, name.as_str());
    }
    request.with_body(to_json(user))
}

/// A `user delete` request (`AUTH_DELETE_USER`): the name only.
pub fn user_delete_request(username: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_DELETE_USER);
    request.set_ext(USERNAME, username);
    request
}

/// A `user get` request (`AUTH_GET_USER`): the name only.
pub fn user_get_request(username: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_GET_USER);
    request.set_ext(USERNAME, username);
    request
}

/// A `user list` request (`AUTH_LIST_USER`), with the `filter` ext field
/// when given.
pub fn user_list_request(filter: Option<&str>) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::AUTH_LIST_USER);
    if let Some(filter) = filter {
        request.set_ext("filter", filter);
    }
    request
}

/// The JSON body of `answer`, or `None` when it has none.
///
/// # Errors
/// [`AdminError::BadAnswer`] when there is a body but not the document.
pub fn optional_json<T: DeserializeOwned>(
    addr: &str,
    request: RequestCode,
    answer: &RemotingCommand,
) -> Result<Option<T>, AdminError> {
    if answer.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    from_json(&answer.body)
        .map(Some)
        .map_err(|e| AdminError::BadAnswer {
            peer: Peer::Broker,
            addr: addr.to_owned(),
            request,
            reason: e.to_string(),
        })
}

/// `user get` and `user list`: the users each broker asked knows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserReport {
    /// The users, by broker then name.
    pub users: Vec<UserRow>,
    /// `user get`: the brokers that do not know the user.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub absent_on: Vec<String>,
    /// `user get`: the user asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// One user as one broker knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRow {
    /// The broker's address.
    pub broker: String,
    /// The user name.
    pub username: String,
    /// The password, or [`MASKED`] unless it was asked for; `None` when the
    /// broker sent none.
    pub password: Option<String>,
    /// `Super` or `Normal`.
    pub user_type: Option<String>,
    /// `enable` or `disable`.
    pub user_status: Option<String>,
}

impl UserRow {
    /// `user` as the broker at `broker` answered it, its password masked
    /// unless `show_password`.
    pub fn of(broker: &str, user: UserInfo, show_password: bool) -> Self {
        Self {
            broker: broker.to_owned(),
            username: user.username.unwrap_or_default(),
            password: user
                .password
                .map(|p| if show_password { p } else { MASKED.to_owned() }),
            user_type: user.user_type,
            user_status: user.user_status,
        }
    }
}

impl Report for UserReport {
    fn text(&self) -> String {
        let mut out = String::new();
        if !self.users.is_empty() {
            let mut t = Table::new(&[
                ("Broker", Align::Left),
                ("Username", Align::Left),
                ("Password", Align::Left),
                ("Type", Align::Left),
                ("Status", Align::Left),
            ]);
            for u in &self.users {
                t.row(vec![
                    u.broker.clone(),
                    u.username.clone(),
                    or_dash(u.password.as_ref()),
                    or_dash(u.user_type.as_ref()),
                    or_dash(u.user_status.as_ref()),
                ]);
            }
            out = t.to_string();
        }
        let who = self.username.as_deref().unwrap_or_default();
        let absent: String = self
            .absent_on
            .iter()
            .map(|b| format!("user {who} does not exist on {b}\n"))
            .collect();
        if !absent.is_empty() {
            section(&mut out, "", &absent);
        }
        if out.is_empty() {
            out.push_str("no users\n");
        }
        out
    }
}

/// The user that `user create` or `user update` sends: the fields given.
pub fn user_info(
    username: &str,
    password: Option<&str>,
    user_type: Option<&str>,
    user_status: Option<&str>,
) -> UserInfo {
    UserInfo {
        username: Some(username.to_owned()),
        password: password.map(str::to_owned),
        user_type: user_type.map(str::to_owned),
        user_status: user_status.map(str::to_owned),
    }
}

/// Creates (`AUTH_CREATE_USER`) or updates (`AUTH_UPDATE_USER`) `user` on
/// `broker` or every master broker.
///
/// # Errors
/// The first broker that refuses or fails; the brokers before it keep the
/// change.
pub async fn user_write(
    admin: &Admin,
    code: RequestCode,
    user: &UserInfo,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        admin
            .call(Peer::Broker, addr, user_write_request(code, user))
            .await?;
    }
    let verb = if code == RequestCode::AUTH_CREATE_USER {
        "created"
    } else {
        "updated"
    };
    Ok(ChangeReport {
        action: format!(
            "{verb} user {}",
            user.username.as_deref().unwrap_or_default()
        ),
        brokers,
    })
}

/// Deletes `username` (`AUTH_DELETE_USER`) on `broker` or every master
/// broker.
///
/// # Errors
/// The first broker that refuses or fails.
pub async fn user_delete(
    admin: &Admin,
    username: &str,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        admin
            .call(Peer::Broker, addr, user_delete_request(username))
            .await?;
    }
    Ok(ChangeReport {
        action: format!("deleted user {username}"),
        brokers,
    })
}

/// `username` as `broker` or every master broker knows it
/// (`AUTH_GET_USER`; an answer without a body: no such user).
///
/// # Errors
/// The first broker that refuses or fails, or an answer that cannot be
/// read.
pub async fn user_get(
    admin: &Admin,
    username: &str,
    show_password: bool,
    broker: Option<&str>,
) -> Result<UserReport, AdminError> {
    let mut report = UserReport {
        username: Some(username.to_owned()),
        ..UserReport::default()
    };
    for addr in admin.targets(broker).await? {
        let answer = admin
            .call(Peer::Broker, &addr, user_get_request(username))
            .await?;
        // No body, or `null`: the broker knows no such user.
        match optional_json::<Option<UserInfo>>(&addr, RequestCode::AUTH_GET_USER, &answer)?
            .flatten()
        {
            Some(user) => report.users.push(UserRow::of(&addr, user, show_password)),
            None => report.absent_on.push(addr),
        }
    }
    Ok(report)
}

/// Every user `broker` or every master broker knows, or those matching
/// `filter` (`AUTH_LIST_USER`), sorted by broker then name.
///
/// # Errors
/// The first broker that refuses or fails, or an answer that cannot be
/// read.
pub async fn user_list(
    admin: &Admin,
    filter: Option<&str>,
    show_password: bool,
    broker: Option<&str>,
) -> Result<UserReport, AdminError> {
    let mut report = UserReport::default();
    for addr in admin.targets(broker).await? {
        let answer = admin
            .call(Peer::Broker, &addr, user_list_request(filter))
            .await?;
        let users: Vec<UserInfo> =
            optional_json::<Option<Vec<UserInfo>>>(&addr, RequestCode::AUTH_LIST_USER, &answer)?
                .flatten()
                .unwrap_or_default();
        let mut rows: Vec<UserRow> = users
            .into_iter()
            .map(|u| UserRow::of(&addr, u, show_password))
            .collect();
        rows.sort_by(|a, b| a.username.cmp(&b.username));
        report.users.extend(rows);
    }
    Ok(report)
}
