//! The example configurations under `deploy/` load without error.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use broker_server::BrokerConfig;

#[test]
fn every_example_configuration_loads() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy"));
    let mut dirs = vec![root.to_path_buf()];
    let mut loaded = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "toml") {
                let config = BrokerConfig::load(Some(&path), std::iter::empty(), &[])
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(!config.broker.broker_name.is_empty());
                loaded += 1;
            }
        }
    }
    assert!(loaded >= 3, "found {loaded} example configurations");
}
