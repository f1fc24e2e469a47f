//! Body compression end to end: a body over `compressMsgBodyOverHowmuch` is
//! stored zlib-compressed with sysFlag `0x1 | 0x300` and decompresses to
//! what was sent; small bodies and batches are stored as they are.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use common::{bounded, config, TestBroker};
use producer_client::{decompress_body, Message, Producer};

const COMPRESSED: i32 = 0x1;
const ZLIB: i32 = 0x300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_is_stored_compressed_and_a_small_one_is_not() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Zip").await;
        common::wait_for_route(b.namesrv(), "Zip", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let large: Vec<u8> = (0..20_000_u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        let large = Bytes::from(large);
        let sent = producer
            .send(Message::new("Zip", large.clone()))
            .await
            .unwrap();
        let queue = &sent.message_queue;
        let small = producer
            .send_to_queue(Message::new("Zip", "small body"), queue)
            .await
            .unwrap();
        let batch = vec![
            Message::new("Zip", vec![b'x'; 5000]),
            Message::new("Zip", vec![b'y'; 5000]),
        ];
        let same_queue = |qs: &[producer_client::MessageQueue], _: &Message, _: &()| {
            qs.iter().position(|q| q == queue).unwrap()
        };
        producer
            .send_batch_with_selector(batch, same_queue, &())
            .await
            .unwrap();

        let qid = i32::try_from(queue.queue_id).unwrap();
        let pulled = b
            .pull("Zip", qid, i64::try_from(sent.queue_offset).unwrap(), 4)
            .await;
        let big = &pulled[0];
        assert_eq!(big.sys_flag & (COMPRESSED | 0x700), COMPRESSED | ZLIB);
        assert!(big.body.len() < large.len() / 2, "{} bytes", big.body.len());
        let restored =
            decompress_body(big.sys_flag, Bytes::from(big.body.clone()), 1 << 30).unwrap();
        assert_eq!(restored, large);

        let plain = &pulled[1];
        assert_eq!(
            plain.queue_offset,
            i64::try_from(small.queue_offset).unwrap()
        );
        assert_eq!(plain.sys_flag & COMPRESSED, 0);
        assert_eq!(plain.body, b"small body");

        for (m, fill) in pulled[2..4].iter().zip([b'x', b'y']) {
            assert_eq!(m.sys_flag & COMPRESSED, 0, "batches are not compressed");
            assert_eq!(m.body, vec![fill; 5000]);
        }
        producer.shutdown().await;
    })
    .await;
}
