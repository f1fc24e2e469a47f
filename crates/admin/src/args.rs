//! Command-line flags of `sluice-admin`: the global flags (name servers,
//! timeout, output format) and one subcommand per admin task, named in
//! RocketMQ's vocabulary.

use clap::{Args, Parser, Subcommand};
use client_core::Secret;
use remoting_protocol::acl::Credentials;

use crate::error::AdminError;

mod auth;
mod tls;

pub use auth::{
    AclCommand, AclDeleteArgs, AclGetArgs, AclListArgs, AclWriteArgs, Decision, PolicyType,
    UserCommand, UserCreateArgs, UserGetArgs, UserListArgs, UserNameArgs, UserStatus, UserType,
    UserUpdateArgs, ACTIONS,
};
pub use tls::TlsArgs;

/// The default name server address.
pub const DEFAULT_NAMESRV: &str = "127.0.0.1:9876";

/// Admin tool for Sluice and Apache RocketMQ clusters, speaking the
/// remoting protocol: brokers are found through the name server
/// (`--namesrv`), or one broker is named with `--broker` where a command
/// targets one.
#[derive(Debug, Clone, Parser)]
#[command(name = "sluice-admin", version)]
pub struct Cli {
    /// Name server address(es), `host:port`, several separated by `;` or `,`.
    #[arg(long, global = true, default_value = DEFAULT_NAMESRV)]
    pub namesrv: String,
    /// Timeout of each request in milliseconds.
    #[arg(long, global = true, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Access key (user name) that signs every request, for clusters with
    /// access control on; needs --secret-key. Without both, requests go
    /// unsigned.
    #[arg(
        long,
        global = true,
        env = "SLUICE_ACCESS_KEY",
        value_name = "KEY",
        requires = "secret_key"
    )]
    pub access_key: Option<String>,
    /// Secret key (password) of --access-key, which the signatures are made
    /// with.
    #[arg(
        long,
        global = true,
        env = "SLUICE_SECRET_KEY",
        hide_env_values = true,
        value_name = "SECRET",
        requires = "access_key"
    )]
    pub secret_key: Option<Secret>,
    /// TLS of every connection (`--tls`, `--tls-trust`, `--tls-cert`,
    /// `--tls-key`).
    #[command(flatten)]
    pub tls: TlsArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The credentials of `--access-key` and `--secret-key` (or
    /// `SLUICE_ACCESS_KEY` and `SLUICE_SECRET_KEY`); `None` when neither is
    /// given. A blank value counts as not given.
    ///
    /// # Errors
    /// [`AdminError::Credentials`] when only one of them is given.
    pub fn credentials(&self) -> Result<Option<Credentials>, AdminError> {
        client_core::credentials(self.access_key.as_deref(), self.secret_key.as_ref(), None)
            .map_err(|_| AdminError::Credentials)
    }
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Brokers of every cluster known to the name server, with each
    /// broker's version, put TPS and today's message counts.
    Cluster,
    /// Topics: list, create, status (queue offsets) and route.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Consumer groups: list, lag, create and delete.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Clients connected for a consumer group or a producer group.
    Connections(ConnectionsArgs),
    /// One broker's configuration.
    #[command(subcommand)]
    Broker(BrokerCommand),
    /// Which flow-control mechanism refuses sends now or is close to it,
    /// why, and which setting or action would change it.
    WhyBusy(WhyBusyArgs),
    /// Stored messages: look one up by CommitLog offset or message id, or
    /// those of a topic by key or unique key.
    #[command(subcommand)]
    Message(MessageCommand),
    /// Users of brokers with access control on: create, update, delete,
    /// get and list.
    #[command(subcommand)]
    User(UserCommand),
    /// Access control lists of subjects: create, update, delete, get and
    /// list.
    #[command(subcommand)]
    Acl(AclCommand),
    /// The replication controllers: who leads, each broker group's master
    /// and in-sync replicas, electing a named master, forgetting brokers.
    #[command(subcommand)]
    Controller(ControllerCommand),
}

