//! What each request code needs its user to be allowed: actions on the
//! topics, groups or cluster that the request's header or body names.
//!
//! The checks follow RocketMQ 5.3's: a send needs `Pub` on its topic (a
//! send to a group's retry topic `Sub` on the group); a pull `Sub` on the
//! topic and the group; reading state `Get`; changes `Create`, `Update` or
//! `Delete`. Beyond RocketMQ, every admin code the broker serves is
//! checked: codes that name no topic or group need the action on
//! `Cluster:<brokerClusterName>`.

use auth::{Action, Requirement, Resource};
use message_model::flags::RETRY_GROUP_TOPIC_PREFIX;
use remoting_protocol::{
    body::{
        self, CheckClientRequestBody, HeartbeatData, LockBatchRequestBody, SubscriptionGroupConfig,
    },
    RemotingCommand, RequestCode,
};

const PUB: &[Action] = &[Action::Pub];
const SUB: &[Action] = &[Action::Sub];
const SUB_OR_GET: &[Action] = &[Action::Sub, Action::Get];
const SUB_OR_UPDATE: &[Action] = &[Action::Sub, Action::Update];
const GET: &[Action] = &[Action::Get];
const CREATE_OR_UPDATE: &[Action] = &[Action::Create, Action::Update];
const UPDATE: &[Action] = &[Action::Update];
const DELETE: &[Action] = &[Action::Delete];

