//! Sorted lists of inclusive `u64` intervals: the arithmetic under [`super::GtidSet`].
//!
//! Invariant of every list this module returns: intervals are sorted, each has
//! `start <= end`, and no two overlap or touch (`prev.end + 1 < next.start`). With that
//! invariant a list is the unique representation of its set of numbers, so equality of lists is
//! equality of sets and the subset test only has to find one covering interval.

/// One inclusive interval `start..=end`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Interval {
    /// First member.
    pub start: u64,
    /// Last member (inclusive).
    pub end: u64,
}

impl Interval {
    /// An interval; callers guarantee `start <= end`.
    pub fn new(start: u64, end: u64) -> Self {
        debug_assert!(start <= end);
        Interval { start, end }
    }

    /// Number of members.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Never true: an interval holds at least one member. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Inserts `iv` into a normalised list, keeping it normalised.
pub fn insert(list: &mut Vec<Interval>, iv: Interval) {
    // first interval that could merge with iv: its end + 1 >= iv.start
    let lo = list.partition_point(|x| x.end.saturating_add(1) < iv.start);
    // first interval entirely after iv: its start > iv.end + 1
    let hi = list.partition_point(|x| x.start <= iv.end.saturating_add(1));
    if lo == hi {
        list.insert(lo, iv);
        return;
    }
    let start = iv.start.min(list[lo].start);
    let end = iv.end.max(list[hi - 1].end);
    list.splice(lo..hi, std::iter::once(Interval::new(start, end)));
}

/// True when `n` is a member.
pub fn contains(list: &[Interval], n: u64) -> bool {
    let i = list.partition_point(|x| x.end < n);
    i < list.len() && list[i].start <= n
}

/// The union of two normalised lists.
pub fn union(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out: Vec<Interval> = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = if j >= b.len() || (i < a.len() && a[i].start <= b[j].start) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        match out.last_mut() {
            Some(last) if last.end.saturating_add(1) >= next.start => {
                last.end = last.end.max(next.end);
            }
            _ => out.push(next),
        }
    }
    out
}

/// Members of `a` that are not members of `b`.
pub fn difference(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut j = 0;
    for iv in a {
        let mut start = iv.start;
        // skip b intervals that end before this one starts
        while j < b.len() && b[j].end < start {
            j += 1;
        }
        let mut k = j;
        let mut done = false;
        while k < b.len() && b[k].start <= iv.end {
            if b[k].start > start {
                out.push(Interval::new(start, b[k].start - 1));
            }
            if b[k].end >= iv.end {
                done = true;
                break;
            }
            start = b[k].end + 1;
            k += 1;
        }
        if !done {
            out.push(Interval::new(start, iv.end));
        }
    }
    out
}

/// Members of both lists.
pub fn intersection(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].start.max(b[j].start);
        let end = a[i].end.min(b[j].end);
        if start <= end {
            out.push(Interval::new(start, end));
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// True when every member of `a` is a member of `b`.
pub fn is_subset(a: &[Interval], b: &[Interval]) -> bool {
    // b is normalised, so each interval of a must lie inside a single interval of b
    let mut j = 0;
    for iv in a {
        while j < b.len() && b[j].end < iv.start {
            j += 1;
        }
        if j >= b.len() || b[j].start > iv.start || b[j].end < iv.end {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[(u64, u64)]) -> Vec<Interval> {
        v.iter().map(|&(a, b)| Interval::new(a, b)).collect()
    }

    #[test]
    fn insert_merges_touching_and_overlapping() {
        let mut v = Vec::new();
        insert(&mut v, Interval::new(5, 7));
        insert(&mut v, Interval::new(1, 2));
        assert_eq!(v, l(&[(1, 2), (5, 7)]));
        insert(&mut v, Interval::new(3, 4));
        assert_eq!(v, l(&[(1, 7)]));
        insert(&mut v, Interval::new(10, 10));
        insert(&mut v, Interval::new(6, 12));
        assert_eq!(v, l(&[(1, 12)]));
    }

    #[test]
    fn difference_splits() {
        assert_eq!(
            difference(&l(&[(1, 10)]), &l(&[(3, 4), (7, 7)])),
            l(&[(1, 2), (5, 6), (8, 10)])
        );
        assert_eq!(difference(&l(&[(1, 10)]), &l(&[(1, 10)])), l(&[]));
        assert_eq!(
            difference(&l(&[(5, 10)]), &l(&[(1, 6), (9, 20)])),
            l(&[(7, 8)])
        );
    }

    #[test]
    fn subset_needs_one_covering_interval() {
        assert!(is_subset(&l(&[(2, 3), (8, 9)]), &l(&[(1, 5), (7, 10)])));
        assert!(!is_subset(&l(&[(4, 8)]), &l(&[(1, 5), (7, 10)])));
        assert!(is_subset(&l(&[]), &l(&[])));
        assert!(!is_subset(&l(&[(1, 1)]), &l(&[])));
    }

    #[test]
    fn extremes_do_not_overflow() {
        let mut v = l(&[(u64::MAX - 1, u64::MAX)]);
        insert(&mut v, Interval::new(1, u64::MAX - 2));
        assert_eq!(v, l(&[(1, u64::MAX)]));
        assert!(contains(&v, u64::MAX));
    }
}