/// `controller` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum ControllerCommand {
    /// The controllers' group, leader and peers
    /// (`CONTROLLER_GET_METADATA_INFO`).
    Meta(ControllerAddrArgs),
    /// Broker groups' masters, epochs and replicas, in sync or not, alive
    /// or not (`CONTROLLER_GET_SYNC_STATE_DATA`).
    SyncState(SyncStateArgs),
    /// Make a named broker its group's master (`CONTROLLER_ELECT_MASTER`,
    /// designated): only a live in-sync replica, and only once the old
    /// master's lease is over.
    Elect(ElectArgs),
    /// Forget brokers of a group, or the whole group (`CLEAN_BROKER_DATA`);
    /// live brokers only with `--clean-living`.
    Clean(CleanArgs),
}

/// The controllers to ask.
#[derive(Debug, Clone, Args)]
pub struct ControllerAddrArgs {
    /// Controller address(es), `host:port`, several separated by `;` or
    /// `,`: the controller ports, or the name servers that host them.
    #[arg(long)]
    pub controller: String,
}

/// Flags of `controller sync-state`.
#[derive(Debug, Clone, Args)]
pub struct SyncStateArgs {
    /// The controllers to ask.
    #[command(flatten)]
    pub target: ControllerAddrArgs,
    /// Broker names (repeatable).
    #[arg(long, required = true)]
    pub broker_name: Vec<String>,
}

/// Flags of `controller elect`.
#[derive(Debug, Clone, Args)]
pub struct ElectArgs {
    /// The controllers to ask.
    #[command(flatten)]
    pub target: ControllerAddrArgs,
    /// The group's cluster name.
    #[arg(long)]
    pub cluster: Option<String>,
    /// The group's broker name.
    #[arg(long)]
    pub broker_name: String,
    /// The broker to elect: its id in the group.
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub broker_id: i64,
}

/// Flags of `controller clean`.
#[derive(Debug, Clone, Args)]
pub struct CleanArgs {
    /// The controllers to ask.
    #[command(flatten)]
    pub target: ControllerAddrArgs,
    /// The group's cluster name.
    #[arg(long)]
    pub cluster: Option<String>,
    /// The group's broker name.
    #[arg(long)]
    pub broker_name: String,
    /// The ids to forget, `1;2`; without it, the whole group.
    #[arg(long)]
    pub broker_ids: Option<String>,
    /// Forget brokers that are still alive too.
    #[arg(long)]
    pub clean_living: bool,
}

/// `message` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum MessageCommand {
    /// Stored messages: one by its CommitLog offset on a broker
    /// (`--offset N --broker ADDR`) or by its offset message id (`--id`);
    /// those of a topic by a key of their `KEYS` (`--key K --topic T`) or by
    /// their unique key (`--id K --topic T`): topic, queue, keys, tags,
    /// times, hosts, properties and body.
    Get(MessageGetArgs),
}

/// Flags of `message get`: exactly one of `--offset` (with `--broker`),
/// `--id` and `--key` (with `--topic`).
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["offset", "id", "key"])))]
pub struct MessageGetArgs {
    /// The message's physical offset in the broker's CommitLog.
    #[arg(long, requires = "broker", value_parser = clap::value_parser!(i64).range(0..))]
    pub offset: Option<i64>,
    /// The broker (`host:port`) whose CommitLog `--offset` is in.
    #[arg(long)]
    pub broker: Option<String>,
    /// An offset message id (a send result's `offsetMsgId`: the broker's
    /// address and the CommitLog offset in hexadecimal), looked up with
    /// VIEW_MESSAGE_BY_ID; with `--topic`, an id that is none or names no
    /// message there is taken as a unique key (a send result's `msgId`) and
    /// looked up with QUERY_MESSAGE among the messages stored in the last
    /// 3 days.
    #[arg(long)]
    pub id: Option<String>,
    /// A key of the messages' `KEYS`: every message of `--topic` stored
    /// under it, asked of each broker of the topic with QUERY_MESSAGE.
    #[arg(long, requires = "topic")]
    pub key: Option<String>,
    /// With `--key`: the earliest store time, ms since the epoch (default 0).
    #[arg(long, requires = "key", conflicts_with_all = ["id", "offset"], value_parser = clap::value_parser!(i64).range(0..))]
    pub begin: Option<i64>,
    /// With `--key`: the latest store time, ms since the epoch (default no
    /// limit).
    #[arg(long, requires = "key", conflicts_with_all = ["id", "offset"], value_parser = clap::value_parser!(i64).range(0..))]
    pub end: Option<i64>,
    /// With `--key`: the most messages asked of each broker (default 64,
    /// which is also the most a broker answers).
    #[arg(long, requires = "key", conflicts_with_all = ["id", "offset"], value_parser = clap::value_parser!(i32).range(1..))]
    pub max: Option<i32>,
    /// The topic: required with `--key`, needed to look up a unique key with
    /// `--id`; with `--offset` or an offset message id, a message of another
    /// topic is an error naming both topics.
    #[arg(long)]
    pub topic: Option<String>,
    /// Print the whole body instead of its first bytes.
    #[arg(long)]
    pub full_body: bool,
}

