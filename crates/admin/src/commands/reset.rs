//! `group reset-offset`: moves a consumer group's offsets on a topic to a
//! point in time (or the start or end of each queue) on every master broker
//! of the topic's route (`INVOKE_BROKER_TO_RESET_OFFSET`, served by the
//! broker itself as RocketMQ 5 does: the group's consumers are told on
//! their next pull of each queue).

use remoting_protocol::{
    body::ResetOffsetBody, header::ResetOffsetRequestHeader, RemotingCommand, RequestCode,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{time_text, Align, Report, Table},
};

/// Where `group reset-offset` moves the offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "timestamp")]
pub enum ResetTarget {
    /// The first message stored at or after this time (ms since the epoch).
    Time(i64),
    /// The first message still stored in each queue.
    Earliest,
    /// The end of each queue: the group skips what is stored.
    Latest,
}

impl ResetTarget {
    /// The `timestamp` the broker is sent: the time, 0 for the earliest
    /// message, -1 for the end of each queue.
    pub fn timestamp(self) -> i64 {
        match self {
            ResetTarget::Time(ms) => ms,
            ResetTarget::Earliest => 0,
            ResetTarget::Latest => -1,
        }
    }

    fn text(self) -> String {
        match self {
            ResetTarget::Time(ms) => format!("{} UTC ({ms})", time_text(ms)),
            ResetTarget::Earliest => "the earliest message".to_owned(),
            ResetTarget::Latest => "the end of each queue".to_owned(),
        }
    }
}

/// Reads `YYYY-MM-DD HH:MM:SS` (optionally `.mmm`, or a `T` for the space)
/// as a UTC time, in ms since the epoch.
///
/// # Errors
/// The text is not such a time.
pub fn parse_utc_datetime(text: &str) -> Result<i64, String> {
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text.trim(), format).ok())
        .map(|t| t.and_utc().timestamp_millis())
        .ok_or_else(|| format!("{text:?} is not a UTC time as YYYY-MM-DD HH:MM:SS"))
}

/// `group reset-offset`: the offset each queue was reset to.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetReport {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// Where the offsets were moved.
    pub target: ResetTarget,
    /// The one queue asked for, if one was.
    pub queue_id: Option<i32>,
    /// The queues, by broker name and queue id.
    pub queues: Vec<QueueReset>,
}

/// One queue's new offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReset {
    /// The broker's name.
    pub broker_name: String,
    /// The address asked.
    pub broker_addr: String,
    /// The queue id.
    pub queue_id: i32,
    /// The group's offset on the queue from now on.
    pub offset: i64,
}

impl Report for ResetReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Broker", Align::Left),
            ("Queue", Align::Right),
            ("NewOffset", Align::Right),
            ("Address", Align::Left),
        ]);
        for q in &self.queues {
            t.row(vec![
                q.broker_name.clone(),
                q.queue_id.to_string(),
                q.offset.to_string(),
                q.broker_addr.clone(),
            ]);
        }
        format!(
            "{t}group {} on topic {}: {} queue(s) reset to {}; consumers move \
             there on their next pull\n",
            self.group,
            self.topic,
            self.queues.len(),
            self.target.text()
        )
    }
}

/// The queues of several brokers' answers (address, body), sorted.
pub fn merge_resets(answers: &[(String, ResetOffsetBody)]) -> Vec<QueueReset> {
    let mut queues: Vec<QueueReset> = answers
        .iter()
        .flat_map(|(addr, body)| {
            body.offset_table.iter().map(move |(q, offset)| QueueReset {
                broker_name: q.broker_name.clone(),
                broker_addr: addr.clone(),
                queue_id: q.queue_id,
                offset: *offset,
            })
        })
        .collect();
    queues.sort_by(|a, b| (&a.broker_name, a.queue_id).cmp(&(&b.broker_name, b.queue_id)));
    queues
}

