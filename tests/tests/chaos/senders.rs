//! Producers that send numbered bodies and remember what was acknowledged,
//! and a reader that checks every queue of a topic against them.

use std::collections::HashMap;

use consumer_client::{ConsumerConfig, MessageQueue, PullConsumer, PullStatus};

use super::*;

/// One acknowledged send, and when its answer came.
#[derive(Debug, Clone)]
pub(crate) struct Ack {
    pub(crate) index: u64,
    pub(crate) queue_id: u32,
    pub(crate) queue_offset: u64,
    pub(crate) at: Instant,
}

/// The body of message `i` (about 800 bytes, its index readable in it).
pub(crate) fn body(i: u64) -> Vec<u8> {
    format!("chaos-{i:012}-").repeat(40).into_bytes()
}

/// The index a body carries.
fn index_of(body: &[u8]) -> Option<u64> {
    std::str::from_utf8(body.get(6..18)?).ok()?.parse().ok()
}

/// Send tasks that run until [`Senders::stop`].
pub(crate) struct Senders {
    producer: Arc<Producer>,
    acks: Arc<Mutex<Vec<Ack>>>,
    refusals: Arc<Mutex<Vec<(Instant, String)>>>,
    next: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What the senders saw.
pub(crate) struct Sent {
    pub(crate) acks: Vec<Ack>,
    /// Each failed send: when, and the error.
    pub(crate) refusals: Vec<(Instant, String)>,
    /// The first index never used.
    pub(crate) next_index: u64,
}

impl Senders {
    /// Starts `tasks` senders to `topic` through the name server
    /// `namesrv`, numbering bodies from `first_index`; a failed send is not
    /// retried and its sender pauses 20 ms.
    pub(crate) async fn start(namesrv: &str, topic: &str, first_index: u64, tasks: usize) -> Self {
        let mut config = ProducerConfig::with_namesrv(namesrv);
        config.retry_times_when_send_failed = 0;
        let producer = Arc::new(Producer::start(config).await.unwrap());
        let mut senders = Self {
            producer,
            acks: Arc::default(),
            refusals: Arc::default(),
            next: Arc::new(AtomicU64::new(first_index)),
            stop: Arc::default(),
            tasks: Vec::new(),
        };
        for _ in 0..tasks {
            let (producer, acks, refusals, next, stop, topic) = (
                Arc::clone(&senders.producer),
                Arc::clone(&senders.acks),
                Arc::clone(&senders.refusals),
                Arc::clone(&senders.next),
                Arc::clone(&senders.stop),
                topic.to_owned(),
            );
            senders.tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    match producer.send(Message::new(topic.as_str(), body(i))).await {
                        Ok(r) => acks.lock().unwrap().push(Ack {
                            index: i,
                            queue_id: r.message_queue.queue_id,
                            queue_offset: r.queue_offset,
                            at: Instant::now(),
                        }),
                        Err(e) => {
                            refusals
                                .lock()
                                .unwrap()
                                .push((Instant::now(), e.to_string()));
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }));
        }
        senders
    }

    /// Acknowledged sends so far.
    pub(crate) fn acked(&self) -> usize {
        self.acks.lock().unwrap().len()
    }

    /// Failed sends so far.
    pub(crate) fn refused(&self) -> usize {
        self.refusals.lock().unwrap().len()
    }

    /// Stops the senders (each finishes its send in flight) and returns
    /// what they saw.
    pub(crate) async fn stop(self) -> Sent {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .unwrap()
                .unwrap();
        }
        self.producer.shutdown().await;
        let acks = self.acks.lock().unwrap().clone();
        let refusals = self.refusals.lock().unwrap().clone();
        Sent {
            acks,
            refusals,
            next_index: self.next.load(Ordering::Relaxed),
        }
    }
}

/// Reads every queue of `topic` whole: per queue id, the index each offset
/// holds. Panics when a queue has a gap or a body that is not one of
/// [`body`]'s.
pub(crate) async fn read_queues(namesrv: &str, topic: &str, queues: u32) -> HashMap<u32, Vec<u64>> {
    let consumer = PullConsumer::start(ConsumerConfig::new(namesrv, unique("chaos-check-")))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let broker_name = loop {
        if let Ok(routes) = consumer.fetch_queues(topic).await {
            if let Some(q) = routes.first() {
                break q.broker_name.clone();
            }
        }
        assert!(Instant::now() < deadline, "no route for {topic}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut out = HashMap::new();
    for queue_id in 0..queues {
        let queue = MessageQueue {
            topic: topic.to_owned(),
            broker_name: broker_name.clone(),
            queue_id,
        };
        let mut held = Vec::new();
        for _ in 0..1_000_000 {
            let got = consumer.pull(&queue, held.len() as u64, 32).await.unwrap();
            if !matches!(got.status, PullStatus::Found) {
                break;
            }
            for m in &got.messages {
                assert_eq!(
                    m.queue_offset,
                    held.len() as u64,
                    "queue {queue_id} has a gap"
                );
                let index = index_of(&m.body)
                    .filter(|i| m.body == body(*i))
                    .unwrap_or_else(|| {
                        panic!(
                            "queue {queue_id} offset {} holds a foreign body",
                            m.queue_offset
                        )
                    });
                held.push(index);
            }
        }
        out.insert(queue_id, held);
    }
    consumer.shutdown().await;
    out
}

/// Whether `ack` is in `held` at its queue offset.
pub(crate) fn holds(held: &HashMap<u32, Vec<u64>>, ack: &Ack) -> bool {
    held.get(&ack.queue_id)
        .and_then(|q| q.get(ack.queue_offset as usize))
        == Some(&ack.index)
}
