//! Flags of `user` and `acl`: the users and access control lists of
//! brokers with access control on, in the vocabulary of RocketMQ's
//! `mqadmin` (`createUser`, `createAcl`, ...).

use clap::{Args, Subcommand, ValueEnum};

use super::BrokerTarget;

/// `user` subcommands. A user's name is the access key its requests are
/// signed with, its password the secret key.
#[derive(Debug, Clone, Subcommand)]
pub enum UserCommand {
    /// Create a user (`AUTH_CREATE_USER`) on `--broker` or every master
    /// broker.
    Create(UserCreateArgs),
    /// Change a user's password, type or status (`AUTH_UPDATE_USER`); what
    /// is not given stays as it is.
    Update(UserUpdateArgs),
    /// Delete a user (`AUTH_DELETE_USER`).
    Delete(UserNameArgs),
    /// One user (`AUTH_GET_USER`) as each broker asked knows it.
    Get(UserGetArgs),
    /// Every user, or those matching `--filter` (`AUTH_LIST_USER`).
    List(UserListArgs),
}

/// A user's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum UserType {
    /// May do anything, whatever the access control lists say.
    Super,
    /// Bound by its access control list.
    Normal,
}

impl UserType {
    /// The name on the wire: `Super` or `Normal`.
    pub fn as_str(self) -> &'static str {
        match self {
            UserType::Super => "Super",
            UserType::Normal => "Normal",
        }
    }
}

/// A user's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "lower")]
pub enum UserStatus {
    /// Its requests are served.
    Enable,
    /// Its requests are refused.
    Disable,
}

impl UserStatus {
    /// The name on the wire: `enable` or `disable`.
    pub fn as_str(self) -> &'static str {
        match self {
            UserStatus::Enable => "enable",
            UserStatus::Disable => "disable",
        }
    }
}

/// Flags of `user create`.
#[derive(Debug, Clone, Args)]
pub struct UserCreateArgs {
    /// The user name (its access key).
    #[arg(long)]
    pub username: String,
    /// The password (its secret key).
    #[arg(long)]
    pub password: String,
    /// `Super` or `Normal` [default on the broker: Normal].
    #[arg(long, value_enum, ignore_case = true)]
    pub user_type: Option<UserType>,
    /// `enable` or `disable` [default on the broker: enable].
    #[arg(long, value_enum, ignore_case = true)]
    pub user_status: Option<UserStatus>,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `user update`: the user and at least one change.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("change").required(true).multiple(true).args(["password", "user_type", "user_status"])))]
pub struct UserUpdateArgs {
    /// The user name.
    #[arg(long)]
    pub username: String,
    /// A new password.
    #[arg(long)]
    pub password: Option<String>,
    /// A new type: `Super` or `Normal`.
    #[arg(long, value_enum, ignore_case = true)]
    pub user_type: Option<UserType>,
    /// A new status: `enable` or `disable`.
    #[arg(long, value_enum, ignore_case = true)]
    pub user_status: Option<UserStatus>,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `user delete`.
#[derive(Debug, Clone, Args)]
pub struct UserNameArgs {
    /// The user name.
    #[arg(long)]
    pub username: String,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `user get`.
#[derive(Debug, Clone, Args)]
pub struct UserGetArgs {
    /// The user name.
    #[arg(long)]
    pub username: String,
    /// Print the password instead of `***`.
    #[arg(long)]
    pub show_password: bool,
    /// Where to ask; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `user list`.
#[derive(Debug, Clone, Args)]
pub struct UserListArgs {
    /// Only the users the broker matches with this filter (a part of the
    /// name).
    #[arg(long)]
    pub filter: Option<String>,
    /// Print the passwords instead of `***`.
    #[arg(long)]
    pub show_password: bool,
    /// Where to ask; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// `acl` subcommands. A subject (`User:alice`) has at most one policy of
/// each type; a policy's entries allow or deny actions on resources.
#[derive(Debug, Clone, Subcommand)]
pub enum AclCommand {
    /// Create a subject's access control list (`AUTH_CREATE_ACL`) on
    /// `--broker` or every master broker.
    Create(AclWriteArgs),
    /// Add or replace entries of a subject's policy (`AUTH_UPDATE_ACL`).
    Update(AclWriteArgs),
    /// Delete a subject's list, one policy type of it, or one resource's
    /// entry (`AUTH_DELETE_ACL`).
    Delete(AclDeleteArgs),
    /// A subject's access control list (`AUTH_GET_ACL`).
    Get(AclGetArgs),
    /// Every access control list, or those matching the filters
    /// (`AUTH_LIST_ACL`).
    List(AclListArgs),
}

/// Whether a policy entry allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum Decision {
    /// The actions are allowed.
    Allow,
    /// The actions are denied.
    Deny,
}

impl Decision {
    /// The name on the wire: `Allow` or `Deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "Allow",
            Decision::Deny => "Deny",
        }
    }
}

/// A policy's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum PolicyType {
    /// The subject's own entries.
    Custom,
    /// Consulted only when no custom entry matches.
    Default,
}

