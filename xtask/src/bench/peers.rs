//! `cargo xtask bench peers`: Sluice beside NATS JetStream and Redis
//! Streams on the same machine, in one run.
//!
//! Three servers run side by side on free loopback ports, each with its
//! data under the work directory: Sluice's broker (`ASYNC_FLUSH`, embedded
//! name server), `nats-server -js` (a file-storage stream, written but not
//! synced per message) and `redis-server` (AOF, `appendfsync everysec`, no
//! RDB snapshots). For each in-flight level and each run, in turn, every
//! server gets closed-loop 1 KiB appends for the same time: Sluice from
//! `sluice-bench`, NATS from `sluice-bench nats-publish` (publish, then
//! wait for the stream's ack), Redis from `redis-benchmark ... XADD`. Each
//! measured load run is preceded by an unmeasured warm-up run (for Redis,
//! the short run that sizes the measured one). The CPU time each server
//! used during its measured run comes from `/proc/<pid>/stat`. One table
//! and `peers.json`.

use std::{fs, time::Duration};

use anyhow::Result;
use serde::Serialize;

use super::{
    peer_servers::{
        nats_publish, redis_benchmark, redis_clear, redis_requests_for, CpuClock, PeerServer,
    },
    peers_drain::DrainServers,
    peers_table::{medians, section_table, Layout, Measured, Median, Section},
    runner::{create_topic, load, strings, write_json, Broker, Setup, RUN_SLACK},
    Options,
};

/// In-flight levels by default, and with `--quick`.
const IN_FLIGHT: [u32; 3] = [1, 16, 64];
const QUICK_IN_FLIGHT: [u32; 2] = [1, 16];
/// Runs per level, by default.
const RUNS: u32 = 2;
/// Recorded seconds of each run, by default and with `--quick`.
const SECONDS: u64 = 5;
const QUICK_SECONDS: u64 = 2;
/// Seconds of the unmeasured warm-up run before each measured run.
const WARMUP_SECS: u64 = 1;
/// XADDs of the Redis warm-up run, which also measures the rate that sizes
/// the measured run.
const REDIS_WARMUP_REQUESTS: u64 = 10_000;
/// Messages per NATS pull request of the drain (`sluice-bench drain`'s
/// default).
const NATS_PULL_BATCH: u32 = 1000;
/// Body size of every message.
const BODY: usize = 1024;
/// The topic of Sluice's appends, and its queues.
const TOPIC: &str = "BenchTopic";
const QUEUES: u32 = 8;
/// Messages per `SEND_BATCH_MESSAGE`, batches in flight, and the depth of
/// Redis's pipelines (on as many connections as Sluice has batches in
/// flight).
const BATCH: u32 = 32;
const BATCH_IN_FLIGHT: u32 = 16;
const REDIS_PIPELINE: u32 = 16;
/// The level of the paths section, by default and with `--quick`.
const PATHS_IN_FLIGHT: u32 = 64;
const QUICK_PATHS_IN_FLIGHT: u32 = 16;
/// Messages of each drain backlog, by default and with `--quick`.
const BACKLOG: u64 = 1_000_000;
const QUICK_BACKLOG: u64 = 20_000;

/// What the experiment does.
#[derive(Debug, Clone, Serialize)]
struct Plan {
    in_flight: Vec<u32>,
    runs: u32,
    seconds: u64,
    build: &'static str,
    batch: u32,
    batch_in_flight: u32,
    redis_pipeline: u32,
    paths_in_flight: u32,
    backlog: u64,
}

impl Plan {
    fn new(options: &Options) -> Self {
        let quick = options.quick;
        Self {
            in_flight: options.in_flight.clone().unwrap_or_else(|| {
                if quick {
                    QUICK_IN_FLIGHT.to_vec()
                } else {
                    IN_FLIGHT.to_vec()
                }
            }),
            runs: options.runs.unwrap_or(if quick { 1 } else { RUNS }),
            seconds: options
                .seconds
                .unwrap_or(if quick { QUICK_SECONDS } else { SECONDS }),
            build: options.build(),
            batch: BATCH,
            batch_in_flight: BATCH_IN_FLIGHT,
            redis_pipeline: REDIS_PIPELINE,
            paths_in_flight: if quick {
                QUICK_PATHS_IN_FLIGHT
            } else {
                PATHS_IN_FLIGHT
            },
            backlog: options
                .backlog
                .unwrap_or(if quick { QUICK_BACKLOG } else { BACKLOG }),
        }
    }

