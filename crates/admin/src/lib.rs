//! `sluice-admin`: the admin tool for Sluice clusters,
//! speaking the remoting protocol to name servers and brokers.
//!
//! - [`args`]: the command line (`cluster`, `topic`, `group`,
//!   `connections`, `broker config`, `broker drain`/`undrain`, `why-busy`,
//!   `message get`, `user`, `acl`), `--access-key`/`--secret-key`, which
//!   sign every request, and `--tls` (with `--tls-trust`, `--tls-cert`,
//!   `--tls-key`), which makes every connection over TLS.
//! - [`call`]: requests with a timeout, answers checked and read, and the
//!   lookups commands start from (cluster info, routes, master brokers).
//! - [`commands`]: what each command asks and the report it returns.
//! - [`render`](mod@render): aligned text tables and JSON.
//! - [`error`]: failures naming the server, the request, the code and the
//!   remark.
//! - [`why_busy`]: which flow-control mechanism refuses sends, why, and what
//!   would change it.
//!
//! [`run`] runs one parsed command line and returns what to print;
//! [`run_each`] hands over each part as soon as it is ready (each look of
//! `why-busy --watch`).
#![deny(clippy::unwrap_used)]

pub mod args;
pub mod call;
pub mod commands;
pub mod error;
pub mod render;
pub mod why_busy;

use std::{collections::BTreeMap, time::Duration};

pub use args::Cli;
pub use call::Admin;
pub use error::{AdminError, Peer};

use args::{
    AclCommand, BrokerCommand, Command, ConfigCommand, ControllerCommand, GroupCommand,
    MessageCommand, TopicCommand, UserCommand, WhyBusyArgs,
};
use remoting_protocol::RequestCode;
use render::render;

/// Runs `cli`'s command and returns its output: text tables, or JSON with
/// `--json`.
///
/// # Errors
/// The command's failure, naming the server, request, code and remark.
pub async fn run(cli: &Cli) -> Result<String, AdminError> {
    let mut all = String::new();
    run_each(cli, |part| all.push_str(&part)).await?;
    Ok(all)
}

/// Runs `cli`'s command, handing each part of its output to `emit` as soon
/// as it is ready: one part for most commands, one per look for
/// `why-busy --watch`.
///
/// # Errors
/// As [`run`]; parts already handed over stay handed over.
pub async fn run_each(cli: &Cli, mut emit: impl FnMut(String)) -> Result<(), AdminError> {
    let admin = Admin::with_security(
        &cli.namesrv,
        Duration::from_millis(cli.timeout_ms),
        cli.credentials()?,
        cli.tls.client_tls()?,
    );
    let out = match &cli.command {
        Command::WhyBusy(w) => watch(&admin, w, cli.json, &mut emit).await,
        _ => dispatch(&admin, cli).await.map(&mut emit),
    };
    admin.close().await;
    out
}

/// `why-busy`: one look, or `count` looks `watch` seconds apart.
async fn watch(
    admin: &Admin,
    args: &WhyBusyArgs,
    json: bool,
    emit: &mut impl FnMut(String),
) -> Result<(), AdminError> {
    let looks = if args.watch.is_some() { args.count } else { 1 };
    let period = Duration::from_secs_f64(args.watch.unwrap_or(0.0));
    let mut previous = BTreeMap::new();
    for n in 1..=looks {
        let started = tokio::time::Instant::now();
        let (mut report, samples) =
            why_busy::why_busy(admin, args.target.broker.as_deref(), &previous).await?;
        report.refresh = args.watch.map(|_| n);
        emit(render(&report, json));
        previous = samples;
        if n < looks {
            tokio::time::sleep_until(started + period).await;
        }
    }
    Ok(())
}

