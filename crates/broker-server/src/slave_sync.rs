//! A slave copies its master's metadata every 3 s, as RocketMQ's slaves
//! do: topics (`GET_ALL_TOPIC_CONFIG`), subscription groups
//! (`GET_ALL_SUBSCRIPTIONGROUP_CONFIG`), consumer offsets
//! (`GET_ALL_CONSUMER_OFFSET`), the delay levels' delivery progress
//! (`GET_ALL_DELAY_OFFSET`) and the timer wheel's (`GET_TIMER_CHECK_POINT`),
//! so that it serves consumers with its master's settings and positions,
//! and, elected master, does not deliver again what its master delivered.
//! What the master has, the slave takes; what only the slave has, it keeps
//! (the timer wheel's progress, one position, is the master's).

use std::{sync::Arc, time::Duration};

use remoting_net::{CancellationToken, RemotingClient};
use remoting_protocol::{
    body::{self, SubscriptionGroupWrapper, TimerCheckpoint, TopicConfigSerializeWrapper},
    RemotingCommand, RequestCode, ResponseCode,
};

use crate::state::BrokerState;

/// How often a slave copies its master's metadata.
pub const PERIOD: Duration = Duration::from_secs(3);

const TIMEOUT: Duration = Duration::from_secs(3);

/// What one copy changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Topics created or updated.
    pub topics: usize,
    /// Subscription groups created or updated.
    pub groups: usize,
    /// Queue offsets that moved.
    pub offsets: usize,
    /// Delay levels whose delivery progress moved.
    pub delay_levels: usize,
    /// Whether the timer wheel's queue positions moved.
    pub timers: bool,
}

/// Copies the master's metadata every [`PERIOD`] until `shutdown`.
pub async fn run(
    state: Arc<BrokerState>,
    client: Arc<RemotingClient>,
    shutdown: CancellationToken,
) {
    loop {
        let slave = state.ha.role() == crate::config::BrokerRole::Slave;
        if let Some(master) = state.ha.master_remoting_addr().filter(|_| slave) {
            match copy_once(&state, &client, &master).await {
                Ok(copied) if copied != Copied::default() => {
                    tracing::info!(%master, ?copied, "copied the master's metadata");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(%master, cause = %e, "cannot copy the master's metadata"),
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// One copy from the master at `master` (its remoting address).
///
/// # Errors
/// A request failed or an answer was not the body expected.
pub async fn copy_once(
    state: &BrokerState,
    client: &RemotingClient,
    master: &str,
) -> Result<Copied, String> {
    let mut copied = Copied::default();
    let topics: TopicConfigSerializeWrapper =
        fetch(client, master, RequestCode::GET_ALL_TOPIC_CONFIG).await?;
    for (_, config) in topics.topic_config_table {
        let name = config.topic_name.clone();
        match state.topics.put(config) {
            Ok(true) => copied.topics += 1,
            Ok(false) => {}
            Err(e) => return Err(format!("cannot keep topic {name}: {e}")),
        }
    }
    let groups: SubscriptionGroupWrapper = fetch(
        client,
        master,
        RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    )
    .await?;
    for (_, config) in groups.subscription_group_table {
        if state.subscriptions.get(&config.group_name).as_ref() != Some(&config) {
            let name = config.group_name.clone();
            state
                .subscriptions
                .put(config)
                .map_err(|e| format!("cannot keep group {name}: {e}"))?;
            copied.groups += 1;
        }
    }
    let request = RemotingCommand::request(RequestCode::GET_ALL_CONSUMER_OFFSET);
    let answer = client
        .invoke(master, request, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    // A master without any offset answers SYSTEM_ERROR, as RocketMQ does.
    if answer.response_code() == ResponseCode::SUCCESS {
        copied.offsets = state.offsets.copy_from(&answer.body)?;
    }
    // The delay levels' progress, so that a slave elected master does not
    // deliver again what its master delivered.
    let request = RemotingCommand::request(RequestCode::GET_ALL_DELAY_OFFSET);
    let answer = client
        .invoke(master, request, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if answer.response_code() == ResponseCode::SUCCESS {
        copied.delay_levels = state.schedule.copy_from(&answer.body)?;
    }
    // The timer wheel's progress, for the same reason; written to disk off
    // the runtime's threads.
    let request = RemotingCommand::request(RequestCode::GET_TIMER_CHECK_POINT);
    let answer = client
        .invoke(master, request, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if answer.response_code() == ResponseCode::SUCCESS {
        let checkpoint = TimerCheckpoint::decode(&answer.body)?;
        let state_timers = Arc::clone(&state.timers);
        copied.timers = tokio::task::spawn_blocking(move || state_timers.adopt(&checkpoint))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot keep the timer progress: {e}"))?;
    }
    Ok(copied)
}

async fn fetch<T: serde::de::DeserializeOwned>(
    client: &RemotingClient,
    master: &str,
    code: RequestCode,
) -> Result<T, String> {
    let answer = client
        .invoke(master, RemotingCommand::request(code), TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return Err(format!(
            "request {} answered {}: {}",
            code.0,
            answer.response_code(),
            answer.remark.unwrap_or_default()
        ));
    }
    body::from_json(&answer.body).map_err(|e| {
        format!(
            "request {} answered a body that does not parse: {e}",
            code.0
        )
    })
}