/// Resets `group`'s offsets on `topic` (on queue `queue_id` only, if given)
/// to `target` on every master broker of the topic's route.
///
/// # Errors
/// [`AdminError::NoRoute`] when the topic has none; otherwise the first
/// broker that fails, named with the request, code and remark (brokers
/// asked before it keep their reset).
pub async fn group_reset_offset(
    admin: &Admin,
    group: &str,
    topic: &str,
    target: ResetTarget,
    queue_id: Option<i32>,
) -> Result<ResetReport, AdminError> {
    let Some(route) = admin.route(topic).await? else {
        return Err(AdminError::NoRoute {
            namesrv: admin.namesrv_text(),
            topic: topic.to_owned(),
        });
    };
    let mut answers = Vec::new();
    for addr in Admin::route_masters(&route) {
        let request = RemotingCommand::request_with_header(
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
            &ResetOffsetRequestHeader {
                topic: topic.to_owned(),
                group: group.to_owned(),
                timestamp: target.timestamp(),
                is_force: true,
                queue_id: Some(queue_id.unwrap_or(-1)),
                offset: Some(-1),
                broker_name: None,
            },
        );
        let answer = admin.call(Peer::Broker, &addr, request).await?;
        let body = ResetOffsetBody::decode(&answer.body).map_err(|e| AdminError::BadAnswer {
            peer: Peer::Broker,
            addr: addr.clone(),
            request: RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
            reason: e.to_string(),
        })?;
        answers.push((addr, body));
    }
    Ok(ResetReport {
        group: group.to_owned(),
        topic: topic.to_owned(),
        target,
        queue_id,
        queues: merge_resets(&answers),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use clap::Parser;
    use remoting_protocol::body::MessageQueueBody;

    use super::*;
    use crate::{
        args::{Command, GroupCommand},
        render::render,
        Cli,
    };

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(
            ["sluice-admin", "group", "reset-offset"]
                .into_iter()
                .chain(args.iter().copied()),
        )
    }

    fn target(args: &[&str]) -> Result<(ResetTarget, Option<i32>), clap::Error> {
        let cli = parse(args)?;
        let Command::Group(GroupCommand::ResetOffset(r)) = cli.command else {
            panic!("not group reset-offset: {cli:?}");
        };
        assert_eq!((r.group.as_str(), r.topic.as_str()), ("G", "T"));
        Ok((r.target(), r.queue))
    }

    #[test]
    fn exactly_one_target_is_required() {
        let gt = ["--group", "G", "--topic", "T"];
        let with = |extra: &[&'static str]| {
            let mut all = gt.to_vec();
            all.extend_from_slice(extra);
            target(&all)
        };
        let ok = |r: Result<_, clap::Error>| r.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            ok(with(&["--timestamp", "1714564800123"])),
            (ResetTarget::Time(1_714_564_800_123), None)
        );
        assert_eq!(
            ok(with(&["--datetime", "2024-05-01 12:00:00", "--queue", "3"])),
            (ResetTarget::Time(1_714_564_800_000), Some(3))
        );
        assert_eq!(ok(with(&["--to-earliest"])).0, ResetTarget::Earliest);
        assert_eq!(ok(with(&["--to-latest"])).0, ResetTarget::Latest);
        assert!(with(&[]).is_err(), "a target is required");
        assert!(with(&["--to-earliest", "--to-latest"]).is_err());
        assert!(with(&["--timestamp", "1", "--datetime", "2024-05-01 12:00:00"]).is_err());
        assert!(with(&["--timestamp", "-5"]).is_err());
        assert!(with(&["--datetime", "yesterday"]).is_err());
        assert!(with(&["--to-latest", "--queue", "-1"]).is_err());
        assert!(parse(&["--topic", "T", "--to-latest"]).is_err(), "--group");
    }

    #[test]
    fn datetimes_are_utc() {
        assert_eq!(parse_utc_datetime("1970-01-01 00:00:01"), Ok(1000));
        assert_eq!(
            parse_utc_datetime("2024-05-01T12:00:00.123"),
            Ok(1_714_564_800_123)
        );
        assert!(parse_utc_datetime("2024-05-01").is_err());
        assert_eq!(ResetTarget::Earliest.timestamp(), 0);
        assert_eq!(ResetTarget::Latest.timestamp(), -1);
    }

    #[test]
    fn the_report_lists_each_queue_sorted() {
        let body = |broker: &str, offsets: &[(i32, i64)]| ResetOffsetBody {
            offset_table: offsets
                .iter()
                .map(|(queue_id, offset)| {
                    (
                        MessageQueueBody {
                            topic: "T".into(),
                            broker_name: broker.into(),
                            queue_id: *queue_id,
                        },
                        *offset,
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        };
        let report = ResetReport {
            group: "G".into(),
            topic: "T".into(),
            target: ResetTarget::Time(1_714_564_800_123),
            queue_id: None,
            queues: merge_resets(&[
                ("b:2".into(), body("broker-b", &[(0, 7)])),
                ("a:1".into(), body("broker-a", &[(1, 12), (0, 3)])),
            ]),
        };
        assert_eq!(
            report.text(),
            "Broker    Queue  NewOffset  Address\n\
             broker-a      0          3  a:1\n\
             broker-a      1         12  a:1\n\
             broker-b      0          7  b:2\n\
             group G on topic T: 3 queue(s) reset to 2024-05-01 12:00:00.123 UTC \
             (1714564800123); consumers move there on their next pull\n"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render(&report, true)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["queues"][1]["offset"], 12);
        assert_eq!(json["queues"][2]["brokerAddr"], "b:2");
        assert_eq!(json["target"]["kind"], "time");
        assert_eq!(json["target"]["timestamp"], 1_714_564_800_123_i64);
    }
}
