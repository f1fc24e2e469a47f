//! The drain part of `cargo xtask bench peers`: a backlog put in
//! beforehand, then read from the beginning, Sluice's push consumer beside
//! a NATS JetStream pull consumer (`sluice-bench drain`, a phase at a time).
//!
//! Each run fills, then reads: Sluice a topic of its own
//! (`DrainTopic<run>`, so that a fresh group reading from the first offset
//! finds exactly this run's messages), NATS the stream `DRAIN`, which its
//! fill deletes and creates again. Only the read is measured: its rate and
//! the CPU time the server used during it.

use std::{fs, time::Duration};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{
    peer_servers::{CpuClock, PeerServer},
    peers_table::{per_msg, Measured, Section},
    runner::{create_topic, run_bounded, Broker, Setup, RUN_SLACK},
};

/// Longest time of one fill or one read, in seconds (`--timeout-secs`).
const PHASE_TIMEOUT_SECS: u64 = 300;
/// Queues of each Sluice drain topic.
const QUEUES: u32 = 8;
/// The NATS stream and subject of every run.
const NATS_STREAM: &str = "DRAIN";
const NATS_SUBJECT: &str = "drain";

/// What `sluice-bench drain --json` prints for one phase (the fields used).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct DrainLine {
    /// `fill` or `read`.
    pub(super) phase: String,
    pub(super) messages: u64,
    pub(super) msgs_per_sec: f64,
}

impl DrainLine {
    /// The single report line of a phase's output.
    fn parse(stdout: &[u8], phase: &str) -> Result<Self> {
        let text = String::from_utf8_lossy(stdout);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with('{'))
            .with_context(|| format!("sluice-bench drain printed no JSON report: {text:?}"))?;
        let parsed: Self = serde_json::from_str(line)
            .with_context(|| format!("sluice-bench drain printed {line:?}"))?;
        if parsed.phase != phase {
            bail!(
                "sluice-bench drain reported phase {:?}, not {phase:?}",
                parsed.phase
            );
        }
        Ok(parsed)
    }
}

impl Measured {
    /// A drain read of `server`, which used `cpu_s` during it.
    pub(super) fn from_drain(server: &'static str, run: u32, line: &DrainLine, cpu_s: f64) -> Self {
        Self {
            section: Section::Drain,
            server,
            in_flight: 0,
            run,
            msgs_per_sec: line.msgs_per_sec,
            p50_ms: None,
            p99_ms: None,
            messages: line.messages,
            cpu_s,
            cpu_us_per_msg: per_msg(cpu_s, line.messages),
            report: None,
            redis: None,
        }
    }
}

/// The servers a drain run reads from.
pub(super) struct DrainServers<'a> {
    pub(super) setup: &'a Setup,
    pub(super) clock: &'a CpuClock,
    pub(super) sluice: &'a Broker,
    pub(super) nats: &'a PeerServer,
    /// Messages of each backlog.
    pub(super) backlog: u64,
}

impl DrainServers<'_> {
    /// Run `run` of Sluice: fill `DrainTopic<run>`, then read it.
    pub(super) fn sluice(&self, run: u32) -> Result<Measured> {
        let topic = format!("DrainTopic{run}");
        create_topic(self.setup, self.sluice, &topic, QUEUES)?;
        let target = [
            "--system",
            "sluice",
            "--namesrv",
            &self.sluice.namesrv,
            "--broker",
            &self.sluice.addr,
            "--topic",
            &topic,
        ];
        self.phase(&target, "fill", &format!("sluice-{run}"))?;
        let before = self.clock.seconds(self.sluice.pid())?;
        let line = self.phase(&target, "read", &format!("sluice-{run}"))?;
        let cpu_s = self.clock.seconds(self.sluice.pid())? - before;
        Ok(Measured::from_drain("sluice", run, &line, cpu_s))
    }

    /// Run `run` of NATS: fill the stream (made afresh), then read it.
    pub(super) fn nats(&self, run: u32) -> Result<Measured> {
        let target = [
            "--system",
            "nats",
            "--server",
            &self.nats.addr,
            "--stream",
            NATS_STREAM,
            "--subject",
            NATS_SUBJECT,
        ];
        self.phase(&target, "fill", &format!("nats-{run}"))?;
        let before = self.clock.seconds(self.nats.pid())?;
        let line = self.phase(&target, "read", &format!("nats-{run}"))?;
        let cpu_s = self.clock.seconds(self.nats.pid())? - before;
        Ok(Measured::from_drain("nats", run, &line, cpu_s))
    }

    /// One phase of `sluice-bench drain` with the `target` flags; its JSON
    /// line is kept in `<work>/peers-drain-<name>-<phase>.json`.
    fn phase(&self, target: &[&str], phase: &str, name: &str) -> Result<DrainLine> {
        let messages = self.backlog.to_string();
        let timeout = PHASE_TIMEOUT_SECS.to_string();
        let mut args: Vec<&str> = vec!["drain"];
        args.extend_from_slice(target);
        args.extend([
            "--phase",
            phase,
            "--messages",
            &messages,
            "--timeout-secs",
            &timeout,
            "--json",
        ]);
        let mut cmd = std::process::Command::new(&self.setup.bench);
        cmd.args(&args);
        eprintln!("bench: sluice-bench {}", args.join(" "));
        let limit = Duration::from_secs(PHASE_TIMEOUT_SECS) + RUN_SLACK;
        let output = run_bounded(cmd, limit)?;
        if !output.status.success() {
            bail!(
                "sluice-bench {} failed with {}",
                args.join(" "),
                output.status
            );
        }
        let file = self
            .setup
            .work
            .join(format!("peers-drain-{name}-{phase}.json"));
        fs::write(&file, &output.stdout).with_context(|| format!("write {}", file.display()))?;
        let line = DrainLine::parse(&output.stdout, phase)?;
        if line.messages != self.backlog {
            bail!(
                "sluice-bench drain {phase} counted {} messages of {}",
                line.messages,
                self.backlog
            );
        }
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: &str = r#"{"system":"sluice","phase":"read","server":"127.0.0.1:9876","destination":"DrainTopic1","messages":20000,"bytes":20480000,"body_bytes":1024,"seconds":0.5,"msgs_per_sec":40000.0,"mib_per_sec":39.0,"first_message_seconds":0.01,"busy_answers":0}"#;

    #[test]
    fn a_read_line_becomes_a_drain_row_with_cpu_per_message() {
        let out = format!("progress on stderr only\n{READ}\n");
        let line = DrainLine::parse(out.as_bytes(), "read").expect("parses");
        assert_eq!((line.messages, line.msgs_per_sec), (20_000, 40_000.0));
        let row = Measured::from_drain("sluice", 2, &line, 0.2);
        assert_eq!(
            (row.section, row.run, row.in_flight),
            (Section::Drain, 2, 0)
        );
        // 0.2 CPU seconds over 20,000 messages.
        assert_eq!(row.cpu_us_per_msg, Some(10.0));
        assert_eq!(row.p50_ms, None);
    }

    #[test]
    fn a_line_of_the_wrong_phase_or_none_is_an_error() {
        assert!(DrainLine::parse(READ.as_bytes(), "fill").is_err());
        assert!(DrainLine::parse(b"nothing here\n", "read").is_err());
        assert!(DrainLine::parse(b"{\"phase\":\"read\"}\n", "read").is_err());
    }
}