/// `topic` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum TopicCommand {
    /// Every topic of every master broker (or of `--broker`), merged; with
    /// `--cluster`, the topics the name server knows in that cluster.
    List(TopicListArgs),
    /// Create or update a topic on one broker or on every master broker.
    Create(TopicCreateArgs),
    /// Delete a topic from every master broker of a cluster (or of every
    /// cluster) and from every name server.
    Delete(TopicDeleteArgs),
    /// Min and max offset and last store time of each queue of a topic.
    Status(TopicArgs),
    /// The topic's route from the name server: brokers and queue counts.
    Route(TopicRouteArgs),
}

/// `group` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum GroupCommand {
    /// Subscription groups of every master broker (or of `--broker`), merged.
    List(BrokerTarget),
    /// Per queue: the broker's offset, the group's committed offset and the
    /// difference (lag), with totals.
    Lag(GroupLagArgs),
    /// Create or update a subscription group with default settings.
    Create(GroupArgs),
    /// Delete a subscription group.
    Delete(GroupDeleteArgs),
    /// Reset a group's offsets on a topic to a time, or to the start or end
    /// of each queue, on every master broker of the topic's route; the
    /// group's consumers move there on their next pull.
    ResetOffset(GroupResetArgs),
}

/// `broker` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum BrokerCommand {
    /// Read or change a broker's configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Take a broker out of the send routes for maintenance: every address
    /// of the broker name becomes read only (`brokerPermission=4`) and every
    /// name server drops its write permission (`WIPE_WRITE_PERM_OF_BROKER`).
    /// Pulls go on.
    Drain(DrainArgs),
    /// Put a drained broker back: every name server gives it write
    /// permission again (`ADD_WRITE_PERM_OF_BROKER`) and every address of
    /// the broker name takes sends (`brokerPermission=6`).
    Undrain(DrainArgs),
}

/// Flags of `broker drain` and `broker undrain`.
#[derive(Debug, Clone, Args)]
pub struct DrainArgs {
    /// The broker name (`brokerName`), as `cluster` lists it; every address
    /// the name server knows for it is changed.
    #[arg(long)]
    pub broker_name: String,
}

/// `broker config` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum ConfigCommand {
    /// Print the broker's configuration, or one key of it.
    Get(ConfigGetArgs),
    /// Change one key of the broker's configuration at run time.
    Set(ConfigSetArgs),
}

/// An optional single broker; without it, every master broker of the
/// clusters the name server knows.
#[derive(Debug, Clone, Default, Args)]
pub struct BrokerTarget {
    /// One broker's address (`host:port`) instead of every master broker.
    #[arg(long)]
    pub broker: Option<String>,
}

