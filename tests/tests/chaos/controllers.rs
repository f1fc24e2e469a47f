//! Three name servers, each running a replication controller, for the
//! replicated-group cases: started, killed and started again on their
//! state, on loopback or each in a network namespace; and what they say
//! about the group (its master, its in-sync set, their leader).

use e2e_tests::Place;
use proc_harness::{free_port, loopback, Launch, Proc};
use remoting_protocol::{
    body::{from_json, SyncStateSet},
    header::{
        GetMetaDataResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    },
};

use super::{
    replication::{GROUP, LEASE_MS},
    *,
};

/// Three name servers, each running a controller.
pub(super) struct Controllers {
    bin: PathBuf,
    dir: PathBuf,
    peers: String,
    /// Where each runs: `None` on loopback.
    places: Vec<Option<Place>>,
    ns: Vec<u16>,
    ctl: Vec<u16>,
    procs: Vec<Option<Proc>>,
}

impl Controllers {
    pub(super) fn start(bin: &Path, dir: &Path, places: Vec<Option<Place>>) -> Self {
        let ns: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
        let ctl: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
        let mut c = Self {
            bin: bin.to_owned(),
            dir: dir.to_owned(),
            peers: String::new(),
            places,
            ns,
            ctl,
            procs: vec![None, None, None],
        };
        c.peers = (0..3)
            .map(|i| format!("n{i}-{}", c.ctl_addr(i)))
            .collect::<Vec<_>>()
            .join(";");
        for i in 0..3 {
            c.spawn(i);
        }
        c
    }

    /// Host `i`'s address for `port`.
    fn at(&self, i: usize, port: u16) -> String {
        self.places[i]
            .as_ref()
            .map_or_else(|| loopback(port), |p| p.addr(port))
    }

    /// Controller `i`'s Raft and controller address.
    fn ctl_addr(&self, i: usize) -> String {
        self.at(i, self.ctl[i])
    }

    /// Controller `i`'s host address (no port).
    pub(super) fn ip(&self, i: usize) -> String {
        self.places[i]
            .as_ref()
            .map_or_else(|| "127.0.0.1".to_owned(), |p| p.ip.clone())
    }

    /// Starts controller `i` (again) on its ports and state.
    pub(super) fn spawn(&mut self, i: usize) {
        let own = self.dir.join(format!("ns{i}"));
        std::fs::create_dir_all(&own).unwrap();
        let log = own.join("namesrv.log");
        let launch = match &self.places[i] {
            Some(place) => place.launch("namesrv", &self.bin, log),
            None => Launch::new("namesrv", &self.bin, log),
        };
        let mut p = launch
            .append_log()
            .tail_on_panic(40)
            .args([
                "-p",
                &self.ns[i].to_string(),
                "--controller",
                "--kv-config-path",
            ])
            .arg(own.join("kv.json"))
            .args(["--set", &format!("controllerDLegerPeers={}", self.peers)])
            .args(["--set", &format!("controllerDLegerSelfId=n{i}")])
            .args([
                "--set",
                &format!("controllerStorePath={}", own.join("controller").display()),
            ])
            .args(["--set", &format!("masterLeaseMillis={LEASE_MS}")])
            .args(["--set", "scanInactiveMasterInterval=200"])
            .spawn()
            .unwrap();
        p.wait_listening(&self.ctl_addr(i), Duration::from_secs(30))
            .unwrap();
        self.procs[i] = Some(p);
    }

    pub(super) fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.procs[i].take() {
            p.kill().unwrap();
        }
    }

    pub(super) fn namesrv(&self) -> String {
        (0..3)
            .map(|i| self.at(i, self.ns[i]))
            .collect::<Vec<_>>()
            .join(";")
    }

    pub(super) fn controller_addr(&self) -> String {
        (0..3)
            .map(|i| self.ctl_addr(i))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// The controller leader's index, as a running controller says.
    pub(super) async fn leader(&self, client: &RemotingClient) -> Option<usize> {
        for i in 0..3 {
            if self.procs[i].is_none() {
                continue;
            }
            let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
            let Ok(answer) = client
                .invoke(&self.ctl_addr(i), request, Duration::from_secs(2))
                .await
            else {
                continue;
            };
            let leader = answer
                .decode_header::<GetMetaDataResponseHeader>()
                .ok()
                .and_then(|h| h.controller_leader_address)?;
            return (0..3).find(|j| self.ctl_addr(*j) == leader);
        }
        None
    }

    /// `group`'s master (remoting address) and epoch, and how many
    /// brokers are in sync, as the controller leader says.
    pub(super) async fn replica_info(
        &self,
        client: &RemotingClient,
        group: &str,
    ) -> Option<(Option<(String, i32)>, usize)> {
        for i in 0..3 {
            let request = RemotingCommand::request_with_header(
                RequestCode::CONTROLLER_GET_REPLICA_INFO,
                &GetReplicaInfoRequestHeader {
                    broker_name: group.into(),
                },
            );
            let Ok(answer) = client
                .invoke(&self.ctl_addr(i), request, Duration::from_secs(2))
                .await
            else {
                continue;
            };
            if answer.response_code() != ResponseCode::SUCCESS {
                continue;
            }
            let h = answer
                .decode_header::<GetReplicaInfoResponseHeader>()
                .ok()?;
            let set: SyncStateSet = from_json(&answer.body).ok()?;
            return Some((
                h.master_address.zip(h.master_epoch),
                set.sync_state_set.len(),
            ));
        }
        None
    }

    /// The first group's master and epoch.
    pub(super) async fn master(&self, client: &RemotingClient) -> Option<(String, i32)> {
        self.master_of(client, GROUP).await
    }

    /// `group`'s master and epoch.
    pub(super) async fn master_of(
        &self,
        client: &RemotingClient,
        group: &str,
    ) -> Option<(String, i32)> {
        self.replica_info(client, group).await.and_then(|(m, _)| m)
    }
}
