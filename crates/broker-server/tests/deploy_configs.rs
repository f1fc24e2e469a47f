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
            } else if path.extension().is_some_and(|e| e == "toml")
                && !path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("namesrv"))
            {
                let config = BrokerConfig::load(Some(&path), std::iter::empty(), &[])
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(!config.broker.broker_name.is_empty());
                loaded += 1;
            }
        }
    }
    assert!(loaded >= 3, "found {loaded} example configurations");
}

#[test]
fn the_kustomization_names_configurations_that_exist() {
    let k8s = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/k8s"));
    let text = std::fs::read_to_string(k8s.join("kustomization.yaml")).unwrap();
    let mut named = 0;
    for line in text.lines().map(str::trim) {
        // `- broker.toml=config/broker-a.toml` and `- namesrv.yaml`.
        let Some(entry) = line.strip_prefix("- ") else {
            continue;
        };
        let file = entry.split_once('=').map_or(entry, |(_, f)| f);
        if !(file.ends_with(".yaml") || file.ends_with(".toml")) {
            continue;
        }
        assert!(
            k8s.join(file).is_file(),
            "kustomization.yaml names {file}, which is missing"
        );
        named += 1;
    }
    assert!(named >= 5, "found {named} files in kustomization.yaml");
}
