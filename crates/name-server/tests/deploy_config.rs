//! The name server configuration of the Kubernetes manifests loads and
//! describes a working controller.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use name_server::NamesrvConfig;

#[test]
fn the_kubernetes_name_server_configuration_loads() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/k8s/config/namesrv.toml"
    ));
    let text = std::fs::read_to_string(path).unwrap();
    let mut config: NamesrvConfig = toml::from_str(&text).unwrap();
    // The pod's ordinal names it on the command line.
    config.controller_d_leger_self_id = "n1".into();
    config.validate().unwrap();
    let controller = config
        .controller_config(Path::new("/unused"))
        .unwrap()
        .unwrap();
    assert_eq!(controller.peers.len(), 3);
    assert_eq!(controller.self_id, 1);
    assert!(controller.me().addr.starts_with("sluice-namesrv-1."));
}