/// The checks `request` needs; `cluster` names the broker's cluster. Empty
/// when the request needs only an authenticated user (such as a producer
/// unregistering).
pub fn requirements(request: &RemotingCommand, cluster: &str) -> Vec<Requirement> {
    use RequestCode as C;
    let field = |short: &str, long: &str| {
        request
            .ext_fields
            .get(short)
            .or_else(|| request.ext_fields.get(long))
            .map(|v| v.as_str().to_owned())
            .filter(|v| !v.is_empty())
    };
    let one = |name: &str| field(name, name);
    let topic = |actions| one("topic").map(|t| Requirement::new(Resource::topic(t), actions));
    let group =
        |name: &str, actions| one(name).map(|g| Requirement::new(Resource::group(g), actions));
    let on_cluster = |actions| vec![Requirement::new(Resource::cluster(cluster), actions)];
    let code = request.request_code();
    let mut needs: Vec<Option<Requirement>> = Vec::new();
    match code {
        C::SEND_MESSAGE | C::SEND_MESSAGE_V2 | C::SEND_BATCH_MESSAGE => {
            if let Some(t) = field("b", "topic") {
                needs.push(Some(send_target(&t, field("a", "producerGroup"))));
            }
        }
        C::PULL_MESSAGE | C::LITE_PULL_MESSAGE => {
            needs.push(
                one("topic")
                    .filter(|t| !is_retry(t))
                    .map(|t| Requirement::new(Resource::topic(t), SUB)),
            );
            needs.push(group("consumerGroup", SUB));
        }
        C::QUERY_CONSUMER_OFFSET => {
            needs.push(topic(SUB_OR_GET));
            needs.push(group("consumerGroup", SUB_OR_GET));
        }
        C::UPDATE_CONSUMER_OFFSET => {
            needs.push(topic(SUB_OR_UPDATE));
            needs.push(group("consumerGroup", SUB_OR_UPDATE));
        }
        C::CONSUMER_SEND_MSG_BACK => needs.push(group("group", SUB)),
        C::GET_CONSUMER_LIST_BY_GROUP => needs.push(group("consumerGroup", SUB_OR_GET)),
        C::UNREGISTER_CLIENT => needs.push(group("consumerGroup", SUB)),
        C::END_TRANSACTION => needs.push(topic(PUB)),
        C::HEART_BEAT => {
            if let Ok(hb) = body::from_json::<HeartbeatData>(&request.body) {
                for consumer in &hb.consumer_data_set {
                    needs.push(Some(Requirement::new(
                        Resource::group(&consumer.group_name),
                        SUB,
                    )));
                    for sub in &consumer.subscription_data_set {
                        if !is_retry(&sub.topic) {
                            needs.push(Some(Requirement::new(Resource::topic(&sub.topic), SUB)));
                        }
                    }
                }
            }
        }
        C::CHECK_CLIENT_CONFIG => {
            if let Ok(check) = body::from_json::<CheckClientRequestBody>(&request.body) {
                needs.push(Some(Requirement::new(Resource::group(check.group), SUB)));
            }
        }
        C::LOCK_BATCH_MQ | C::UNLOCK_BATCH_MQ => {
            if let Ok(lock) = body::from_json::<LockBatchRequestBody>(&request.body) {
                needs.push(Some(Requirement::new(
                    Resource::group(&lock.consumer_group),
                    SUB,
                )));
                let mut topics: Vec<&str> = lock.mq_set.iter().map(|q| q.topic.as_str()).collect();
                topics.sort_unstable();
                topics.dedup();
                for t in topics.into_iter().filter(|t| !is_retry(t)) {
                    needs.push(Some(Requirement::new(Resource::topic(t), SUB)));
                }
            }
        }
        C::GET_MAX_OFFSET
        | C::GET_MIN_OFFSET
        | C::SEARCH_OFFSET_BY_TIMESTAMP
        | C::GET_EARLIEST_MSG_STORETIME
        | C::QUERY_MESSAGE => {
            needs.push(topic(SUB_OR_GET));
        }
        C::VIEW_MESSAGE_BY_ID => match topic(GET) {
            Some(t) => needs.push(Some(t)),
            None => return on_cluster(GET),
        },
        C::UPDATE_AND_CREATE_TOPIC => needs.push(topic(CREATE_OR_UPDATE)),
        C::DELETE_TOPIC_IN_BROKER => needs.push(topic(DELETE)),
        C::GET_TOPIC_CONFIG | C::GET_TOPIC_STATS_INFO | C::QUERY_TOPIC_CONSUME_BY_WHO => {
            needs.push(topic(GET))
        }
        C::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            if let Ok(config) = body::from_json::<SubscriptionGroupConfig>(&request.body) {
                needs.push(Some(Requirement::new(
                    Resource::group(config.group_name),
                    CREATE_OR_UPDATE,
                )));
            }
        }
        C::DELETE_SUBSCRIPTIONGROUP => needs.push(group("groupName", DELETE)),
        C::GET_CONSUME_STATS => {
            needs.push(group("consumerGroup", GET));
            needs.push(topic(GET));
        }
        C::GET_CONSUMER_CONNECTION_LIST => needs.push(group("consumerGroup", GET)),
        C::INVOKE_BROKER_TO_RESET_OFFSET => {
            needs.push(group("group", UPDATE));
            needs.push(topic(UPDATE));
        }
        C::UPDATE_BROKER_CONFIG | C::DELETE_EXPIRED_COMMITLOG => return on_cluster(UPDATE),
        C::AUTH_CREATE_USER | C::AUTH_CREATE_ACL => return on_cluster(CREATE_OR_UPDATE),
        C::AUTH_UPDATE_USER | C::AUTH_UPDATE_ACL => return on_cluster(UPDATE),
        C::AUTH_DELETE_USER | C::AUTH_DELETE_ACL => return on_cluster(DELETE),
        C::AUTH_LIST_USER | C::AUTH_LIST_ACL => return on_cluster(&[Action::List, Action::Get]),
        // Configuration, runtime figures, statistics, every topic's or
        // group's settings and offsets, producers, the user and ACL reads.
        _ => return on_cluster(GET),
    }
    let needs: Vec<Requirement> = needs.into_iter().flatten().collect();
    if needs.is_empty() && names_a_resource(code) {
        // A request that should name a topic or group and names none is
        // checked against the cluster, so a missing field grants nothing.
        return on_cluster(GET);
    }
    needs
}

/// Codes whose check needs a topic or group from the request.
fn names_a_resource(code: RequestCode) -> bool {
    use RequestCode as C;
    !matches!(
        code,
        C::UNREGISTER_CLIENT | C::END_TRANSACTION | C::HEART_BEAT
    )
}

fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// A send to `topic`: `Pub` on it, or for a retry topic `Sub` on its group.
fn send_target(topic: &str, producer_group: Option<String>) -> Requirement {
    match topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        Some(group) => Requirement::new(
            Resource::group(producer_group.unwrap_or_else(|| group.to_owned())),
            SUB,
        ),
        None => Requirement::new(Resource::topic(topic), PUB),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(code: RequestCode, fields: &[(&str, &str)], body: &str) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code);
        for (k, v) in fields {
            cmd.ext_fields.insert((*k).into(), (*v).into());
        }
        cmd.body = body.as_bytes().to_vec().into();
        cmd
    }

    fn names(needs: &[Requirement]) -> Vec<String> {
        needs
            .iter()
            .map(|n| {
                let actions: Vec<&str> = n.actions.iter().map(|a| a.name()).collect();
                format!("{} {}", n.resource, actions.join("|"))
            })
            .collect()
    }

    #[test]
    fn traffic_needs_pub_or_sub_on_its_topic_and_group() {
        let send = req(
            RequestCode::SEND_MESSAGE_V2,
            &[("a", "PG"), ("b", "orders")],
            "",
        );
        assert_eq!(names(&requirements(&send, "C")), ["Topic:orders Pub"]);
        let retry = req(RequestCode::SEND_MESSAGE, &[("topic", "%RETRY%G1")], "");
        assert_eq!(names(&requirements(&retry, "C")), ["Group:G1 Sub"]);
        let pull = req(
            RequestCode::PULL_MESSAGE,
            &[("consumerGroup", "G"), ("topic", "orders")],
            "",
        );
        assert_eq!(
            names(&requirements(&pull, "C")),
            ["Topic:orders Sub", "Group:G Sub"]
        );
        let retry_pull = req(
            RequestCode::PULL_MESSAGE,
            &[("consumerGroup", "G"), ("topic", "%RETRY%G")],
            "",
        );
        assert_eq!(names(&requirements(&retry_pull, "C")), ["Group:G Sub"]);
        let hb = req(
            RequestCode::HEART_BEAT,
            &[],
            r#"{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"},{"topic":"%RETRY%G"}]}],"producerDataSet":[{"groupName":"P"}]}"#,
        );
        assert_eq!(
            names(&requirements(&hb, "C")),
            ["Group:G Sub", "Topic:T Sub"]
        );
        let producer_hb = req(
            RequestCode::HEART_BEAT,
            &[],
            r#"{"clientID":"c","producerDataSet":[{"groupName":"P"}]}"#,
        );
        assert!(requirements(&producer_hb, "C").is_empty());
    }

    #[test]
    fn admin_codes_need_their_action_on_what_they_name_or_the_cluster() {
        let create = req(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "T")], "");
        assert_eq!(
            names(&requirements(&create, "C")),
            ["Topic:T Create|Update"]
        );
        let config = req(RequestCode::UPDATE_BROKER_CONFIG, &[], "a=b");
        assert_eq!(names(&requirements(&config, "C1")), ["Cluster:C1 Update"]);
        let runtime = req(RequestCode::GET_BROKER_RUNTIME_INFO, &[], "");
        assert_eq!(names(&requirements(&runtime, "C1")), ["Cluster:C1 Get"]);
        let reset = req(
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
            &[("topic", "T"), ("group", "G")],
            "",
        );
        assert_eq!(
            names(&requirements(&reset, "C")),
            ["Group:G Update", "Topic:T Update"]
        );
        let view = req(RequestCode::VIEW_MESSAGE_BY_ID, &[("offset", "1")], "");
        assert_eq!(names(&requirements(&view, "C")), ["Cluster:C Get"]);
        let sub_group = req(
            RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            &[],
            r#"{"groupName":"G"}"#,
        );
        assert_eq!(
            names(&requirements(&sub_group, "C")),
            ["Group:G Create|Update"]
        );
        // A request missing the field its check needs is checked on the
        // cluster, not waved through.
        let no_topic = req(RequestCode::DELETE_TOPIC_IN_BROKER, &[], "");
        assert_eq!(names(&requirements(&no_topic, "C")), ["Cluster:C Get"]);
        let user = req(RequestCode::AUTH_CREATE_USER, &[("username", "u")], "{}");
        assert_eq!(
            names(&requirements(&user, "C")),
            ["Cluster:C Create|Update"]
        );
    }
}