impl PolicyType {
    /// The name on the wire: `Custom` or `Default`.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyType::Custom => "Custom",
            PolicyType::Default => "Default",
        }
    }
}

/// The actions an entry may name, as the broker spells them.
pub const ACTIONS: [&str; 9] = [
    "All", "Any", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List",
];

/// An action name in any case, spelt as [`ACTIONS`] spells it.
fn parse_action(text: &str) -> Result<String, String> {
    let text = text.trim();
    ACTIONS
        .iter()
        .find(|a| a.eq_ignore_ascii_case(text))
        .map(|a| (*a).to_owned())
        .ok_or_else(|| format!("{text:?} is not an action; one of {}", ACTIONS.join(", ")))
}

/// A subject as `Type:name` (`User:alice`).
fn parse_subject(text: &str) -> Result<String, String> {
    match text.split_once(':') {
        Some((kind, name)) if !kind.trim().is_empty() && !name.trim().is_empty() => {
            Ok(text.trim().to_owned())
        }
        _ => Err(format!("{text:?} is not a subject such as User:alice")),
    }
}

/// Flags of `acl create` and `acl update`: each `--resource` becomes one
/// entry with the same actions, source addresses and decision.
#[derive(Debug, Clone, Args)]
pub struct AclWriteArgs {
    /// Whose list: `User:alice`.
    #[arg(long, value_parser = parse_subject)]
    pub subject: String,
    /// A resource: `Topic:orders`, `Group:billing`, `Cluster:c1`, a prefix
    /// with `*` (`Topic:order*`), or `*`; repeat the flag or separate with
    /// `,` for several.
    #[arg(long = "resource", required = true, value_delimiter = ',')]
    pub resources: Vec<String>,
    /// Actions, `,`-separated: `All`, `Any`, `Pub`, `Sub`, `Create`,
    /// `Update`, `Delete`, `Get`, `List`.
    #[arg(long, required = true, value_delimiter = ',', value_parser = parse_action)]
    pub actions: Vec<String>,
    /// Source addresses or CIDR blocks the entries apply to (none: any);
    /// repeat the flag or separate with `,`.
    #[arg(long = "source-ip", value_delimiter = ',')]
    pub source_ips: Vec<String>,
    /// `Allow` or `Deny`.
    #[arg(long, value_enum, ignore_case = true, default_value = "Allow")]
    pub decision: Decision,
    /// `Custom` or `Default`.
    #[arg(long, value_enum, ignore_case = true, default_value = "Custom")]
    pub policy_type: PolicyType,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `acl delete`.
#[derive(Debug, Clone, Args)]
pub struct AclDeleteArgs {
    /// Whose list: `User:alice`.
    #[arg(long, value_parser = parse_subject)]
    pub subject: String,
    /// Only this resource's entry.
    #[arg(long)]
    pub resource: Option<String>,
    /// Only this policy type: `Custom` or `Default`.
    #[arg(long, value_enum, ignore_case = true)]
    pub policy_type: Option<PolicyType>,
    /// Where; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `acl get`.
#[derive(Debug, Clone, Args)]
pub struct AclGetArgs {
    /// Whose list: `User:alice`.
    #[arg(long, value_parser = parse_subject)]
    pub subject: String,
    /// Where to ask; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

/// Flags of `acl list`.
#[derive(Debug, Clone, Args)]
pub struct AclListArgs {
    /// Only the subjects the broker matches with this filter.
    #[arg(long)]
    pub subject_filter: Option<String>,
    /// Only the entries of resources the broker matches with this filter.
    #[arg(long)]
    pub resource_filter: Option<String>,
    /// Where to ask; without it, every master broker.
    #[command(flatten)]
    pub target: BrokerTarget,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sluice-admin").chain(args.iter().copied()))
    }

    fn user(args: &[&str]) -> UserCommand {
        let cli = parse(&[&["user"], args].concat()).unwrap_or_else(|e| panic!("{e}"));
        match cli.command {
            Command::User(u) => u,
            other => panic!("not user: {other:?}"),
        }
    }

    fn acl(args: &[&str]) -> AclCommand {
        let cli = parse(&[&["acl"], args].concat()).unwrap_or_else(|e| panic!("{e}"));
        match cli.command {
            Command::Acl(a) => a,
            other => panic!("not acl: {other:?}"),
        }
    }

    #[test]
    fn user_create_takes_a_name_a_password_and_optional_type_and_status() {
        let UserCommand::Create(c) = user(&[
            "create",
            "--username",
            "alice",
            "--password",
            "pw",
            "--user-type",
            "super",
            "--user-status",
            "Disable",
            "--broker",
            "b:1",
        ]) else {
            panic!("not create");
        };
        assert_eq!((c.username.as_str(), c.password.as_str()), ("alice", "pw"));
        assert_eq!(c.user_type, Some(UserType::Super));
        assert_eq!(c.user_status.map(UserStatus::as_str), Some("disable"));
        assert_eq!(c.target.broker.as_deref(), Some("b:1"));
        let UserCommand::Create(bare) = user(&["create", "--username", "a", "--password", "p"])
        else {
            panic!("not create");
        };
        assert_eq!((bare.user_type, bare.user_status), (None, None));
        assert!(parse(&["user", "create", "--username", "a"]).is_err());
        assert!(parse(&[
            "user",
            "create",
            "--username",
            "a",
            "--password",
            "p",
            "--user-type",
            "Admin"
        ])
        .is_err());
    }

