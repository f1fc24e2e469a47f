//! `cargo xtask ci`: the checks every change must pass.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::Stdio,
};

use anyhow::{bail, Context, Result};

use crate::{cargo, lint, run};

/// Runs every check in order, stopping at the first failure.
pub fn all(root: &Path) -> Result<()> {
    let mut fmt = cargo(root);
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt)?;
    lint::run(root)?;
    manifests(root)?;
    let mut clippy = cargo(root);
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)?;
    fuzz_check(root)?;
    crate::e2e::run_suite(
        root,
        crate::e2e::Options {
            quick: true,
            include_ignored: false,
            filter: None,
        },
    )?;
    // The overload experiment end to end, in debug with short phases (about
    // 35 s with the broker already built): it must run, whatever it measures.
    crate::bench::main(root, &["overload".to_owned(), "--quick".to_owned()])?;
    // Sluice beside NATS and Redis, one short run at 1 and 16 in flight (about
    // 20 s with the same binaries built): a smoke test, no thresholds.
    crate::bench::main(root, &["peers".to_owned(), "--quick".to_owned()])?;
    crate::chaos::main(root, &["--quick".to_owned()])?;
    test(root)
}

/// The Kubernetes version the manifests are checked against.
const KUBERNETES_VERSION: &str = "1.31.0";

/// Checks the Kubernetes manifests under `deploy/k8s` against the API's
/// schemas, strictly (unknown fields refused), with kubernetes-validate
/// (installed by `scripts/install-k8s-validate.sh`). The kustomization
/// itself is no API object; the configurations it turns into ConfigMaps
/// are loaded by the broker's and the name server's tests.
pub fn manifests(root: &Path) -> Result<()> {
    let validator = root.join("target/k8s-validate/venv/bin/kubernetes-validate");
    if !validator.exists() {
        bail!(
            "{} is missing: run scripts/install-k8s-validate.sh",
            validator.display()
        );
    }
    let dir = root.join("deploy/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml")
                && p.file_name().is_some_and(|n| n != "kustomization.yaml")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no manifests in {}", dir.display());
    }
    let mut cmd = std::process::Command::new(validator);
    cmd.args(["--strict", "--quiet", "-k", KUBERNETES_VERSION])
        .args(&files);
    run(cmd)
}

/// Builds the fuzz targets (outside the workspace) into the shared target dir.
pub fn fuzz_check(root: &Path) -> Result<()> {
    let mut fmt = cargo(root);
    fmt.args(["fmt", "--manifest-path", "fuzz/Cargo.toml", "--", "--check"]);
    run(fmt)?;
    let mut check = cargo(root);
    check.args([
        "clippy",
        "--manifest-path",
        "fuzz/Cargo.toml",
        "--target-dir",
        "target",
        "--",
        "-D",
        "warnings",
    ]);
    run(check)
}

/// Runs the workspace's tests, echoing their output, and ends with one
/// summary line of all passed and failed tests.
fn test(root: &Path) -> Result<()> {
    let mut cmd = cargo(root);
    cmd.args(["test", "--workspace", "--all-targets", "--no-fail-fast"])
        .stdout(Stdio::piped());
    eprintln!("$ {cmd:?}");
    let mut child = cmd.spawn().context("start cargo test")?;
    let stdout = child.stdout.take().context("capture cargo test output")?;
    let (mut passed, mut failed) = (0u64, 0u64);
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("read cargo test output")?;
        writeln!(out, "{line}")?;
        if let Some((p, f)) = parse_result_line(&line) {
            passed += p;
            failed += f;
        }
    }
    let status = child.wait().context("wait for cargo test")?;
    // Doc tests run separately: --all-targets skips them.
    drop(out);
    let mut doc = cargo(root);
    doc.args(["test", "--workspace", "--doc"]);
    let doc_ok = run(doc).is_ok();
    println!("tests: {passed} passed, {failed} failed");
    if !status.success() || failed > 0 || !doc_ok {
        bail!("tests failed");
    }
    if passed == 0 {
        bail!("no tests ran");
    }
    Ok(())
}

/// Reads `test result: ok. 12 passed; 0 failed; ...` into (12, 0).
fn parse_result_line(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let mut passed = None;
    let mut failed = None;
    for part in rest.split([';', '.']) {
        let mut words = part.split_whitespace();
        if let (Some(n), Some(what)) = (words.next(), words.next()) {
            match (n.parse::<u64>(), what) {
                (Ok(n), "passed") => passed = Some(n),
                (Ok(n), "failed") => failed = Some(n),
                _ => {}
            }
        }
    }
    Some((passed?, failed?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_parsed() {
        assert_eq!(
            parse_result_line(
                "test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s"
            ),
            Some((12, 0))
        );
        assert_eq!(
            parse_result_line("test result: FAILED. 3 passed; 2 failed; 0 ignored"),
            Some((3, 2))
        );
        assert_eq!(parse_result_line("running 3 tests"), None);
    }
}
