//! A panic on any broker thread stops the process with exit code 70, so
//! that a supervisor restarts it (and recovery runs), instead of leaving a
//! broker running without one of its threads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::{E2eEnv, OwnBroker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_thread_stops_the_broker_with_a_nonzero_exit() {
    let Some(env) = E2eEnv::from_env("panic stop") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "panic", &["faultPanicAfterMills=3000"]).unwrap();
    let status = broker
        .wait_exit(Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the broker kept running after its housekeeping thread panicked");
    assert_eq!(status.code(), Some(70), "{status:?}");
    let log = std::fs::read_to_string(broker.dir.join("broker.log")).unwrap();
    assert!(
        log.contains("a broker thread panicked"),
        "the log does not say why it stopped"
    );
    println!("panic stop: exit code 70 after the injected panic");
}
