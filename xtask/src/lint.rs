//! Repository rules that the compiler does not check.
//!
//! - Every Rust source file starts with a `//!` module doc.
//! - Only `crates/store/src/mmap.rs` may allow `unsafe_code`.
//! - No placeholder macro (`todo`, `unimplemented`) is left in the sources.
//! - The sans-IO crates (`message-model`, `remoting-protocol`,
//!   `replication-protocol`, `flow-control`) and `store` pull in no tokio runtime feature.
//! - No crate depends on `broker-server` (dev-dependencies for tests excepted).
//! - No client crate (`producer-client`, `consumer-client`, `bench`,
//!   `client-core`) depends on `store`, `flow-control` or `broker-server`,
//!   directly or through another workspace crate (dev-dependencies for tests
//!   excepted).
//! - The top-level modules of `broker-server` import each other without
//!   loops (see `modgraph.rs`).

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::{cargo, modgraph};

const SOURCE_DIRS: &[&str] = &["crates", "xtask", "tests", "fuzz"];
const UNSAFE_ALLOWED_IN: &str = "crates/store/src/mmap.rs";
const RUNTIME_FREE_CRATES: &[&str] = &[
    "message-model",
    "remoting-protocol",
    "replication-protocol",
    "flow-control",
    "store",
];
/// The crates applications build on; a crate listed here that does not exist
/// (yet) is skipped.
const CLIENT_CRATES: &[&str] = &[
    "producer-client",
    "consumer-client",
    "bench",
    "client-core",
    "admin",
];
/// The broker's side, which no client crate may pull in.
const BROKER_SIDE_CRATES: &[&str] = &["store", "flow-control", "broker-server"];
/// Crates whose top-level modules may not import each other in a loop.
const LOOP_FREE_CRATES: &[&str] = &["broker-server"];
const TOKIO_RUNTIME_FEATURES: &[&str] = &[
    "rt",
    "rt-multi-thread",
    "net",
    "fs",
    "time",
    "process",
    "signal",
];

/// Checks every rule and reports all violations at once.
pub fn run(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    let mut sources = Vec::new();
    for file in rust_files(root)? {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let text = fs::read_to_string(&file).with_context(|| format!("read {rel}"))?;
        problems.extend(check_source(&rel, &text));
        sources.push((rel, text));
    }
    for krate in LOOP_FREE_CRATES {
        let src = format!("crates/{krate}/src/");
        let files = sources
            .iter()
            .filter_map(|(rel, text)| Some((rel.strip_prefix(&src)?, text.as_str())));
        for members in modgraph::loops(&modgraph::graph(files)) {
            problems.push(format!(
                "{krate}: modules {} import each other in a loop",
                members.join(", ")
            ));
        }
    }
    for krate in RUNTIME_FREE_CRATES {
        problems.extend(check_no_runtime(root, krate)?);
    }
    problems.extend(check_nothing_depends_on_broker(root)?);
    problems.extend(client_dependency_violations(&cargo_metadata(root)?));
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("lint: {p}");
        }
        bail!("{} repository rule violation(s)", problems.len());
    }
    eprintln!("lint: all repository rules hold");
    Ok(())
}

/// The rules that read one source file.
fn check_source(rel: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !text.starts_with("//!") {
        problems.push(format!("{rel}: must start with a `//!` module doc"));
    }
    if rel != UNSAFE_ALLOWED_IN && text.contains(concat!("allow(", "unsafe_code)")) {
        problems.push(format!(
            "{rel}: only {UNSAFE_ALLOWED_IN} may allow unsafe code"
        ));
    }
    for stub in [concat!("todo", "!("), concat!("unimplemented", "!(")] {
        if text.contains(stub) {
            problems.push(format!("{rel}: contains {stub})"));
        }
    }
    problems
}

/// Fails for each tokio runtime feature enabled in `krate`'s normal dependency tree.
fn check_no_runtime(root: &Path, krate: &str) -> Result<Vec<String>> {
    let tree = cargo_tree(
        root,
        &["-p", krate, "-e", "normal,features", "--prefix", "none"],
    )?;
    Ok(TOKIO_RUNTIME_FEATURES
        .iter()
        .filter(|f| {
            tree.lines()
                .any(|l| l.starts_with(&format!("tokio feature \"{f}\"")))
        })
        .map(|f| format!("{krate} pulls in tokio's runtime feature {f:?}; keep it sans-IO"))
        .collect())
}

fn check_nothing_depends_on_broker(root: &Path) -> Result<Vec<String>> {
    let tree = cargo_tree(
        root,
        &[
            "--workspace",
            "-i",
            "broker-server",
            "-e",
            "normal,build",
            "--prefix",
            "depth",
        ],
    )?;
    Ok(tree
        .lines()
        .filter(|l| l.starts_with('1'))
        .map(|l| format!("{} depends on broker-server; nothing may", l[1..].trim()))
        .collect())
}

