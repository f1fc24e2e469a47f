//! Test tool: appends messages to a store and prints one line per
//! acknowledged append, until it is killed or reaches its count.
//!
//! Usage: `crash_writer DIR TOPIC ASYNC_FLUSH|SYNC_FLUSH COUNT`
//!
//! Each line is `index queue_id queue_offset physical_offset`, written after
//! the store acknowledged the append. The crash tests kill this process with
//! SIGKILL at a random moment and check that every printed message survives.

use std::{io::Write, net::SocketAddr, process::ExitCode};

use bytes::Bytes;
use store::{FlushDiskType, MessageStore, MessageToStore, StoreConfig};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, topic, flush, count] = args.as_slice() else {
        eprintln!("usage: crash_writer DIR TOPIC ASYNC_FLUSH|SYNC_FLUSH COUNT");
        return ExitCode::from(2);
    };
    let flush_disk_type = match flush.as_str() {
        "SYNC_FLUSH" => FlushDiskType::SyncFlush,
        _ => FlushDiskType::AsyncFlush,
    };
    let Ok(count) = count.parse::<u64>() else {
        eprintln!("COUNT must be a number");
        return ExitCode::from(2);
    };
    let config = StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        max_hash_slot_num: 10_000,
        max_index_num: 40_000,
        flush_disk_type,
        // Files younger than fileReservedTime stay however full the shared
        // disk is: every acknowledged message must still be there.
        clean_file_forcibly_enable: false,
        ..StoreConfig::with_root(dir)
    };
    let store = match MessageStore::open(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("open failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let host: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 10911));
    let mut out = std::io::stdout().lock();
    for i in 0..count {
        let queue_id = (i % 4) as i32;
        let msg = MessageToStore {
            topic: topic.clone(),
            queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body(i),
            properties: format!("UNIQ_KEY\u{1}{i}\u{2}"),
        };
        match store.put_message(&msg) {
            Ok(done) => {
                if writeln!(
                    out,
                    "{i} {queue_id} {} {}",
                    done.append.queue_offset, done.append.physical_offset
                )
                .and_then(|()| out.flush())
                .is_err()
                {
                    return ExitCode::FAILURE;
                }
            }
            Err(e) => {
                eprintln!("append {i} failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// The body of message `i`, which the crash tests recompute to compare.
fn body(i: u64) -> Bytes {
    let len = 200 + (i % 13) as usize * 61;
    let mut b = i.to_be_bytes().to_vec();
    b.extend((0..len).map(|j| (i as usize * 7 + j) as u8));
    Bytes::from(b)
}