    #[test]
    fn user_update_needs_something_to_change() {
        let UserCommand::Update(u) =
            user(&["update", "--username", "alice", "--user-type", "Normal"])
        else {
            panic!("not update");
        };
        assert_eq!((u.password, u.user_type), (None, Some(UserType::Normal)));
        assert!(parse(&["user", "update", "--username", "alice"]).is_err());
    }

    #[test]
    fn user_get_and_list_mask_passwords_unless_asked() {
        let UserCommand::Get(g) = user(&["get", "--username", "alice"]) else {
            panic!("not get");
        };
        assert!(!g.show_password);
        let UserCommand::List(l) = user(&["list", "--filter", "al", "--show-password"]) else {
            panic!("not list");
        };
        assert!(l.show_password);
        assert_eq!(l.filter.as_deref(), Some("al"));
        assert!(matches!(
            user(&["delete", "--username", "alice"]),
            UserCommand::Delete(_)
        ));
    }

    #[test]
    fn acl_create_takes_repeated_resources_actions_and_addresses() {
        let AclCommand::Create(c) = acl(&[
            "create",
            "--subject",
            "User:alice",
            "--resource",
            "Topic:orders",
            "--resource",
            "Group:billing,Topic:audit",
            "--actions",
            "pub,Sub",
            "--source-ip",
            "10.0.0.0/8",
            "--source-ip",
            "192.168.0.1",
        ]) else {
            panic!("not create");
        };
        assert_eq!(
            c.resources,
            ["Topic:orders", "Group:billing", "Topic:audit"]
        );
        assert_eq!(c.actions, ["Pub", "Sub"]);
        assert_eq!(c.source_ips, ["10.0.0.0/8", "192.168.0.1"]);
        assert_eq!(
            (c.decision, c.policy_type),
            (Decision::Allow, PolicyType::Custom)
        );
        let AclCommand::Update(u) = acl(&[
            "update",
            "--subject",
            "User:alice",
            "--resource",
            "*",
            "--actions",
            "All",
            "--decision",
            "deny",
            "--policy-type",
            "Default",
        ]) else {
            panic!("not update");
        };
        assert_eq!(
            (u.decision.as_str(), u.policy_type.as_str()),
            ("Deny", "Default")
        );
        let base = ["acl", "create", "--subject", "User:a", "--resource", "T"];
        assert!(parse(&base).is_err(), "--actions is required");
        assert!(parse(&[&base[..], &["--actions", "Publish"]].concat()).is_err());
        assert!(parse(&[
            "acl",
            "create",
            "--subject",
            "alice",
            "--resource",
            "T",
            "--actions",
            "Pub"
        ])
        .is_err());
        assert!(parse(&["acl", "create", "--subject", "User:a", "--actions", "Pub"]).is_err());
    }

    #[test]
    fn acl_delete_get_and_list_take_their_filters() {
        let AclCommand::Delete(d) = acl(&[
            "delete",
            "--subject",
            "User:alice",
            "--policy-type",
            "custom",
        ]) else {
            panic!("not delete");
        };
        assert_eq!(
            (d.policy_type, d.resource),
            (Some(PolicyType::Custom), None)
        );
        let AclCommand::List(l) = acl(&[
            "list",
            "--subject-filter",
            "User:a",
            "--resource-filter",
            "Topic:o",
        ]) else {
            panic!("not list");
        };
        assert_eq!(l.subject_filter.as_deref(), Some("User:a"));
        assert_eq!(l.resource_filter.as_deref(), Some("Topic:o"));
        assert!(matches!(
            acl(&["get", "--subject", "User:alice"]),
            AclCommand::Get(_)
        ));
        assert!(parse(&["acl", "get"]).is_err());
    }

    #[test]
    fn access_and_secret_keys_are_global_and_go_together() {
        let cli = parse(&[
            "user",
            "list",
            "--access-key",
            "admin",
            "--secret-key",
            "pw",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let credentials = cli
            .credentials()
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no credentials"));
        assert_eq!(
            (
                credentials.access_key.as_str(),
                credentials.secret_key.as_str()
            ),
            ("admin", "pw")
        );
        assert!(!format!("{cli:?}").contains("\"pw\""), "{cli:?}");
        let before = parse(&["--access-key", "admin", "--secret-key", "pw", "cluster"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(before.credentials().unwrap_or_default().is_some());
        assert!(
            parse(&["cluster", "--access-key", "admin"]).is_err(),
            "needs --secret-key"
        );
        assert!(
            parse(&["cluster", "--secret-key", "pw"]).is_err(),
            "needs --access-key"
        );
        let blank = parse(&["cluster", "--access-key", " ", "--secret-key", "pw"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(blank.credentials().is_err());
    }
}