    /// The tables, one per section.
    fn layouts(&self) -> Vec<Layout> {
        let peers = ["sluice", "nats", "redis"];
        let heads = [
            "Sluice msgs/s (p50/p99)",
            "NATS msgs/s (p50/p99)",
            "Redis msgs/s (p50/p99)",
        ];
        let vs_peers = [(0, 1, "S/N"), (0, 2, "S/R")];
        vec![
            Layout {
                section: Section::Send,
                title: "appends: one 1 KiB message per request".into(),
                levels: self.in_flight.clone(),
                servers: peers,
                heads,
                cpu_head: "CPU µs/msg S/N/R",
                ratios: vs_peers,
            },
            Layout {
                section: Section::Batch,
                title: format!(
                    "batches: Sluice SEND_BATCH_MESSAGE of {} x 1 KiB ({} batches in flight, \
                     latency per batch); Redis XADD {}-deep pipelines on {} connections \
                     (latency per XADD); NATS not run",
                    self.batch, self.batch_in_flight, self.redis_pipeline, self.batch_in_flight
                ),
                levels: vec![self.batch_in_flight],
                servers: peers,
                heads,
                cpu_head: "CPU µs/msg S/N/R",
                ratios: vs_peers,
            },
            Layout {
                section: Section::Paths,
                title: "Sluice's paths: remoting ASYNC_FLUSH, remoting SYNC_FLUSH (a second \
                        broker), gRPC SendMessage"
                    .into(),
                levels: vec![self.paths_in_flight],
                servers: ["async", "sync", "grpc"],
                heads: [
                    "ASYNC msgs/s (p50/p99)",
                    "SYNC msgs/s (p50/p99)",
                    "gRPC msgs/s (p50/p99)",
                ],
                cpu_head: "CPU µs/msg A/S/G",
                ratios: [(1, 0, "S/A"), (2, 0, "G/A")],
            },
            Layout {
                section: Section::Drain,
                title: format!(
                    "drain: a backlog of {} x 1 KiB read from the beginning (filled first, not \
                     measured): Sluice's push consumer (its defaults), NATS JetStream's pull \
                     consumer ({} per pull, no acks); msgs/s of the read, server CPU during it; \
                     Redis not run",
                    self.backlog, NATS_PULL_BATCH
                ),
                levels: vec![0],
                servers: peers,
                heads,
                cpu_head: "CPU µs/msg S/N/R",
                ratios: vs_peers,
            },
        ]
    }
}

/// What `peers.json` holds.
#[derive(Debug, Serialize)]
struct Results<'a> {
    plan: &'a Plan,
    machine: &'a Machine,
    runs: &'a [Measured],
    medians: Vec<Median>,
}

/// The machine the experiment ran on.
#[derive(Debug, Clone, Serialize)]
struct Machine {
    cpus: usize,
    cpu_model: String,
    memory_gib: f64,
}

impl Machine {
    fn read() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: field_of(&cpuinfo, "model name").unwrap_or_else(|| "unknown".to_owned()),
            memory_gib: field_of(&meminfo, "MemTotal")
                .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0),
        }
    }
}

/// The value of the first `key: value` line of a `/proc` file.
fn field_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
    let plan = Plan::new(options);
    let layouts = plan.layouts();
    let clock = CpuClock::new();
    let sluice = Broker::start(setup, "sluice", &["flushDiskType=ASYNC_FLUSH".to_owned()])?;
    create_topic(setup, &sluice, TOPIC, QUEUES)?;
    let nats = PeerServer::nats(setup)?;
    let redis = PeerServer::redis(setup)?;
    let servers = Servers {
        setup,
        clock: &clock,
        plan: &plan,
        sluice: &sluice,
        nats: &nats,
        redis: &redis,
    };
    let rows = servers.measure_all();
    // The servers go before the results are written, also on error (drop).
    sluice.stop();
    drop(nats);
    drop(redis);
    let rows = rows?;
    let machine = Machine::read();
    println!(
        "peers: closed loop, 1 KiB messages, {} s per run after a {WARMUP_SECS} s warm-up run, {} run(s), {} build; \
         Sluice ASYNC_FLUSH, NATS JetStream file storage (not synced per message), Redis AOF everysec; \
         {} CPUs ({}), {} GiB, servers and load tools on the same CPUs",
        plan.seconds, plan.runs, plan.build, machine.cpus, machine.cpu_model, machine.memory_gib
    );
    for layout in &layouts {
        println!();
        print!("{}", section_table(layout, plan.runs, &rows));
    }
    let file = setup.out.join("peers.json");
    let results = Results {
        plan: &plan,
        machine: &machine,
        runs: &rows,
        medians: medians(&layouts, &rows),
    };
    write_json(&file, &results)?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The running servers and what every run needs.
