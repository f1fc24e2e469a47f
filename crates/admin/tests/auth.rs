//! `user` and `acl` against a fake broker that keeps users and access
//! control lists in memory and refuses any request not signed by the
//! admin's access key: the commands' requests and reports, refusals named
//! with their code and remark, and the keys read from the command line or
//! from `SLUICE_ACCESS_KEY` and `SLUICE_SECRET_KEY`; then the same commands
//! against a real broker with authentication on.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use admin::Cli;
use clap::Parser;
use remoting_net::{serve, CancellationToken, Connection, Handler, ServerOptions};
use remoting_protocol::{
    acl,
    body::{from_json, to_json, AclInfo, UserInfo},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;

const ADMIN_KEY: &str = "admin";
const ADMIN_SECRET: &str = "admin-secret";

/// Users and lists by name, and the codes of the requests served.
#[derive(Default)]
struct State {
    users: BTreeMap<String, UserInfo>,
    acls: BTreeMap<String, AclInfo>,
    served: Vec<RequestCode>,
}

/// A broker's user and ACL admin codes, served from memory.
#[derive(Default)]
struct FakeBroker {
    state: Mutex<State>,
}

impl FakeBroker {
    fn serve_request(&self, request: &RemotingCommand) -> RemotingCommand {
        if acl::access_key(request) != Some(ADMIN_KEY)
            || !acl::verify(request, ADMIN_SECRET.as_bytes())
        {
            return request.response_to(
                ResponseCode::NO_PERMISSION,
                Some("check signature failed".into()),
            );
        }
        let ok = || request.response_to(ResponseCode::SUCCESS, None);
        let mut state = self.state.lock().unwrap();
        state.served.push(request.request_code());
        let username = request.ext("username").unwrap_or_default().to_owned();
        let subject = request.ext("subject").unwrap_or_default().to_owned();
        match request.request_code() {
            RequestCode::AUTH_CREATE_USER => {
                let user: UserInfo = from_json(&request.body).unwrap();
                assert_eq!(user.username.as_deref(), Some(username.as_str()));
                if state.users.contains_key(&username) {
                    return request.response_to(
                        ResponseCode::SYSTEM_ERROR,
                        Some(format!("The user is existed, username={username}")),
                    );
                }
                state.users.insert(username, user);
                ok()
            }
            RequestCode::AUTH_UPDATE_USER => {
                let change: UserInfo = from_json(&request.body).unwrap();
                let Some(user) = state.users.get_mut(&username) else {
                    return request
                        .response_to(ResponseCode::SYSTEM_ERROR, Some("no such user".into()));
                };
                user.password = change.password.or(user.password.take());
                user.user_type = change.user_type.or(user.user_type.take());
                user.user_status = change.user_status.or(user.user_status.take());
                ok()
            }
            RequestCode::AUTH_DELETE_USER => {
                state.users.remove(&username);
                ok()
            }
            RequestCode::AUTH_GET_USER => match state.users.get(&username) {
                Some(user) => ok().with_body(to_json(user)),
                None => ok(),
            },
            RequestCode::AUTH_LIST_USER => {
                let filter = request.ext("filter").unwrap_or_default();
                let users: Vec<&UserInfo> = state
                    .users
                    .iter()
                    .filter(|(name, _)| name.contains(filter))
                    .map(|(_, u)| u)
                    .collect();
                ok().with_body(to_json(&users))
            }
            RequestCode::AUTH_CREATE_ACL | RequestCode::AUTH_UPDATE_ACL => {
                let list: AclInfo = from_json(&request.body).unwrap();
                assert_eq!(list.subject, subject);
                state.acls.insert(subject, list);
                ok()
            }
            RequestCode::AUTH_DELETE_ACL => {
                state.acls.remove(&subject);
                ok()
            }
            RequestCode::AUTH_GET_ACL => match state.acls.get(&subject) {
                Some(list) => ok().with_body(to_json(list)),
                None => ok(),
            },
            RequestCode::AUTH_LIST_ACL => {
                let lists: Vec<&AclInfo> = state.acls.values().collect();
                ok().with_body(to_json(&lists))
            }
            _ => request.response_to(ResponseCode::REQUEST_CODE_NOT_SUPPORTED, None),
        }
    }
}

impl Handler for FakeBroker {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let answer = self.serve_request(&request);
        conn.send(answer);
    }
}

struct Running {
    addr: String,
    broker: Arc<FakeBroker>,
    stop: CancellationToken,
}