/// Flags of `topic list`.
#[derive(Debug, Clone, Default, Args)]
pub struct TopicListArgs {
    /// Only the topics the name server knows in this cluster
    /// (`GET_TOPICS_BY_CLUSTER`), with the cluster's master brokers'
    /// configuration of each.
    #[arg(long, conflicts_with = "broker")]
    pub cluster: Option<String>,
    /// Where to ask.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `topic delete`.
#[derive(Debug, Clone, Args)]
pub struct TopicDeleteArgs {
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// Only this cluster's master brokers, and only this cluster's part of
    /// the name servers' routes; without it, every cluster.
    #[arg(long)]
    pub cluster: Option<String>,
}

/// Flags of `topic create`.
#[derive(Debug, Clone, Args)]
pub struct TopicCreateArgs {
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// Read and write queues on each broker (1..=1024).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(i32).range(1..=1024))]
    pub queues: i32,
    /// Where to create it.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `topic status`.
#[derive(Debug, Clone, Args)]
pub struct TopicArgs {
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// Where to ask; without it, the brokers of the topic's route (every
    /// master broker when it has none).
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `topic route`.
#[derive(Debug, Clone, Args)]
pub struct TopicRouteArgs {
    /// The topic.
    #[arg(long)]
    pub topic: String,
}

/// Flags of `group lag`.
#[derive(Debug, Clone, Args)]
pub struct GroupLagArgs {
    /// The consumer group.
    #[arg(long)]
    pub group: String,
    /// Only this topic's queues.
    #[arg(long)]
    pub topic: Option<String>,
    /// Where to ask; without it, the brokers of the routes of `%RETRY%group`
    /// and of the topic (every master broker when neither has one).
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `group create`.
#[derive(Debug, Clone, Args)]
pub struct GroupArgs {
    /// The consumer group.
    #[arg(long)]
    pub group: String,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `group delete`.
#[derive(Debug, Clone, Args)]
pub struct GroupDeleteArgs {
    /// The consumer group.
    #[arg(long)]
    pub group: String,
    /// Also delete the group's committed offsets.
    #[arg(long)]
    pub clean_offset: bool,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `group reset-offset`: the group, the topic and exactly one of
/// `--timestamp`, `--datetime`, `--to-earliest` and `--to-latest`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["timestamp", "datetime", "to_earliest", "to_latest"])))]
pub struct GroupResetArgs {
    /// The consumer group.
    #[arg(long)]
    pub group: String,
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// The first message stored at or after this time, ms since the epoch.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(0..))]
    pub timestamp: Option<i64>,
    /// The first message stored at or after this UTC time,
    /// `YYYY-MM-DD HH:MM:SS`.
    #[arg(long, value_parser = crate::commands::parse_utc_datetime)]
    pub datetime: Option<i64>,
    /// The first message still stored in each queue.
    #[arg(long)]
    pub to_earliest: bool,
    /// The end of each queue (skip what is stored).
    #[arg(long)]
    pub to_latest: bool,
    /// Only this queue id (on each broker of the route).
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
    pub queue: Option<i32>,
}

impl GroupResetArgs {
    /// Where the flags say to move the offsets.
    pub fn target(&self) -> crate::commands::ResetTarget {
        use crate::commands::ResetTarget;
        match (self.timestamp.or(self.datetime), self.to_latest) {
            (Some(ms), _) => ResetTarget::Time(ms),
            (None, true) => ResetTarget::Latest,
            (None, false) => ResetTarget::Earliest,
        }
    }
}

/// Flags of `connections`: exactly one of `--group` and `--producer-group`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("kind").required(true).args(["group", "producer_group"])))]
pub struct ConnectionsArgs {
    /// A consumer group.
    #[arg(long)]
    pub group: Option<String>,
    /// A producer group.
    #[arg(long)]
    pub producer_group: Option<String>,
    /// Where to ask; without it, the brokers of the `%RETRY%group` route for
    /// a consumer group, else every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `why-busy`.
#[derive(Debug, Clone, Args)]
pub struct WhyBusyArgs {
    /// Look again every SECS seconds (2 without a value), counting refusals
    /// since the previous look.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2", value_parser = positive_seconds)]
    pub watch: Option<f64>,
    /// With `--watch`: how many looks in all.
    #[arg(long, default_value_t = 60, requires = "watch", value_parser = clap::value_parser!(u32).range(1..))]
    pub count: u32,
    /// Where to look; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// A number of seconds above zero, at most a day.
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!("{text} is not a number of seconds in (0, 86400]")),
    }
}

/// Flags of `broker config get`.
#[derive(Debug, Clone, Args)]
pub struct ConfigGetArgs {
    /// Only this key.
    #[arg(long)]
    pub key: Option<String>,
    /// The broker's address (`host:port`).
    #[arg(long)]
    pub broker: String,
}

/// Flags of `broker config set`.
#[derive(Debug, Clone, Args)]
pub struct ConfigSetArgs {
    /// The key.
    #[arg(long)]
    pub key: String,
    /// Its new value.
    #[arg(long)]
    pub value: String,
    /// The broker's address (`host:port`).
    #[arg(long)]
    pub broker: String,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sluice-admin").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_have_defaults_and_go_anywhere() {
        let cli = parse(&["cluster"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cli.namesrv, DEFAULT_NAMESRV);
        assert_eq!(cli.timeout_ms, 3000);
        assert!(!cli.json);
        let cli = parse(&[
            "topic",
            "list",
            "--json",
            "--namesrv",
            "h:1",
            "--timeout-ms",
            "50",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (cli.namesrv.as_str(), cli.timeout_ms, cli.json),
            ("h:1", 50, true)
        );
        assert!(matches!(
            cli.command,
            Command::Topic(TopicCommand::List(TopicListArgs {
                cluster: None,
                target: BrokerTarget { broker: None }
            }))
        ));
        assert!(parse(&["cluster", "--timeout-ms", "0"]).is_err());
    }

    #[test]
    fn topic_create_takes_queues_and_an_optional_broker() {
        let cli = parse(&[
            "topic", "create", "--topic", "T", "--queues", "4", "--broker", "b:1",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Command::Topic(TopicCommand::Create(c)) = cli.command else {
            panic!("not topic create: {cli:?}");
        };
        assert_eq!((c.topic.as_str(), c.queues), ("T", 4));
        assert_eq!(c.target.broker.as_deref(), Some("b:1"));
        let defaults =
            parse(&["topic", "create", "--topic", "T"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            defaults.command,
            Command::Topic(TopicCommand::Create(TopicCreateArgs { queues: 8, .. }))
        ));
        assert!(parse(&["topic", "create", "--topic", "T", "--queues", "0"]).is_err());
        assert!(parse(&["topic", "create"]).is_err(), "--topic is required");
    }

    #[test]
    fn group_lag_and_connections_parse() {
        let cli = parse(&["group", "lag", "--group", "G", "--topic", "T"])
            .unwrap_or_else(|e| panic!("{e}"));
        let Command::Group(GroupCommand::Lag(l)) = cli.command else {
            panic!("not group lag: {cli:?}");
        };
        assert_eq!((l.group.as_str(), l.topic.as_deref()), ("G", Some("T")));
        let cli =
            parse(&["connections", "--producer-group", "P"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Connections(ConnectionsArgs { group: None, producer_group: Some(ref p), .. }) if p == "P"
        ));
        assert!(
            parse(&["connections"]).is_err(),
            "one kind of group is required"
        );
        assert!(parse(&["connections", "--group", "G", "--producer-group", "P"]).is_err());
    }

    #[test]
    fn why_busy_watches_a_bounded_number_of_times() {
        let cli = parse(&["why-busy", "--broker", "b:1"]).unwrap_or_else(|e| panic!("{e}"));
        let Command::WhyBusy(w) = cli.command else {
            panic!("not why-busy: {cli:?}");
        };
        assert_eq!((w.watch, w.count), (None, 60));
        assert_eq!(w.target.broker.as_deref(), Some("b:1"));
        let cli = parse(&["why-busy", "--watch", "--count", "3"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::WhyBusy(WhyBusyArgs { watch: Some(s), count: 3, .. }) if s == 2.0
        ));
        let cli = parse(&["why-busy", "--watch", "0.5"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::WhyBusy(WhyBusyArgs { watch: Some(s), .. }) if s == 0.5
        ));
        assert!(
            parse(&["why-busy", "--count", "3"]).is_err(),
            "--count needs --watch"
        );
        assert!(parse(&["why-busy", "--watch", "0"]).is_err());
        assert!(parse(&["why-busy", "--watch", "1", "--count", "0"]).is_err());
    }

    #[test]
    fn broker_drain_and_undrain_need_a_broker_name() {
        let cli = parse(&["broker", "drain", "--broker-name", "broker-a"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Broker(BrokerCommand::Drain(DrainArgs { ref broker_name })) if broker_name == "broker-a"
        ));
        let cli = parse(&["broker", "undrain", "--broker-name", "broker-a", "--json"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(cli.json);
        assert!(matches!(
            cli.command,
            Command::Broker(BrokerCommand::Undrain(DrainArgs { ref broker_name })) if broker_name == "broker-a"
        ));
        assert!(
            parse(&["broker", "drain"]).is_err(),
            "--broker-name is required"
        );
    }

    #[test]
    fn topic_delete_and_list_take_a_cluster() {
        let cli = parse(&["topic", "delete", "--topic", "T", "--cluster", "C"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Topic(TopicCommand::Delete(TopicDeleteArgs { ref topic, cluster: Some(ref c) }))
                if topic == "T" && c == "C"
        ));
        assert!(parse(&["topic", "delete"]).is_err(), "--topic is required");
        let cli = parse(&["topic", "list", "--cluster", "C"]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Topic(TopicCommand::List(TopicListArgs { cluster: Some(ref c), .. })) if c == "C"
        ));
        assert!(parse(&["topic", "list", "--cluster", "C", "--broker", "b:1"]).is_err());
    }

    #[test]
    fn message_get_takes_an_offset_with_a_broker_or_an_id() {
        let cli = parse(&["message", "get", "--offset", "42", "--broker", "b:1"])
            .unwrap_or_else(|e| panic!("{e}"));
        let Command::Message(MessageCommand::Get(g)) = cli.command else {
            panic!("not message get: {cli:?}");
        };
        assert_eq!((g.offset, g.broker.as_deref()), (Some(42), Some("b:1")));
        assert!(!g.full_body);
        assert!(
            parse(&["message", "get", "--offset", "42"]).is_err(),
            "--offset needs --broker"
        );
        assert!(parse(&["message", "get"]).is_err(), "one of --offset, --id");
        assert!(parse(&["message", "get", "--offset", "-1", "--broker", "b:1"]).is_err());
        assert!(parse(&["message", "get", "--id", "X", "--offset", "1", "--broker", "b"]).is_err());
        let cli = parse(&[
            "message",
            "get",
            "--id",
            "AB",
            "--full-body",
            "--topic",
            "T",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Message(MessageCommand::Get(MessageGetArgs { id: Some(ref id), full_body: true, topic: Some(_), .. })) if id == "AB"
        ));
    }

    #[test]
    fn message_get_takes_a_key_with_a_topic_and_its_window() {
        let cli = parse(&["message", "get", "--key", "K", "--topic", "T"])
            .unwrap_or_else(|e| panic!("{e}"));
        let Command::Message(MessageCommand::Get(g)) = cli.command else {
            panic!("not message get: {cli:?}");
        };
        assert_eq!(
            (g.key.as_deref(), g.topic.as_deref()),
            (Some("K"), Some("T"))
        );
        assert_eq!((g.begin, g.end, g.max), (None, None, None));
        let cli = parse(&[
            "message", "get", "--key", "K", "--topic", "T", "--begin", "5", "--end", "9", "--max",
            "3",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Message(MessageCommand::Get(MessageGetArgs {
                begin: Some(5),
                end: Some(9),
                max: Some(3),
                ..
            }))
        ));
        assert!(
            parse(&["message", "get", "--key", "K"]).is_err(),
            "--key needs --topic"
        );
        assert!(parse(&["message", "get", "--key", "K", "--topic", "T", "--max", "0"]).is_err());
        assert!(parse(&["message", "get", "--key", "K", "--topic", "T", "--begin", "-1"]).is_err());
        for flag in ["--begin", "--end", "--max"] {
            assert!(
                parse(&["message", "get", "--id", "X", "--topic", "T", flag, "5"]).is_err(),
                "{flag} needs --key"
            );
        }
        assert!(parse(&["message", "get", "--key", "K", "--id", "X", "--topic", "T"]).is_err());
        // A unique key is an --id with a topic.
        let cli = parse(&["message", "get", "--id", "U", "--topic", "T"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            cli.command,
            Command::Message(MessageCommand::Get(MessageGetArgs {
                id: Some(_),
                key: None,
                topic: Some(_),
                ..
            }))
        ));
    }

    #[test]
    fn broker_config_needs_a_broker() {
        let cli = parse(&[
            "broker", "config", "set", "--key", "k", "--value", "v", "--broker", "b:1",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Command::Broker(BrokerCommand::Config(ConfigCommand::Set(s))) = cli.command else {
            panic!("not broker config set: {cli:?}");
        };
        assert_eq!(
            (s.key.as_str(), s.value.as_str(), s.broker.as_str()),
            ("k", "v", "b:1")
        );
        assert!(parse(&["broker", "config", "get"]).is_err());
        let get = parse(&["broker", "config", "get", "--broker", "b:1"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            get.command,
            Command::Broker(BrokerCommand::Config(ConfigCommand::Get(ConfigGetArgs {
                key: None,
                ..
            })))
        ));
    }
}
