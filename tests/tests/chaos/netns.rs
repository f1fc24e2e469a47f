//! Network namespaces on one bridge, one per node, and cuts between them:
//! the test process stays in the host's namespace, on the bridge's own
//! address, and nodes reach each other and it through the bridge. Cuts
//! are nftables rules in a node's namespace that drop packets silently, as
//! a lost link does.

use std::{
    process::{Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
};

use e2e_tests::Place;

/// Subnets handed out in this process (`10.201.<n>.0/24`).
static NEXT_SUBNET: AtomicU32 = AtomicU32::new(0);

/// A bridge and `nodes` namespaces on it; all removed when dropped.
pub(super) struct Net {
    subnet: u32,
    nodes: usize,
}

impl Net {
    /// Creates the bridge and namespaces; `None` (printed) when this
    /// process may not (not root, or no `ip`/`nft`).
    pub(super) fn create(case: &str, nodes: usize) -> Option<Self> {
        if !Self::usable() {
            println!("chaos: {case} | not run (needs root, iproute2 and nftables) | SKIP");
            return None;
        }
        let n = (std::process::id() + NEXT_SUBNET.fetch_add(1, Ordering::Relaxed)) % 200 + 20;
        let net = Self { subnet: n, nodes };
        // A run killed earlier may have left the same names behind.
        net.remove();
        let bridge = net.bridge();
        run(&["ip", "link", "add", &bridge, "type", "bridge"]);
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", net.root_ip()),
            "dev",
            &bridge,
        ]);
        run(&["ip", "link", "set", &bridge, "up"]);
        for i in 0..nodes {
            let (ns, outside, inside) = (net.netns(i), net.veth(i), format!("slc{n}p{i}"));
            run(&["ip", "netns", "add", &ns]);
            run(&[
                "ip", "link", "add", &outside, "type", "veth", "peer", "name", &inside,
            ]);
            run(&["ip", "link", "set", &inside, "netns", &ns]);
            run(&["ip", "link", "set", &outside, "master", &bridge]);
            run(&["ip", "link", "set", &outside, "up"]);
            let addr = format!("{}/24", net.ip(i));
            run(&["ip", "-n", &ns, "addr", "add", &addr, "dev", &inside]);
            run(&["ip", "-n", &ns, "link", "set", &inside, "up"]);
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        }
        Some(net)
    }

    /// Whether this process may create namespaces and cut links: root,
    /// with `ip` and `nft`.
    pub(super) fn usable() -> bool {
        tool_works(&["ip", "netns", "list"]) && tool_works(&["nft", "list", "tables"])
    }

    /// How many nodes (namespaces) it has.
    pub(super) fn nodes(&self) -> usize {
        self.nodes
    }

    fn bridge(&self) -> String {
        format!("slc{}", self.subnet)
    }

    fn netns(&self, i: usize) -> String {
        format!("slc{}-{i}", self.subnet)
    }

    fn veth(&self, i: usize) -> String {
        format!("slc{}v{i}", self.subnet)
    }

    /// The test process's address on the bridge.
    pub(super) fn root_ip(&self) -> String {
        format!("10.201.{}.1", self.subnet)
    }

    /// Node `i`'s address.
    pub(super) fn ip(&self, i: usize) -> String {
        format!("10.201.{}.{}", self.subnet, 11 + i)
    }

    /// Where node `i` runs.
    pub(super) fn place(&self, i: usize) -> Place {
        Place {
            netns: self.netns(i),
            ip: self.ip(i),
        }
    }

    /// Node `i` exchanges no packet with `peers` (addresses) any more, in
    /// either direction, until [`Net::heal`].
    pub(super) fn isolate(&self, i: usize, peers: &[String]) {
        self.rules(i, peers, peers);
    }

    /// Node `i` receives nothing from `peers` any more, while what it sends
    /// them still arrives, until [`Net::heal`].
    pub(super) fn deafen(&self, i: usize, peers: &[String]) {
        self.rules(i, peers, &[]);
    }

    /// Every cut is gone.
    pub(super) fn heal(&self) {
        for i in 0..self.nodes {
            self.rules(i, &[], &[]);
        }
    }

    /// Replaces node `i`'s rules: drop what comes from `from` and what goes
    /// to `to`.
    fn rules(&self, i: usize, from: &[String], to: &[String]) {
        let chain = |name: &str, hook: &str, dir: &str, peers: &[String]| {
            let drop = if peers.is_empty() {
                String::new()
            } else {
                format!("ip {dir} {{ {} }} drop;", peers.join(", "))
            };
            format!(
                "chain {name} {{\ntype filter hook {hook} priority 0; policy accept;\n{drop}\n}}"
            )
        };
        let script = format!(
            "table inet chaos\ndelete table inet chaos\ntable inet chaos {{\n{}\n{}\n}}\n",
            chain("input", "input", "saddr", from),
            chain("output", "output", "daddr", to),
        );
        let mut nft = Command::new("ip")
            .args(["netns", "exec", &self.netns(i), "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        nft.stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let status = nft.wait().unwrap();
        assert!(status.success(), "nft in {}: {script}", self.netns(i));
    }

    /// Deletes the namespaces and the bridge (their veth pairs go with
    /// them), ignoring what is not there.
    fn remove(&self) {
        for i in 0..self.nodes {
            quiet(&["ip", "netns", "delete", &self.netns(i)]);
            quiet(&["ip", "link", "delete", &self.veth(i)]);
        }
        quiet(&["ip", "link", "delete", &self.bridge()]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.remove();
    }
}

fn tool_works(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn quiet(args: &[&str]) {
    let _ = Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