async fn controller(
    admin: &Admin,
    command: &ControllerCommand,
    json: bool,
) -> Result<String, AdminError> {
    Ok(match command {
        ControllerCommand::Meta(m) => render(
            &commands::controller_meta(admin, &m.controller).await?,
            json,
        ),
        ControllerCommand::SyncState(s) => render(
            &commands::sync_state(admin, &s.target.controller, &s.broker_name).await?,
            json,
        ),
        ControllerCommand::Elect(e) => render(
            &commands::elect_master(
                admin,
                &e.target.controller,
                e.cluster.as_deref(),
                &e.broker_name,
                e.broker_id,
            )
            .await?,
            json,
        ),
        ControllerCommand::Clean(c) => render(
            &commands::clean_broker_metadata(
                admin,
                &c.target.controller,
                c.cluster.as_deref(),
                &c.broker_name,
                c.broker_ids.as_deref(),
                c.clean_living,
            )
            .await?,
            json,
        ),
    })
}

async fn dispatch(admin: &Admin, cli: &Cli) -> Result<String, AdminError> {
    let json = cli.json;
    Ok(match &cli.command {
        Command::Cluster => render(&commands::cluster(admin).await?, json),
        Command::Topic(TopicCommand::List(t)) => {
            let report = match &t.cluster {
                Some(cluster) => commands::topic_list_in_cluster(admin, cluster).await?,
                None => commands::topic_list(admin, t.target.broker.as_deref()).await?,
            };
            render(&report, json)
        }
        Command::Topic(TopicCommand::Delete(d)) => render(
            &commands::topic_delete(admin, &d.topic, d.cluster.as_deref()).await?,
            json,
        ),
        Command::Message(MessageCommand::Get(g)) => {
            let lookup = match (&g.id, &g.key, &g.topic, g.offset, &g.broker) {
                (Some(id), ..) => commands::MessageLookup::Id(id.clone()),
                (None, Some(key), Some(topic), ..) => commands::MessageLookup::Key(
                    commands::KeyQuery::by_key(topic, key, g.max, g.begin, g.end),
                ),
                (None, None, _, Some(offset), Some(broker)) => commands::MessageLookup::Offset {
                    broker: broker.clone(),
                    offset,
                },
                // clap requires --id, --key with --topic, or --offset with
                // --broker.
                _ => return Ok(String::new()),
            };
            render(
                &commands::message_get(admin, &lookup, g.topic.as_deref(), g.full_body).await?,
                json,
            )
        }
        Command::Topic(TopicCommand::Create(c)) => render(
            &commands::topic_create(admin, &c.topic, c.queues, c.target.broker.as_deref()).await?,
            json,
        ),
        Command::Topic(TopicCommand::Status(s)) => render(
            &commands::topic_status(admin, &s.topic, s.target.broker.as_deref()).await?,
            json,
        ),
        Command::Topic(TopicCommand::Route(r)) => {
            render(&commands::topic_route(admin, &r.topic).await?, json)
        }
        Command::Group(GroupCommand::List(t)) => render(
            &commands::group_list(admin, t.broker.as_deref()).await?,
            json,
        ),
        Command::Group(GroupCommand::Lag(l)) => render(
            &commands::group_lag(
                admin,
                &l.group,
                l.topic.as_deref(),
                l.target.broker.as_deref(),
            )
            .await?,
            json,
        ),
        Command::Group(GroupCommand::Create(g)) => render(
            &commands::group_create(admin, &g.group, g.target.broker.as_deref()).await?,
            json,
        ),
        Command::Group(GroupCommand::Delete(g)) => render(
            &commands::group_delete(admin, &g.group, g.clean_offset, g.target.broker.as_deref())
                .await?,
            json,
        ),
        Command::Group(GroupCommand::ResetOffset(r)) => render(
            &commands::group_reset_offset(admin, &r.group, &r.topic, r.target(), r.queue).await?,
            json,
        ),
        Command::Connections(c) => {
            let broker = c.target.broker.as_deref();
            let report = match (&c.group, &c.producer_group) {
                (Some(group), _) => commands::consumer_connections(admin, group, broker).await?,
                (None, Some(group)) => commands::producer_connections(admin, group, broker).await?,
                // clap requires one of the two.
                (None, None) => commands::ConnectionsReport::default(),
            };
            render(&report, json)
        }
        Command::Broker(BrokerCommand::Config(ConfigCommand::Get(g))) => render(
            &commands::config_get(admin, &g.broker, g.key.as_deref()).await?,
            json,
        ),
        Command::Broker(BrokerCommand::Config(ConfigCommand::Set(s))) => render(
            &commands::config_set(admin, &s.broker, &s.key, &s.value).await?,
            json,
        ),
        Command::Broker(BrokerCommand::Drain(d)) => {
            render(&commands::broker_drain(admin, &d.broker_name).await?, json)
        }
        Command::Broker(BrokerCommand::Undrain(d)) => render(
            &commands::broker_undrain(admin, &d.broker_name).await?,
            json,
        ),
        Command::User(u) => user(admin, u, json).await?,
        Command::Acl(a) => acl(admin, a, json).await?,
        Command::Controller(c) => controller(admin, c, json).await?,
        // Run by `run_each`, which may look more than once.
        Command::WhyBusy(_) => String::new(),
    })
}