struct Servers<'a> {
    setup: &'a Setup,
    clock: &'a CpuClock,
    plan: &'a Plan,
    sluice: &'a Broker,
    nats: &'a PeerServer,
    redis: &'a PeerServer,
}

impl Servers<'_> {
    /// Every section, in order, each server in turn per run.
    fn measure_all(&self) -> Result<Vec<Measured>> {
        let plan = self.plan;
        let mut rows = Vec::new();
        for &in_flight in &plan.in_flight {
            for run in 1..=plan.runs {
                let load = sluice_load(in_flight, plan.seconds, &[]);
                rows.push(self.sluice(self.sluice, Section::Send, "sluice", run, &load)?);
                rows.push(self.nats_publish(in_flight, run)?);
                rows.push(self.redis(Section::Send, (in_flight, 1), run)?);
            }
        }
        let batch = plan.batch.to_string();
        for run in 1..=plan.runs {
            let load = sluice_load(plan.batch_in_flight, plan.seconds, &["--batch", &batch]);
            rows.push(self.sluice(self.sluice, Section::Batch, "sluice", run, &load)?);
            let redis = (plan.batch_in_flight, plan.redis_pipeline);
            rows.push(self.redis(Section::Batch, redis, run)?);
        }
        let sync = Broker::start(
            self.setup,
            "sluice-sync",
            &["flushDiskType=SYNC_FLUSH".to_owned()],
        )?;
        let paths = self.paths(&sync, &mut rows);
        sync.stop();
        paths?;
        let drain = DrainServers {
            setup: self.setup,
            clock: self.clock,
            sluice: self.sluice,
            nats: self.nats,
            backlog: plan.backlog,
        };
        for run in 1..=plan.runs {
            rows.push(drain.sluice(run)?);
            rows.push(drain.nats(run)?);
        }
        Ok(rows)
    }

    /// The paths section: each run, the same load over remoting to the
    /// `ASYNC_FLUSH` broker, to the `SYNC_FLUSH` one, and over gRPC.
    fn paths(&self, sync: &Broker, rows: &mut Vec<Measured>) -> Result<()> {
        let plan = self.plan;
        let remoting = sluice_load(plan.paths_in_flight, plan.seconds, &[]);
        let grpc = sluice_load(
            plan.paths_in_flight,
            plan.seconds,
            &["--protocol", "grpc", "--grpc", &self.sluice.grpc],
        );
        for run in 1..=plan.runs {
            rows.push(self.sluice(self.sluice, Section::Paths, "async", run, &remoting)?);
            rows.push(self.sluice(sync, Section::Paths, "sync", run, &remoting)?);
            rows.push(self.sluice(self.sluice, Section::Paths, "grpc", run, &grpc)?);
        }
        Ok(())
    }

    /// A warm-up run and a measured run of `sluice-bench` against `broker`
    /// with `args` (ending in `--duration <measured seconds>`).
    fn sluice(
        &self,
        broker: &Broker,
        section: Section,
        server: &'static str,
        run: u32,
        args: &[String],
    ) -> Result<Measured> {
        let in_flight = args
            .iter()
            .position(|a| a == "--in-flight")
            .and_then(|i| args.get(i + 1))
            .map_or("1", String::as_str);
        let name = format!("peers-{section:?}-{server}-{in_flight}-{run}").to_lowercase();
        let mut warmup = args.to_vec();
        if let Some(last) = warmup.last_mut() {
            *last = WARMUP_SECS.to_string();
        }
        load(self.setup, broker, &format!("{name}-warmup"), &warmup)?;
        let before = self.clock.seconds(broker.pid())?;
        let (_, report) = load(self.setup, broker, &name, args)?;
        let cpu_s = self.clock.seconds(broker.pid())? - before;
        Ok(Measured::from_report(section, server, run, report, cpu_s))
    }

    fn nats_publish(&self, in_flight: u32, run: u32) -> Result<Measured> {
        let (setup, nats) = (self.setup, self.nats);
        let name = format!("peers-nats-{in_flight}-{run}");
        nats_publish(
            setup,
            nats,
            &format!("{name}-warmup"),
            in_flight,
            0,
            WARMUP_SECS,
        )?;
        let before = self.clock.seconds(nats.pid())?;
        let report = nats_publish(setup, nats, &name, in_flight, 0, self.plan.seconds)?;
        let cpu_s = self.clock.seconds(nats.pid())? - before;
        Ok(Measured::from_report(
            Section::Send,
            "nats",
            run,
            report,
            cpu_s,
        ))
    }

    /// A sizing warm-up and a measured run of `redis-benchmark` with
    /// `(clients, pipeline)`, on an emptied stream.
    fn redis(&self, section: Section, shape: (u32, u32), run: u32) -> Result<Measured> {
        let (redis, seconds) = (self.redis, self.plan.seconds);
        let limit = Duration::from_secs(seconds * 3) + RUN_SLACK;
        redis_clear(redis)?;
        let warmup = redis_benchmark(redis, shape, REDIS_WARMUP_REQUESTS, BODY, limit)?;
        let requests = redis_requests_for(warmup.rps, seconds);
        let before = self.clock.seconds(redis.pid())?;
        let result = redis_benchmark(redis, shape, requests, BODY, limit)?;
        let cpu_s = self.clock.seconds(redis.pid())? - before;
        Ok(Measured::from_redis(section, shape.0, run, result, cpu_s))
    }
}