impl Running {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let broker = Arc::new(FakeBroker::default());
        let stop = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            Arc::clone(&broker),
            ServerOptions::default(),
            stop.clone(),
        ));
        Self { addr, broker, stop }
    }

    /// Runs `sluice-admin <keys> <args> --broker <this>`.
    async fn run(&self, keys: &[&str], args: &[&str]) -> Result<String, admin::AdminError> {
        let argv: Vec<&str> = ["sluice-admin", "--timeout-ms", "5000"]
            .into_iter()
            .chain(keys.iter().copied())
            .chain(args.iter().copied())
            .chain(["--broker", self.addr.as_str()])
            .collect();
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        tokio::time::timeout(Duration::from_secs(20), admin::run(&cli))
            .await
            .expect("the command did not end")
    }

    /// As [`Running::run`] signed with the admin's keys.
    async fn signed(&self, args: &[&str]) -> String {
        let keys = ["--access-key", ADMIN_KEY, "--secret-key", ADMIN_SECRET];
        self.run(&keys, args)
            .await
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_created_read_changed_and_deleted_with_signed_requests() {
    let b = Running::start().await;
    let create = [
        "user",
        "create",
        "--username",
        "alice",
        "--password",
        "pw-1",
    ];
    let created = b
        .signed(&[&create[..], &["--user-type", "Super"]].concat())
        .await;
    assert_eq!(created, format!("created user alice on {}\n", b.addr));

    let again = b
        .run(
            &["--access-key", ADMIN_KEY, "--secret-key", ADMIN_SECRET],
            &create,
        )
        .await;
    assert_eq!(
        again.unwrap_err().to_string(),
        format!(
            "broker {} refused AUTH_CREATE_USER: SYSTEM_ERROR (1): The user is existed, username=alice",
            b.addr
        )
    );

    let got = b.signed(&["user", "get", "--username", "alice"]).await;
    assert_eq!(
        got,
        format!(
            "Broker{pad}  Username  Password  Type   Status\n{}  alice     ***       Super  -\n",
            b.addr,
            pad = " ".repeat(b.addr.len() - "Broker".len())
        )
    );
    let shown = b
        .signed(&["user", "get", "--username", "alice", "--show-password"])
        .await;
    assert!(shown.contains("pw-1"), "{shown}");

    b.signed(&[
        "user",
        "update",
        "--username",
        "alice",
        "--user-status",
        "disable",
    ])
    .await;
    b.signed(&["user", "create", "--username", "bob", "--password", "pw-2"])
        .await;
    let listed: Value = serde_json::from_str(&b.signed(&["--json", "user", "list"]).await).unwrap();
    let users = listed["users"].as_array().unwrap();
    assert_eq!(users.len(), 2, "{listed}");
    assert_eq!(users[0]["username"], "alice");
    assert_eq!(users[0]["userStatus"], "disable");
    assert_eq!(users[0]["userType"], "Super");
    assert_eq!(users[0]["password"], "***");
    assert_eq!(users[1]["broker"], b.addr.as_str());
    let filtered = b.signed(&["user", "list", "--filter", "bo"]).await;
    assert!(
        filtered.contains("bob") && !filtered.contains("alice"),
        "{filtered}"
    );

    b.signed(&["user", "delete", "--username", "alice"]).await;
    let gone = b.signed(&["user", "get", "--username", "alice"]).await;
    assert_eq!(gone, format!("user alice does not exist on {}\n", b.addr));
    b.signed(&["user", "delete", "--username", "bob"]).await;
    assert_eq!(b.signed(&["user", "list"]).await, "no users\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_control_lists_are_created_read_and_deleted() {
    let b = Running::start().await;
    b.signed(&[
        "acl",
        "create",
        "--subject",
        "User:alice",
        "--resource",
        "Topic:orders",
        "--resource",
        "Group:billing",
        "--actions",
        "Pub,Sub",
        "--source-ip",
        "10.0.0.0/8",
    ])
    .await;
    let got: Value = serde_json::from_str(
        &b.signed(&["--json", "acl", "get", "--subject", "User:alice"])
            .await,
    )
    .unwrap();
    let entries = &got["acls"][0]["policies"][0]["entries"];
    assert_eq!(entries[0]["resource"], "Topic:orders");
    assert_eq!(entries[1]["resource"], "Group:billing");
    assert_eq!(entries[1]["actions"], serde_json::json!(["Pub", "Sub"]));
    assert_eq!(entries[1]["sourceIps"][0], "10.0.0.0/8");
    assert_eq!(entries[1]["decision"], "Allow");
    let text = b.signed(&["acl", "list"]).await;
    assert!(
        text.contains("User:alice  Custom  Group:billing  Pub,Sub  10.0.0.0/8  Allow"),
        "{text}"
    );
    b.signed(&[
        "acl",
        "delete",
        "--subject",
        "User:alice",
        "--policy-type",
        "Custom",
    ])
    .await;
    let gone = b.signed(&["acl", "get", "--subject", "User:alice"]).await;
    assert_eq!(
        gone,
        format!("User:alice has no access control list on {}\n", b.addr)
    );
    let served = b.broker.state.lock().unwrap().served.clone();
    assert_eq!(
        served,
        [
            RequestCode::AUTH_CREATE_ACL,
            RequestCode::AUTH_GET_ACL,
            RequestCode::AUTH_LIST_ACL,
            RequestCode::AUTH_DELETE_ACL,
            RequestCode::AUTH_GET_ACL,
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_or_badly_signed_requests_are_refused_with_code_and_remark() {
    let b = Running::start().await;
    for keys in [
        &[][..],
        &["--access-key", ADMIN_KEY, "--secret-key", "wrong"][..],
    ] {
        let err = b.run(keys, &["user", "list"]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "broker {} refused AUTH_LIST_USER: NO_PERMISSION (16): check signature failed",
                b.addr
            )
        );
    }
    assert!(b.broker.state.lock().unwrap().served.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reads_the_keys_from_the_environment() {
    let b = Running::start().await;
    b.signed(&[
        "user",
        "create",
        "--username",
        "carol",
        "--password",
        "pw-3",
    ])
    .await;
    let addr = b.addr.clone();
    let run = move |env: &'static [(&'static str, &'static str)]| {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice-admin"))
                .args(["user", "get", "--username", "carol", "--broker", &addr])
                .env_remove("SLUICE_ACCESS_KEY")
                .env_remove("SLUICE_SECRET_KEY")
                .envs(env.iter().copied())
                .output()
                .unwrap()
        })
    };
    let signed = run(&[
        ("SLUICE_ACCESS_KEY", ADMIN_KEY),
        ("SLUICE_SECRET_KEY", ADMIN_SECRET),
    ])
    .await
    .unwrap();
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let stdout = String::from_utf8_lossy(&signed.stdout);
    assert!(
        stdout.contains("carol") && stdout.contains("***"),
        "{stdout}"
    );

    let unsigned = run(&[]).await.unwrap();
    assert!(!unsigned.status.success());
    let stderr = String::from_utf8_lossy(&unsigned.stderr);
    assert!(stderr.contains("NO_PERMISSION (16)"), "{stderr}");

    let half = run(&[("SLUICE_ACCESS_KEY", ADMIN_KEY)]).await.unwrap();
    assert!(!half.status.success());
    let stderr = String::from_utf8_lossy(&half.stderr);
    assert!(stderr.contains("--secret-key"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_authentication_on_serves_the_commands_its_admin_signs() {
    common::bounded(async {
        let init = format!(r#"{{"username":"{ADMIN_KEY}","password":"{ADMIN_SECRET}"}}"#);
        let b = common::TestBroker::start(&[
            ("authenticationEnabled", "true"),
            ("initAuthenticationUser", &init),
        ])
        .await;
        let run = |args: &[&str]| {
            let keys = ["--access-key", ADMIN_KEY, "--secret-key", ADMIN_SECRET];
            let all: Vec<String> = keys
                .iter()
                .chain(args)
                .chain(&["--broker", b.addr.as_str()])
                .map(|a| (*a).to_owned())
                .collect();
            let namesrv = b.namesrv.clone();
            async move {
                let all: Vec<&str> = all.iter().map(String::as_str).collect();
                common::admin(&namesrv, &all).await
            }
        };
        let created = run(&[
            "user",
            "create",
            "--username",
            "bob",
            "--password",
            "bob-pw",
            "--user-type",
            "Normal",
        ])
        .await
        .unwrap();
        assert_eq!(created, format!("created user bob on {}\n", b.addr));
        let listed: Value =
            serde_json::from_str(&run(&["--json", "user", "list"]).await.unwrap()).unwrap();
        let names: Vec<&str> = listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|u| u["username"].as_str())
            .collect();
        assert!(
            names.contains(&ADMIN_KEY) && names.contains(&"bob"),
            "{listed}"
        );
        assert!(!listed.to_string().contains("bob-pw"), "{listed}");
        let shown = run(&["user", "get", "--username", "bob", "--show-password"])
            .await
            .unwrap();
        assert!(
            shown.contains("bob-pw") && shown.contains("Normal"),
            "{shown}"
        );

        run(&[
            "acl",
            "create",
            "--subject",
            "User:bob",
            "--resource",
            "Topic:orders",
            "--actions",
            "Pub",
        ])
        .await
        .unwrap();
        let got: Value = serde_json::from_str(
            &run(&["--json", "acl", "get", "--subject", "User:bob"])
                .await
                .unwrap(),
        )
        .unwrap();
        assert_eq!(got["acls"][0]["subject"], "User:bob", "{got}");
        assert!(got.to_string().contains("Topic:orders"), "{got}");

        let unsigned = common::admin(&b.namesrv, &["user", "list", "--broker", &b.addr])
            .await
            .unwrap_err();
        assert!(
            unsigned
                .to_string()
                .contains("refused AUTH_LIST_USER: NO_PERMISSION (16)"),
            "{unsigned}"
        );

        run(&["acl", "delete", "--subject", "User:bob"])
            .await
            .unwrap();
        run(&["user", "delete", "--username", "bob"]).await.unwrap();
        let gone = run(&["user", "get", "--username", "bob"]).await.unwrap();
        assert_eq!(gone, format!("user bob does not exist on {}\n", b.addr));
        b.broker.shutdown().await;
    })
    .await;
}
