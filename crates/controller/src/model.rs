//! The record the controllers replicate: per broker group (one broker name),
//! its members, its master and master epoch, and its in-sync replica set
//! (RocketMQ's sync state set) with its own epoch.
//!
//! Everything here is deterministic: a [`Command`] carries every decision
//! that depends on time or liveness (which broker to elect, for example), so
//! every controller that applies the same commands holds the same record.
//! The leader makes those decisions before it proposes a command; applying
//! re-checks the epochs, so a command decided on a stale view is refused.

use std::collections::{BTreeMap, BTreeSet};

use remoting_protocol::ResponseCode;
use serde::{Deserialize, Serialize};

/// Every broker group the controllers know, by broker name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Groups by broker name.
    pub groups: BTreeMap<String, Group>,
}

/// One broker group: the replicas of one broker name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The cluster the group belongs to.
    pub cluster_name: String,
    /// The group's broker name.
    pub broker_name: String,
    /// Members by broker id (ids start at 1).
    pub members: BTreeMap<u64, Member>,
    /// The id the next broker asking for one is offered; ids are never
    /// offered twice, even after their broker was cleaned away.
    pub next_broker_id: u64,
    /// The master's broker id, if the group has one.
    pub master: Option<u64>,
    /// Raised by every election, including one that finds no master.
    pub master_epoch: i32,
    /// The in-sync replicas, the master among them.
    pub sync_state_set: BTreeSet<u64>,
    /// Raised by every change of the in-sync replica set.
    pub sync_state_set_epoch: i32,
}

/// A member of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The member's remoting address, once it registered.
    pub address: String,
    /// The code the broker chose when it applied for its id; a broker that
    /// restarts with the same code gets the same id back.
    pub register_check_code: String,
}

impl Group {
    /// The id offered to the next broker that asks (ids start at 1).
    #[must_use]
    pub fn offered_broker_id(&self) -> u64 {
        self.next_broker_id.max(1)
    }

    /// The master's address, if the group has a master that registered one.
    #[must_use]
    pub fn master_address(&self) -> Option<&str> {
        let master = self.master?;
        self.members
            .get(&master)
            .map(|m| m.address.as_str())
            .filter(|a| !a.is_empty())
    }
}

impl Record {
    /// The group named `broker_name`.
    #[must_use]
    pub fn group(&self, broker_name: &str) -> Option<&Group> {
        self.groups.get(broker_name)
    }
}

/// A change to the record, decided by the controller leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A broker takes `broker_id` in its group (creating the group).
    ApplyBrokerId {
        /// Cluster name.
        cluster_name: String,
        /// Broker name.
        broker_name: String,
        /// The id asked for.
        broker_id: u64,
        /// The broker's own code for itself.
        register_check_code: String,
    },
    /// A member reports the address it serves on.
    RegisterBroker {
        /// Broker name.
        broker_name: String,
        /// The member's id.
        broker_id: u64,
        /// Its remoting address.
        address: String,
    },
    /// The master changes the in-sync replica set.
    AlterSyncStateSet {
        /// Broker name.
        broker_name: String,
        /// The master asking.
        master_id: u64,
        /// The master epoch it holds.
        master_epoch: i32,
        /// The set epoch it last saw.
        sync_state_set_epoch: i32,
        /// The new set; it contains the master.
        new_sync_state_set: BTreeSet<u64>,
    },
    /// The leader elected `new_master` (or found none) while the group was
    /// at `master_epoch`.
    ElectMaster {
        /// Broker name.
        broker_name: String,
        /// The master epoch the election was decided on.
        master_epoch: i32,
        /// The broker elected, or `None` when no member can be.
        new_master: Option<u64>,
    },
    /// Forget some members of a group, or the whole group.
    CleanBrokerData {
        /// Broker name.
        broker_name: String,
        /// The members to forget; `None` forgets the group.
        broker_ids: Option<BTreeSet<u64>>,
        /// Forget the group even while it has a master.
        clean_living: bool,
    },
}

/// What applying a command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Applied; the group as it is now (absent when it was removed).
    Applied(Option<Group>),
    /// Refused with one of RocketMQ's controller response codes.
    Refused {
        /// The response code (`CONTROLLER_*`).
        code: i32,
        /// Why, for the operator.
        remark: String,
    },
}

impl Outcome {
    fn refused(code: ResponseCode, remark: impl Into<String>) -> Self {
        Self::Refused {
            code: code.0,
            remark: remark.into(),
        }
    }
}