/// The load tool's arguments for a closed loop of 1 KiB messages at
/// `in_flight` to [`TOPIC`], with `extra` flags; `--duration` comes last.
fn sluice_load(in_flight: u32, seconds: u64, extra: &[&str]) -> Vec<String> {
    let mut args = strings(&[
        "--topic",
        TOPIC,
        "--queues",
        &QUEUES.to_string(),
        "--in-flight",
        &in_flight.to_string(),
        "--connections",
        &sluice_connections(in_flight).to_string(),
        "--warmup",
        "0",
        "--size",
        &BODY.to_string(),
    ]);
    args.extend(strings(extra));
    args.extend(strings(&["--duration", &seconds.to_string()]));
    args
}

/// Connections of Sluice's load tool by in-flight level, as in `closed`.
fn sluice_connections(in_flight: u32) -> u32 {
    match in_flight {
        0..=1 => 1,
        2..=31 => 2,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_found_by_key() {
        let text = "processor\t: 0\nmodel name\t: Some CPU @ 2.00GHz\n";
        assert_eq!(
            field_of(text, "model name").as_deref(),
            Some("Some CPU @ 2.00GHz")
        );
        assert_eq!(field_of(text, "MemTotal"), None);
    }

    #[test]
    fn the_load_ends_with_its_duration_so_the_warm_up_can_shorten_it() {
        let args = sluice_load(16, 5, &["--batch", "32"]);
        assert_eq!(args[args.len() - 2..], ["--duration", "5"]);
        let at = args
            .iter()
            .position(|a| a == "--batch")
            .map(|i| &args[i + 1]);
        assert_eq!(at.map(String::as_str), Some("32"));
        assert!(args.windows(2).any(|w| w == ["--connections", "2"]));
    }

    #[test]
    fn every_section_has_a_layout_and_the_quick_plan_is_small() {
        let options = Options {
            quick: true,
            ..Options::default()
        };
        let plan = Plan::new(&options);
        assert_eq!((plan.runs, plan.seconds), (1, 2));
        let layouts = plan.layouts();
        let sections: Vec<Section> = layouts.iter().map(|l| l.section).collect();
        assert_eq!(
            sections,
            [
                Section::Send,
                Section::Batch,
                Section::Paths,
                Section::Drain
            ]
        );
        assert_eq!(layouts[2].levels, [QUICK_PATHS_IN_FLIGHT]);
        assert_eq!(plan.backlog, QUICK_BACKLOG);
    }
}
