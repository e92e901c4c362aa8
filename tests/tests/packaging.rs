//! The deployment files pass their checkers: `deploy/check-packaging.sh` runs shellcheck on the
//! release script, hadolint and capstan's own checks on the container file, the Compose
//! Specification's schema on the compose file, Kubernetes' schemas on the manifests,
//! `systemd-analyze verify` and `security` on the unit, and checks every worker.toml in them
//! against `WorkerConfig`'s keys. It installs its Python checkers into a venv in the cache on
//! the first run; with CI=true a checker that cannot be installed is a failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

#[test]
fn deployment_files_pass_their_checkers() {
    let root = capstan_tests::manifest_dir().join("..");
    let out = Command::new(root.join("deploy/check-packaging.sh"))
        .current_dir(&root)
        .output()
        .expect("run deploy/check-packaging.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "deploy/check-packaging.sh failed ({}):\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    print!("{stdout}");
}