/// `user` subcommands.
async fn user(admin: &Admin, command: &UserCommand, json: bool) -> Result<String, AdminError> {
    Ok(match command {
        UserCommand::Create(c) => {
            let user = commands::user_info(
                &c.username,
                Some(&c.password),
                c.user_type.map(|t| t.as_str()),
                c.user_status.map(|s| s.as_str()),
            );
            let code = RequestCode::AUTH_CREATE_USER;
            render(
                &commands::user_write(admin, code, &user, c.target.broker.as_deref()).await?,
                json,
            )
        }
        UserCommand::Update(u) => {
            let user = commands::user_info(
                &u.username,
                u.password.as_deref(),
                u.user_type.map(|t| t.as_str()),
                u.user_status.map(|s| s.as_str()),
            );
            let code = RequestCode::AUTH_UPDATE_USER;
            render(
                &commands::user_write(admin, code, &user, u.target.broker.as_deref()).await?,
                json,
            )
        }
        UserCommand::Delete(d) => render(
            &commands::user_delete(admin, &d.username, d.target.broker.as_deref()).await?,
            json,
        ),
        UserCommand::Get(g) => render(
            &commands::user_get(
                admin,
                &g.username,
                g.show_password,
                g.target.broker.as_deref(),
            )
            .await?,
            json,
        ),
        UserCommand::List(l) => render(
            &commands::user_list(
                admin,
                l.filter.as_deref(),
                l.show_password,
                l.target.broker.as_deref(),
            )
            .await?,
            json,
        ),
    })
}

/// `acl` subcommands.
async fn acl(admin: &Admin, command: &AclCommand, json: bool) -> Result<String, AdminError> {
    Ok(match command {
        AclCommand::Create(w) | AclCommand::Update(w) => {
            let code = match command {
                AclCommand::Create(_) => RequestCode::AUTH_CREATE_ACL,
                _ => RequestCode::AUTH_UPDATE_ACL,
            };
            let change = commands::AclChange {
                subject: w.subject.clone(),
                policy_type: w.policy_type.as_str().to_owned(),
                resources: w.resources.clone(),
                actions: w.actions.clone(),
                source_ips: w.source_ips.clone(),
                decision: w.decision.as_str().to_owned(),
            };
            render(
                &commands::acl_write(admin, code, &change, w.target.broker.as_deref()).await?,
                json,
            )
        }
        AclCommand::Delete(d) => render(
            &commands::acl_delete(
                admin,
                &d.subject,
                d.policy_type.map(|t| t.as_str()),
                d.resource.as_deref(),
                d.target.broker.as_deref(),
            )
            .await?,
            json,
        ),
        AclCommand::Get(g) => render(
            &commands::acl_get(admin, &g.subject, g.target.broker.as_deref()).await?,
            json,
        ),
        AclCommand::List(l) => render(
            &commands::acl_list(
                admin,
                l.subject_filter.as_deref(),
                l.resource_filter.as_deref(),
                l.target.broker.as_deref(),
            )
            .await?,
            json,
        ),
    })
}
