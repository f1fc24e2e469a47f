//! What travels through the broker's queues: a request with the place its
//! answer goes ([`Job`], [`Reply`]), and the processor families that own a
//! queue and workers each ([`Family`], [`PerFamily`]).
//!
//! Which family serves which request code is the request table's business
//! (`processor::TABLE`); this module only names the families.

use std::{
    fmt,
    net::SocketAddr,
    ops::Index,
    sync::{Arc, Mutex, PoisonError},
};

use remoting_net::Connection;
use remoting_protocol::RemotingCommand;
use tokio::sync::oneshot;

/// A request waiting for, or held by, a worker.
#[derive(Debug)]
pub struct Job {
    /// The family whose queue and workers serve it.
    pub family: Family,
    /// Where the answer goes.
    pub reply: Reply,
    /// The request.
    pub request: RemotingCommand,
    /// A parked pull served again: it is answered now, never parked twice.
    pub resumed: bool,
    /// Work the broker queued itself, run by the worker in place of the
    /// request's processor; `request` then only stands for it (share key,
    /// metrics, the busy answer when it is refused).
    pub work: Option<Work>,
}

/// Work the broker queues itself in a family's queue, so that it waits its
/// turn in its fair share like the requests of that family: a gRPC
/// receive's POP step, for one. Dropped unrun when its job is refused or
/// expires; the submitter then hears the busy answer on the job's reply.
pub struct Work(Box<dyn FnOnce() + Send>);

impl Work {
    /// Work that runs `f` on a worker thread of its family.
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Self(Box::new(f))
    }

    /// Runs it.
    pub fn run(self) {
        (self.0)();
    }
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Work(..)")
    }
}

impl Job {
    /// A header field by its abbreviated name (`SEND_MESSAGE_V2` and
    /// batches abbreviate theirs: `a` producer group, `b` topic) or its
    /// full one.
    pub fn header(&self, short: &str, long: &str) -> Option<&str> {
        let fields = &self.request.ext_fields;
        fields
            .get(short)
            .or_else(|| fields.get(long))
            .map(remoting_protocol::ExtString::as_str)
    }
}

/// Where the answer to a queued request goes.
///
/// Remoting requests are answered on their connection; requests that the
/// gRPC endpoint translated into remoting commands are answered through a
/// one-shot channel that its handler awaits. Both take the same queue,
/// workers, sweeper and rejection path.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A remoting connection.
    Remoting(Arc<Connection>),
    /// A waiting gRPC handler.
    Channel(Arc<ChannelReply>),
}

/// The answer slot of a request submitted by the gRPC endpoint.
#[derive(Debug)]
pub struct ChannelReply {
    peer: SocketAddr,
    tx: Mutex<Option<oneshot::Sender<RemotingCommand>>>,
}

impl Reply {
    /// A reply target for an in-process caller at `peer`, and the receiver
    /// that gets the one answer.
    pub fn channel(peer: SocketAddr) -> (Self, oneshot::Receiver<RemotingCommand>) {
        let (tx, rx) = oneshot::channel();
        let slot = ChannelReply {
            peer,
            tx: Mutex::new(Some(tx)),
        };
        (Reply::Channel(Arc::new(slot)), rx)
    }

    /// Delivers the answer; false when nobody takes it any more (connection
    /// closed, caller gone, or already answered).
    pub fn send(&self, response: RemotingCommand) -> bool {
        match self {
            Reply::Remoting(conn) => conn.send(response),
            Reply::Channel(slot) => slot
                .tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .is_some_and(|tx| tx.send(response).is_ok()),
        }
    }

    /// The address the request came from.
    pub fn peer(&self) -> SocketAddr {
        match self {
            Reply::Remoting(conn) => conn.peer(),
            Reply::Channel(slot) => slot.peer,
        }
    }

    /// The remoting connection's id; `None` for gRPC callers.
    pub fn connection_id(&self) -> Option<u64> {
        match self {
            Reply::Remoting(conn) => Some(conn.id()),
            Reply::Channel(_) => None,
        }
    }
}

/// Processor families, each with its own queue and workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Sends.
    Send = 0,
    /// Pulls.
    Pull = 1,
    /// Consumer offsets and group membership queries.
    ConsumerManage = 2,
    /// Heartbeats and client registration.
    Heartbeat = 3,
    /// Administration and queries of queue offsets.
    Admin = 4,
    /// Ends of transactions (commit or rollback of half messages).
    Transaction = 5,
}

impl Family {
    /// How many families there are.
    pub const COUNT: usize = 6;

    /// Every family, in declaration order.
    pub const ALL: [Family; Family::COUNT] = [
        Family::Send,
        Family::Pull,
        Family::ConsumerManage,
        Family::Heartbeat,
        Family::Admin,
        Family::Transaction,
    ];

    /// Queue and thread-name prefix.
    pub fn name(self) -> &'static str {
        match self {
            Family::Send => "send",
            Family::Pull => "pull",
            Family::ConsumerManage => "consumer-manage",
            Family::Heartbeat => "heartbeat",
            Family::Admin => "admin",
            Family::Transaction => "end-transaction",
        }
    }
}

/// One value per family, indexed by [`Family`].
#[derive(Debug, Clone)]
pub struct PerFamily<T>([T; Family::COUNT]);

impl<T> PerFamily<T> {
    /// The value `make` gives each family.
    pub fn new(mut make: impl FnMut(Family) -> T) -> Self {
        Self(Family::ALL.map(&mut make))
    }

    /// Each family with its value, in [`Family::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Family, &T)> {
        Family::ALL.into_iter().zip(self.0.iter())
    }

    /// The values, in [`Family::ALL`] order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

impl<T> Index<Family> for PerFamily<T> {
    type Output = T;

    fn index(&self, family: Family) -> &T {
        &self.0[family as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_family_values_are_found_by_their_family() {
        let names = PerFamily::new(Family::name);
        for family in Family::ALL {
            assert_eq!(names[family], family.name());
        }
        let listed: Vec<Family> = names.iter().map(|(f, _)| f).collect();
        assert_eq!(listed, Family::ALL);
    }
}
