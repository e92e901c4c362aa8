//! A worker whose disk fills: worker 3 keeps its RocksDB on a small tmpfs of its own and owns a
//! pipeline that streams under two writers. The tmpfs is then filled to the last byte. Its Raft
//! store can no longer write, openraft's core stops, and the worker exits saying why (instead of
//! running on as a zombie); the pipeline moves to another worker and nothing is lost, as an
//! independent consumer checks against what the writers committed. Freeing the space and
//! starting the worker again lets it rejoin and catch up.
//!
//! Needs root (it mounts the tmpfs); without it the test skips, and under CI fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan_tests::cluster::{idle_definition, Cluster};
use capstan_tests::{mysql, skip_or_fail, unique_name};
use load_common::*;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(30);
/// Big enough for a fresh worker's RocksDB, small enough to fill in a blink, and below the
/// write-ahead log's preallocation (1.1 × the 64 MiB write buffer), so no reserved space
/// hides the full disk.
const TMPFS_SIZE: &str = "40m";

/// A tmpfs mounted at a path, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }

    /// Writes zeros into a file until the file system refuses (ENOSPC); the bytes written.
    fn fill(&self) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![0u8; 64 << 10];
        let mut written = 0;
        loop {
            match f.write(&block) {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        let _ = f.flush();
        written
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_whose_disk_fills_exits_and_its_pipeline_moves_without_loss() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let schema = unique_name("diskfull");
    db.admin_conn()
        .await
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)"
        ))
        .await
        .unwrap();
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let Some(cluster) = cluster else { return };
    let cluster = Arc::new(Mutex::new(cluster));
    let blocking = |f: Box<dyn FnOnce(&mut Cluster) + Send>| {
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || f(&mut c.lock().unwrap()))
    };

    // worker 3's store moves onto its own small tmpfs
    let tmpfs: Arc<Mutex<Option<Tmpfs>>> = Arc::new(Mutex::new(None));
    let mounted = tmpfs.clone();
    blocking(Box::new(move |c| {
        c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
        c.kill9(3);
        let data = c.data_dir(3);
        let old = data.with_extension("disk");
        std::fs::rename(&data, &old).unwrap();
        let Some(fs) = Tmpfs::mount(&data) else {
            let _: Option<()> = skip_or_fail("cannot mount a tmpfs (needs root)");
            return;
        };
        copy_dir(&old, &data);
        *mounted.lock().unwrap() = Some(fs);
        c.spawn(3);
        c.wait_until(SETTLE, |c| {
            c.get(3, "/health")
                .filter(|(s, v)| *s == 200 && v["status"] == "ok")
        })
        .unwrap_or_else(|| panic!("worker 3 back on its tmpfs: {}", c.log_tail(3)));
    }))
    .await
    .unwrap();
    if tmpfs.lock().unwrap().is_none() {
        return;
    }

    // two paused pipelines go to workers 1 and 2 (fewest owned, lowest id first), so the live
    // one lands on worker 3
    let definition = json!({
        "name": "live",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": 7300 + (std::process::id() % 300),
            "flavor": "mysql"
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "df"},
        "start_position": "current"
    });
    blocking(Box::new(move |c| {
        for (name, owner) in [("idle-a", 1), ("idle-b", 2)] {
            let (s, b) = c
                .send(1, Method::POST, "/pipelines", Some(&idle_definition(name)))
                .unwrap();
            assert_eq!(s, 201, "{b}");
            c.send(1, Method::PUT, &format!("/pipelines/{name}/pause"), None)
                .unwrap();
            c.wait_until(SETTLE, |c| {
                c.pipeline_owner(1, name).filter(|(o, _, _)| *o == owner)
            })
            .unwrap_or_else(|| panic!("{name} owned by {owner}"));
        }
        let (owner, _) = c.create_streaming(1, &definition, SETTLE);
        assert_eq!(owner, 3, "the live pipeline is placed on the tmpfs worker");
    }))
    .await
    .unwrap();

    let writers = Writers::start(&db, &schema, 2);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // the disk fills: worker 3 exits saying why, and the pipeline moves
    let fs = tmpfs.clone();
    blocking(Box::new(move |c| {
        let filled = fs.lock().unwrap().as_ref().unwrap().fill();
        eprintln!("filled worker 3's disk with {filled} bytes");
        assert!(
            c.wait_exit(3, Duration::from_secs(60)),
            "worker 3 still runs on a full disk; log:\n{}",
            c.log_tail(3)
        );
        let log = c.log(3);
        assert!(
            log.contains("raft core stopped") && log.contains("raft_core_stopped"),
            "worker 3 says why it exits:\n{}",
            c.log_tail(3)
        );
        let (owner, _) = c
            .wait_until(SETTLE, |c| {
                c.pipeline_owner(1, "live")
                    .filter(|(o, _, s)| *o != 3 && s == "streaming")
                    .map(|(o, e, _)| (o, e))
            })
            .expect("the pipeline moved");
        eprintln!("the pipeline moved to worker {owner}");
    }))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (total, expected) = writers.stop().await;
    assert!(
        total > 50,
        "the writers really wrote ({total} transactions)"
    );
    let seen = read_topic_async(
        kafka.bootstrap_servers(),
        &format!("df.{schema}.t"),
        "read_uncommitted",
        events(&expected),
    )
    .await;
    assert_histories(&seen.histories, &expected);

    // with space again the worker rejoins and catches up
    let fs = tmpfs.clone();
    blocking(Box::new(move |c| {
        fs.lock().unwrap().as_ref().unwrap().free();
        c.spawn(3);
        c.wait_until(SETTLE, |c| {
            let (_, leader_view) = c.get(1, "/cluster")?;
            let (_, own_view) = c.get(3, "/cluster")?;
            let applied = leader_view["last_applied"].as_u64()?;
            (own_view["last_applied"].as_u64()? + 50 >= applied
                && own_view["leader"] == leader_view["leader"])
                .then_some(())
        })
        .unwrap_or_else(|| panic!("worker 3 did not rejoin: {}", c.log_tail(3)));
    }))
    .await
    .unwrap();
    drop(cluster);
    drop(tmpfs);
}