impl Record {
    /// Applies `command`, returning what it did. Never panics.
    pub fn apply(&mut self, command: &Command) -> Outcome {
        match command {
            Command::ApplyBrokerId {
                cluster_name,
                broker_name,
                broker_id,
                register_check_code,
            } => self.apply_broker_id(cluster_name, broker_name, *broker_id, register_check_code),
            Command::RegisterBroker {
                broker_name,
                broker_id,
                address,
            } => {
                let Some(member) = self
                    .groups
                    .get_mut(broker_name)
                    .and_then(|g| g.members.get_mut(broker_id))
                else {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                        format!(
                            "broker {broker_name} has no member with id {broker_id}; apply for \
                             an id first"
                        ),
                    );
                };
                member.address.clone_from(address);
                Outcome::Applied(self.groups.get(broker_name).cloned())
            }
            Command::AlterSyncStateSet {
                broker_name,
                master_id,
                master_epoch,
                sync_state_set_epoch,
                new_sync_state_set,
            } => {
                let failed = |remark: String| {
                    Outcome::refused(ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, remark)
                };
                let Some(group) = self.groups.get_mut(broker_name) else {
                    return failed(format!("no broker group named {broker_name}"));
                };
                if &group.sync_state_set == new_sync_state_set {
                    return failed(format!(
                        "broker {broker_name}: the in-sync set is already {new_sync_state_set:?}"
                    ));
                }
                if group.master != Some(*master_id) {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_INVALID_MASTER,
                        format!(
                            "broker {broker_name}: {master_id} is not the master (the master is \
                             {:?})",
                            group.master
                        ),
                    );
                }
                if group.master_epoch != *master_epoch {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH,
                        format!(
                            "broker {broker_name}: master epoch {master_epoch} is stale (now {})",
                            group.master_epoch
                        ),
                    );
                }
                if group.sync_state_set_epoch != *sync_state_set_epoch {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                        format!(
                            "broker {broker_name}: in-sync set epoch {sync_state_set_epoch} is \
                             stale (now {})",
                            group.sync_state_set_epoch
                        ),
                    );
                }
                if let Some(id) = new_sync_state_set
                    .iter()
                    .find(|id| !group.members.contains_key(id))
                {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_INVALID_REPLICAS,
                        format!("broker {broker_name} has no member with id {id}"),
                    );
                }
                if !new_sync_state_set.contains(master_id) {
                    return failed(format!(
                        "broker {broker_name}: the in-sync set {new_sync_state_set:?} must hold \
                         the master {master_id}"
                    ));
                }
                group.sync_state_set.clone_from(new_sync_state_set);
                group.sync_state_set_epoch += 1;
                Outcome::Applied(Some(group.clone()))
            }
            Command::ElectMaster {
                broker_name,
                master_epoch,
                new_master,
            } => {
                let Some(group) = self.groups.get_mut(broker_name) else {
                    return not_exist(broker_name);
                };
                if group.master_epoch != *master_epoch {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH,
                        format!(
                            "broker {broker_name}: election decided at master epoch \
                             {master_epoch}, now {}",
                            group.master_epoch
                        ),
                    );
                }
                if let Some(id) = new_master {
                    if !group.members.contains_key(id) {
                        return Outcome::refused(
                            ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                            format!("broker {broker_name} has no member with id {id}"),
                        );
                    }
                }
                group.master = *new_master;
                group.master_epoch += 1;
                if let Some(id) = new_master {
                    group.sync_state_set = BTreeSet::from([*id]);
                    group.sync_state_set_epoch += 1;
                }
                Outcome::Applied(Some(group.clone()))
            }
            Command::CleanBrokerData {
                broker_name,
                broker_ids,
                clean_living,
            } => {
                let Some(group) = self.groups.get_mut(broker_name) else {
                    return Outcome::refused(
                        ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        format!("no broker group named {broker_name}"),
                    );
                };
                match broker_ids {
                    None if group.master.is_some() && !clean_living => Outcome::refused(
                        ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        format!(
                            "broker {broker_name} has a master; name the ids to clean, or clean \
                             living brokers"
                        ),
                    ),
                    None => {
                        self.groups.remove(broker_name);
                        Outcome::Applied(None)
                    }
                    Some(ids) => {
                        if group.master.is_some_and(|m| ids.contains(&m)) {
                            group.master = None;
                            group.master_epoch += 1;
                        }
                        group.members.retain(|id, _| !ids.contains(id));
                        let before = group.sync_state_set.len();
                        group.sync_state_set.retain(|id| !ids.contains(id));
                        if group.sync_state_set.len() != before {
                            group.sync_state_set_epoch += 1;
                        }
                        if group.members.is_empty() {
                            self.groups.remove(broker_name);
                            return Outcome::Applied(None);
                        }
                        Outcome::Applied(Some(group.clone()))
                    }
                }
            }
        }
    }

    fn apply_broker_id(
        &mut self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: u64,
        register_check_code: &str,
    ) -> Outcome {
        let group = self
            .groups
            .entry(broker_name.to_owned())
            .or_insert_with(|| Group {
                cluster_name: cluster_name.to_owned(),
                broker_name: broker_name.to_owned(),
                ..Group::default()
            });
        let same_broker = group
            .members
            .get(&broker_id)
            .map(|m| m.register_check_code == register_check_code);
        let fresh = group.members.is_empty() && group.next_broker_id == 0;
        match same_broker {
            Some(true) => {}
            Some(false) => {
                return Outcome::refused(
                    ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                    format!(
                        "broker {broker_name}: id {broker_id} belongs to another broker; ask for \
                         the next id"
                    ),
                )
            }
            None if broker_id == 0 || (fresh && broker_id != 1) => {
                if fresh {
                    self.groups.remove(broker_name);
                }
                return Outcome::refused(
                    ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                    format!("broker {broker_name}: id {broker_id} cannot be applied for"),
                );
            }
            None => {
                // The address is what the code starts with (`address;time`).
                let address = register_check_code
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                group.members.insert(
                    broker_id,
                    Member {
                        address,
                        register_check_code: register_check_code.to_owned(),
                    },
                );
                group.next_broker_id = group.next_broker_id.max(broker_id + 1);
            }
        }
        Outcome::Applied(Some(group.clone()))
    }
}

fn not_exist(broker_name: &str) -> Outcome {
    Outcome::refused(
        ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        format!("no broker group named {broker_name}; its brokers must register first"),
    )
}

#[cfg(test)]
mod tests;
