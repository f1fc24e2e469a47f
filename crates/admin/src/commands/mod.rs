//! What each command asks and what it reports: the requests to brokers and
//! name servers, the merge of several brokers' answers, and the report
//! types with their text tables (JSON comes from their `Serialize`).

use std::collections::BTreeSet;

use crate::{call::Admin, error::AdminError};

/// Read and write permission bits of a topic.
const PERM_READ_WRITE: i32 = 6;
/// The prefix of a consumer group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// A permission as RocketMQ writes it: `R`, `W` and `X` (inherit) or `-`.
pub fn perm_text(perm: i32) -> String {
    [(4, 'R'), (2, 'W'), (1, 'X')]
        .iter()
        .map(|(bit, c)| if perm & bit != 0 { *c } else { '-' })
        .collect()
}

/// The brokers of the routes of `topics` (those that have one); every master
/// broker when none has.
async fn brokers_of_routes(admin: &Admin, topics: &[String]) -> Result<Vec<String>, AdminError> {
    let mut brokers = BTreeSet::new();
    for topic in topics {
        if let Some(route) = admin.route(topic).await? {
            brokers.extend(Admin::route_masters(&route));
        }
    }
    if brokers.is_empty() {
        return admin.master_addrs().await;
    }
    Ok(brokers.into_iter().collect())
}

mod acls;
mod cluster;
mod config;
mod connections;
mod controller;
mod drain;
mod groups;
mod message;
mod query;
mod reset;
mod topic_delete;
mod topics;
mod users;

#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod message_tests;
#[cfg(test)]
mod query_tests;
#[cfg(test)]
mod tests;

pub use acls::*;
pub use cluster::*;
pub use config::*;
pub use connections::*;
pub use controller::*;
pub use drain::*;
pub use groups::*;
pub use message::*;
pub use query::*;
pub use reset::*;
pub use topic_delete::*;
pub use topics::*;
pub use users::*;