/// Reports every client crate that reaches a broker-side crate through
/// normal or build dependencies, directly or through other workspace crates.
/// `metadata` is the output of `cargo metadata --format-version 1 --no-deps`.
fn client_dependency_violations(metadata: &Value) -> Vec<String> {
    // Workspace crate -> the crates it needs to build (dev-dependencies left
    // out: they build tests only).
    let mut deps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let Some(name) = package["name"].as_str() else {
            continue;
        };
        let needed = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| matches!(d["kind"].as_str(), None | Some("normal" | "build")))
            .filter_map(|d| d["name"].as_str())
            .collect();
        deps.insert(name, needed);
    }
    let clients: Vec<&str> = CLIENT_CRATES
        .iter()
        .copied()
        .filter(|c| deps.contains_key(c))
        .collect();
    if clients.is_empty() {
        return vec![format!(
            "cargo metadata lists none of the client crates {CLIENT_CRATES:?}; \
             cannot check their dependencies"
        )];
    }
    let mut problems = Vec::new();
    for client in clients {
        // Breadth first, remembering how each crate was reached.
        let mut reached_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([client]);
        let mut seen = BTreeSet::from([client]);
        while let Some(krate) = queue.pop_front() {
            for &dep in deps.get(krate).into_iter().flatten() {
                if !seen.insert(dep) {
                    continue;
                }
                reached_from.insert(dep, krate);
                if BROKER_SIDE_CRATES.contains(&dep) {
                    let mut path = vec![dep];
                    let mut at = dep;
                    while let Some(&from) = reached_from.get(at) {
                        path.push(from);
                        at = from;
                    }
                    path.reverse();
                    problems.push(format!(
                        "client crate {client} depends on {dep} ({}); clients may depend \
                         on none of {} (dev-dependencies excepted)",
                        path.join(" -> "),
                        BROKER_SIDE_CRATES.join(", ")
                    ));
                } else {
                    queue.push_back(dep);
                }
            }
        }
    }
    problems
}

fn cargo_metadata(root: &Path) -> Result<Value> {
    let mut cmd = cargo(root);
    cmd.args(["metadata", "--format-version", "1", "--no-deps"]);
    let out = cmd.output().context("run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("parse cargo metadata")
}

fn cargo_tree(root: &Path, args: &[&str]) -> Result<String> {
    let mut cmd = cargo(root);
    cmd.arg("tree").args(args);
    let out = cmd.output().context("run cargo tree")?;
    if !out.status.success() {
        bail!(
            "cargo tree {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn rust_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = SOURCE_DIRS.iter().map(|d| root.join(d)).collect();
    while let Some(dir) = dirs.pop() {
        if !dir.exists() {
            continue;
        }
        for entry in fs::read_dir(&dir).with_context(|| format!("list {}", dir.display()))? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | "corpus" | "artifacts" | "coverage") {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_rules_catch_each_violation() {
        assert!(check_source("crates/a/src/lib.rs", "//! Doc.\nfn f() {}\n").is_empty());
        assert_eq!(check_source("crates/a/src/lib.rs", "fn f() {}\n").len(), 1);
        let unsafe_allow = concat!("//! Doc.\n#![allow(", "unsafe_code)]\n");
        assert_eq!(check_source("crates/a/src/lib.rs", unsafe_allow).len(), 1);
        assert!(check_source(UNSAFE_ALLOWED_IN, unsafe_allow).is_empty());
        let stub = concat!("//! Doc.\nfn f() { todo", "!() }\n");
        assert_eq!(check_source("crates/a/src/lib.rs", stub).len(), 1);
    }

    /// A package's name and its dependencies as `(name, kind)`.
    type Package<'a> = (&'a str, &'a [(&'a str, Option<&'a str>)]);

    /// `cargo metadata --no-deps` output reduced to what the rule reads.
    fn metadata(packages: &[Package<'_>]) -> Value {
        let packages: Vec<Value> = packages
            .iter()
            .map(|(name, deps)| {
                let deps: Vec<Value> = deps
                    .iter()
                    .map(|(dep, kind)| serde_json::json!({ "name": dep, "kind": kind }))
                    .collect();
                serde_json::json!({ "name": name, "dependencies": deps })
            })
            .collect();
        serde_json::json!({ "packages": packages })
    }

    #[test]
    fn clients_may_use_the_broker_side_in_tests_only() {
        let clean = metadata(&[
            ("message-model", &[("bytes", None)]),
            ("store", &[("message-model", None)]),
            (
                "consumer-client",
                &[
                    ("message-model", None),
                    ("broker-server", Some("dev")),
                    ("store", Some("dev")),
                ],
            ),
            ("bench", &[("consumer-client", None), ("tokio", None)]),
            ("broker-server", &[("store", None), ("flow-control", None)]),
        ]);
        assert_eq!(client_dependency_violations(&clean), Vec::<String>::new());

        let direct = metadata(&[
            ("store", &[]),
            ("consumer-client", &[("store", None)]),
            ("producer-client", &[("flow-control", Some("build"))]),
        ]);
        let problems = client_dependency_violations(&direct);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("producer-client depends on flow-control"));
        assert!(problems[1].contains("consumer-client depends on store"));

        // Through another workspace crate, and a client crate added later.
        let indirect = metadata(&[
            ("client-core", &[("remoting-net", None)]),
            ("remoting-net", &[("broker-server", None)]),
            ("bench", &[("client-core", None)]),
        ]);
        let problems = client_dependency_violations(&indirect);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("bench -> client-core -> remoting-net -> broker-server"));
        assert!(problems[1].contains("client-core depends on broker-server"));
    }

    #[test]
    fn metadata_without_any_client_crate_is_reported() {
        let empty = metadata(&[("store", &[])]);
        assert_eq!(client_dependency_violations(&empty).len(), 1);
    }
}
