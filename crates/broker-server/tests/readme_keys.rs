//! The README's configuration table lists every key the broker accepts, so
//! that the documentation cannot fall behind the code.
#![allow(clippy::unwrap_used)]

use broker_server::BrokerConfig;

#[test]
fn readme_lists_every_configuration_key() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let config = BrokerConfig::default();
    let mut keys: Vec<String> = config.to_map().unwrap().into_keys().collect();
    keys.extend(["namesrvAddr".to_owned(), "storePathCommitLog".to_owned()]);
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !readme.contains(&format!("| `{k}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "README configuration table lacks: {missing:?}"
    );
}
