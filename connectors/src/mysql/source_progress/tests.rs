use capstan_core::position::{Flavor, Gtid};

use super::*;

fn g(domain: u32, seq: u64) -> MariadbGtid {
    MariadbGtid::new(domain, 2, seq)
}

fn t(domain: u32, seq: u64) -> TransactionGtid {
    TransactionGtid::Mariadb(g(domain, seq))
}

fn maria(text: &str) -> Position {
    Position::parse(Flavor::Mariadb, text).unwrap()
}

/// Reads `seqs` of domain 0 as ordinary transactions; returns the ones handed out.
fn read(p: &mut SourceProgress, seqs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    seqs.into_iter()
        .filter(|s| p.admit(&t(0, *s), &[], true))
        .collect()
}

#[test]
fn held_checkpoint_stops_each_domain_before_its_earliest_pending_prepare() {
    let processed: MariadbGtidPosition = "0-2-50,1-2-9,7-2-4".parse().unwrap();
    let mut holds = BTreeMap::new();
    assert_eq!(held_checkpoint(&processed, &holds), processed);
    // domain 0: prepares at 20 (entry before it 19) and 30 (29); domain 1: 5 (4)
    holds.insert((0, 30), Some(g(0, 29)));
    holds.insert((0, 20), Some(g(0, 19)));
    holds.insert((1, 5), Some(g(1, 4)));
    let cp = held_checkpoint(&processed, &holds);
    assert_eq!(cp.to_string(), "0-2-19,1-2-4,7-2-4");
    for p in [g(0, 20), g(0, 30), g(1, 5)] {
        assert!(!cp.contains(&p) && processed.contains(&p));
    }
    // the earliest resolves: the domain moves up to the next pending one
    holds.remove(&(0, 20));
    assert_eq!(
        held_checkpoint(&processed, &holds).to_string(),
        "0-2-29,1-2-4,7-2-4"
    );
    // a prepare first in its domain since the start: the domain is left out
    holds.insert((7, 3), None);
    assert_eq!(
        held_checkpoint(&processed, &holds).to_string(),
        "0-2-29,1-2-4"
    );
    holds.clear();
    assert_eq!(held_checkpoint(&processed, &holds), processed);
}

/// One source: a prepare at 20 holds the checkpoint at 19 while 21 and 22 are handed out;
/// the pair it would persist is (19, 22).
fn first_session() -> SourceProgress {
    let mut p = SourceProgress::new(maria("0-2-19"), maria("0-2-19"));
    p.hold(vec![t(0, 20)]);
    assert_eq!(read(&mut p, [21, 22]), vec![21, 22]);
    assert_eq!(
        (p.position(), p.processed()),
        (&maria("0-2-19"), &maria("0-2-22"))
    );
    p
}

#[test]
fn a_resume_skips_the_window_and_still_holds_and_delivers_the_pending_prepare() {
    let first = first_session();
    let mut second = SourceProgress::new(first.position().clone(), first.processed().clone());
    // the dump from 19 replays the prepare (pooled again, held: it may be pending) …
    second.hold(vec![t(0, 20)]);
    // … and the two transactions after it, skipped; the checkpoint stays before the prepare
    assert_eq!(read(&mut second, [21, 22]), Vec::<u64>::new());
    assert_eq!(second.position(), &maria("0-2-19"));
    assert_eq!(second.processed(), &maria("0-2-22"));
    // past the window: new transactions are handed out, still held by the prepare
    assert_eq!(read(&mut second, [23]), vec![23]);
    assert_eq!(second.position(), &maria("0-2-19"));
    // a third source from this pair is exactly like the second
    let mut third = SourceProgress::new(second.position().clone(), second.processed().clone());
    third.hold(vec![t(0, 20)]);
    assert_eq!(read(&mut third, [21, 22, 23]), Vec::<u64>::new());
    assert_eq!(third.position(), &maria("0-2-19"));
    // the XA COMMIT (24, covering the prepare 20) is handed out once, and releases the hold
    for p in [&mut second, &mut third] {
        assert!(p.admit(&t(0, 24), &[t(0, 20)], true));
        assert_eq!(
            (p.position(), p.processed()),
            (&maria("0-2-24"), &maria("0-2-24"))
        );
    }
}

