//! Repository rules that the compiler does not check.
//!
//! - Every Rust source file starts with a `//!` module doc.
//! - Only `crates/store/src/mmap.rs` may allow `unsafe_code`.
//! - No placeholder macro (`todo`, `unimplemented`) is left in the sources.
//! - The sans-IO crates (`message-model`, `remoting-protocol`,
//!   `flow-control`) and `store` pull in no tokio runtime feature.
//! - No crate depends on `broker-server` (dev-dependencies for tests excepted).

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};

use crate::cargo;

const SOURCE_DIRS: &[&str] = &["crates", "xtask", "tests", "fuzz"];
const UNSAFE_ALLOWED_IN: &str = "crates/store/src/mmap.rs";
const RUNTIME_FREE_CRATES: &[&str] = &[
    "message-model",
    "remoting-protocol",
    "flow-control",
    "store",
];
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
    for file in rust_files(root)? {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let text = fs::read_to_string(&file).with_context(|| format!("read {rel}"))?;
        problems.extend(check_source(&rel, &text));
    }
    for krate in RUNTIME_FREE_CRATES {
        problems.extend(check_no_runtime(root, krate)?);
    }
    problems.extend(check_nothing_depends_on_broker(root)?);
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
}
