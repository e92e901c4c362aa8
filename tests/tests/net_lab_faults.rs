//! The partition harness itself (`capstan_tests::net_lab`), checked with plain TCP before any
//! worker relies on it: each fault drops exactly what it says, a forwarded service stays
//! reachable through every fault, healing restores every path, and a lab dropped by a panic
//! leaves no namespace behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_tests::net_lab::{NetLab, RAFT_PORT};

/// Worker `id`'s stand-in: `socat` answering "hi from <id>" on its Raft port.
fn answer(lab: &NetLab, id: u64) -> Child {
    let child = Command::new("ip")
        .args(["netns", "exec", lab.namespace(id), "socat"])
        .arg(format!(
            "TCP-LISTEN:{RAFT_PORT},bind={},reuseaddr,fork",
            lab.addr(id)
        ))
        .arg(format!("SYSTEM:echo hi from {id}"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("socat");
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// True when worker `from`'s namespace gets worker `to`'s answer within a second.
fn reaches(lab: &NetLab, from: u64, to: u64) -> bool {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            lab.namespace(from),
            "socat",
            "-T",
            "1",
            "-",
        ])
        .arg(format!(
            "TCP:{}:{RAFT_PORT},connect-timeout=1",
            lab.addr(to)
        ))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("socat");
    String::from_utf8_lossy(&out.stdout).trim() == format!("hi from {to}")
}

/// Every ordered pair of workers that reach each other.
fn paths(lab: &NetLab) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for from in 1..=3 {
        for to in (1..=3).filter(|&t| t != from) {
            if reaches(lab, from, to) {
                out.push((from, to));
            }
        }
    }
    out
}

/// True when worker `id`'s namespace reaches the service on 127.0.0.1:`port` (which answers
/// "service").
fn reaches_service(lab: &NetLab, id: u64, port: u16) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", lab.namespace(id), "socat", "-T", "1", "-"])
        .arg(format!("TCP:127.0.0.1:{port},connect-timeout=1"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("socat");
    String::from_utf8_lossy(&out.stdout).trim() == "service"
}

#[test]
fn each_fault_drops_exactly_what_it_says_and_a_heal_restores_every_path() {
    // a service of the test's namespace, on 127.0.0.1 only, like the dev servers
    let service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = service.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in service.incoming().flatten() {
            let _ = s.write_all(b"service\n");
            let _ = s.read(&mut [0; 1]);
        }
    });
    let Some(mut lab) = NetLab::create(&[1, 2, 3], &[port]) else {
        return;
    };
    let mut answers: Vec<Child> = (1..=3).map(|id| answer(&lab, id)).collect();
    let all = vec![(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)];
    assert_eq!(paths(&lab), all);

    // one way: 1's connections to 2 are dropped, 2's to 1 work (answers included)
    lab.cut_one_way(1, 2);
    assert_eq!(paths(&lab), vec![(1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]);
    lab.heal_all();
    assert_eq!(paths(&lab), all);

    lab.cut(1, 2);
    assert_eq!(paths(&lab), vec![(1, 3), (2, 3), (3, 1), (3, 2)]);
    lab.heal_all();

    lab.isolate(1);
    assert_eq!(paths(&lab), vec![(2, 3), (3, 2)]);
    // the isolated worker still reaches the service, and the test still reaches it
    assert!(reaches_service(&lab, 1, port));
    let api = std::net::SocketAddr::from((lab.addr(1), RAFT_PORT));
    assert!(std::net::TcpStream::connect_timeout(&api, Duration::from_secs(1)).is_ok());
    lab.heal_all();
    assert_eq!(paths(&lab), all);
    assert!((1..=3).all(|id| reaches_service(&lab, id, port)));

    for a in &mut answers {
        let _ = a.kill();
        let _ = a.wait();
    }
}

#[test]
fn a_lab_dropped_by_a_panic_leaves_no_namespace_or_bridge() {
    let created = std::panic::catch_unwind(|| {
        let lab = NetLab::create(&[1, 2], &[])?;
        let names = (lab.namespace(1).to_string(), lab.gateway());
        std::panic::panic_any(names);
    });
    let names = match created {
        Ok(None) => return, // skipped
        Ok(Some(())) => unreachable!(),
        Err(payload) => *payload
            .downcast::<(String, std::net::Ipv4Addr)>()
            .expect("the lab's names"),
    };
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&namespaces.stdout).contains(&names.0),
        "namespace {} left behind",
        names.0
    );
    let addrs = Command::new("ip")
        .args(["-4", "-o", "addr"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&addrs.stdout).contains(&names.1.to_string()),
        "bridge address {} left behind",
        names.1
    );
}