#[test]
fn a_resolution_inside_the_window_releases_its_prepare() {
    // prepare 20 pending; prepare 21 resolved at 23 (handed out); processed 24
    let mut first = SourceProgress::new(maria("0-2-19"), maria("0-2-19"));
    first.hold(vec![t(0, 20)]);
    first.hold(vec![t(0, 21)]);
    assert!(first.admit(&t(0, 22), &[], true));
    assert!(first.admit(&t(0, 23), &[t(0, 21)], true));
    assert!(first.admit(&t(0, 24), &[], true));
    assert_eq!(first.position(), &maria("0-2-19"));
    let mut second = SourceProgress::new(first.position().clone(), first.processed().clone());
    second.hold(vec![t(0, 20)]);
    second.hold(vec![t(0, 21)]);
    assert!(!second.admit(&t(0, 22), &[], true));
    assert!(!second.admit(&t(0, 23), &[t(0, 21)], true));
    assert!(!second.admit(&t(0, 24), &[], true));
    // only the pending prepare holds: its commit moves the checkpoint to the end
    assert_eq!(second.position(), &maria("0-2-19"));
    assert!(second.admit(&t(0, 25), &[t(0, 20)], true));
    assert_eq!(second.position(), &maria("0-2-25"));
    assert_eq!(second.position(), second.processed());
}

#[test]
fn a_resume_moves_the_checkpoint_through_a_window_without_holds() {
    // other domains are not held: a window in domain 0 does not hold domain 1
    let mut p = SourceProgress::new(maria("0-2-19,1-2-5"), maria("0-2-22,1-2-5"));
    p.hold(vec![t(0, 20)]);
    assert!(!p.admit(&t(0, 21), &[], true));
    assert!(p.admit(&t(1, 6), &[], true));
    assert_eq!(p.position(), &maria("0-2-19,1-2-6"));
    // the prepare was resolved (rolled back) inside the window: skipped, released
    assert!(!p.admit(&t(0, 22), &[t(0, 20)], true));
    assert_eq!(p.position(), &maria("0-2-22,1-2-6"));
    assert_eq!(p.position(), p.processed());
    // a statement that does not end its transaction moves nothing
    assert!(p.admit(&t(0, 23), &[], false));
    assert_eq!(p.position(), &maria("0-2-22,1-2-6"));
}

#[test]
fn a_checkpoint_alone_hands_the_window_out_again() {
    // the start without a processed position (at-least-once): what the first source handed
    // out after the prepare comes again, and the prepare is still held
    let first = first_session();
    let mut again = SourceProgress::new(first.position().clone(), first.position().clone());
    again.hold(vec![t(0, 20)]);
    assert_eq!(read(&mut again, [21, 22]), vec![21, 22]);
    assert_eq!(again.position(), &maria("0-2-19"));
}

#[test]
fn mysql_position_and_processed_are_one() {
    let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    let set = |text: &str| Position::parse(Flavor::Mysql, &format!("{uuid}:{text}")).unwrap();
    let my = |n: u64| TransactionGtid::Mysql(format!("{uuid}:{n}").parse::<Gtid>().unwrap());
    let mut p = SourceProgress::new(set("1-5"), set("1-5"));
    p.hold(vec![my(6)]);
    assert!(!p.admit(&my(5), &[], true));
    assert!(p.admit(&my(7), &[], true));
    assert_eq!(
        (p.position(), p.processed()),
        (&set("1-5:7"), &set("1-5:7"))
    );
    assert!(p.admit(&my(8), &[my(6)], true));
    assert_eq!((p.position(), p.processed()), (&set("1-8"), &set("1-8")));
}
