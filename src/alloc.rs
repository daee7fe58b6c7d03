//! One allocator for every number and address the cluster hands out: the Pods' NIC
//! addresses, VNIs, rule-set ids, ElasticIP and per-Node NAT addresses, the Nodes'
//! Service source addresses and ClusterIPs.
//!
//! A [`Pool`] is a list of ranges in the order they are preferred, some values
//! reserved (never handed out, never granted: a gateway, a network address), and the
//! values held. The controller's allocators are pure: each pass builds its pools from
//! what the stored statuses hold, keeps what is still valid ([`Pool::claim`]), then
//! hands out the lowest ([`Pool::first_free`]) or highest ([`Pool::last_free`]) free
//! value. What differs on purpose lives elsewhere: the datapath's ids, which rest
//! before reuse (`node::dataplane::ids`), and the NAT ports, claimed in the kernel.
use std::{collections::BTreeSet, net::Ipv4Addr};

use ipnet::Ipv4Net;

/// A value a pool hands out: a number or an IPv4 address.
pub trait Slot: Copy + Ord {
    fn to_u64(self) -> u64;
    fn from_u64(v: u64) -> Self;
}

impl Slot for u32 {
    fn to_u64(self) -> u64 {
        self.into()
    }
    fn from_u64(v: u64) -> Self {
        v as u32
    }
}

impl Slot for Ipv4Addr {
    fn to_u64(self) -> u64 {
        u32::from(self).into()
    }
    fn from_u64(v: u64) -> Self {
        Ipv4Addr::from(v as u32)
    }
}

/// Why a value cannot be granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("it is in none of the pool's ranges")]
    Outside,
    #[error("it is reserved")]
    Reserved,
    #[error("it is held already")]
    Held,
}

#[derive(Clone, Debug)]
pub struct Pool<T: Slot> {
    /// Inclusive, in the order they are preferred.
    ranges: Vec<(u64, u64)>,
    reserved: BTreeSet<T>,
    /// Someone's by name (a request not yet granted): never a first fit, still
    /// grantable to the one who asks for it.
    avoided: BTreeSet<T>,
    held: BTreeSet<T>,
    /// (range, value): no free value lies before it in range order. `first_free` moves
    /// it on, `release` pulls it back, so a pass over n values costs O(n), not O(n^2).
    cursor: (usize, u64),
}

impl<T: Slot> Pool<T> {
    /// A pool of `ranges` (inclusive, preferred in this order; an empty one, low above
    /// high, is skipped).
    pub fn new(ranges: impl IntoIterator<Item = (T, T)>) -> Self {
        let ranges: Vec<(u64, u64)> = ranges
            .into_iter()
            .map(|(lo, hi)| (lo.to_u64(), hi.to_u64()))
            .filter(|(lo, hi)| lo <= hi)
            .collect();
        let cursor = (0, ranges.first().map_or(0, |r| r.0));
        Self {
            ranges,
            reserved: BTreeSet::new(),
            avoided: BTreeSet::new(),
            held: BTreeSet::new(),
            cursor,
        }
    }

    /// Never handed out, never granted.
    pub fn reserve(&mut self, v: T) -> &mut Self {
        self.reserved.insert(v);
        self
    }

    /// Asked for by name by someone not yet granted it: no first fit takes it.
    pub fn avoid(&mut self, v: T) -> &mut Self {
        self.avoided.insert(v);
        self
    }

    /// Taken, whatever the pool says of it (what others hold). True when it was not.
    pub fn hold(&mut self, v: T) -> bool {
        self.held.insert(v)
    }

    /// Whether `v` lies in one of the ranges.
    pub fn contains(&self, v: T) -> bool {
        let v = v.to_u64();
        self.ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&v))
    }

    pub fn is_held(&self, v: T) -> bool {
        self.held.contains(&v)
    }

    /// Whether `v` could be granted now.
    pub fn check(&self, v: T) -> Result<(), Refused> {
        if !self.contains(v) {
            Err(Refused::Outside)
        } else if self.reserved.contains(&v) {
            Err(Refused::Reserved)
        } else if self.held.contains(&v) {
            Err(Refused::Held)
        } else {
            Ok(())
        }
    }

    /// Grants `v` (a value kept from before, or asked for by name) when it can be.
    pub fn claim(&mut self, v: T) -> Result<T, Refused> {
        self.check(v)?;
        self.held.insert(v);
        Ok(v)
    }

    /// Gives `v` back. True when it was held.
    pub fn release(&mut self, v: T) -> bool {
        if !self.held.remove(&v) {
            return false;
        }
        let x = v.to_u64();
        if let Some(i) = self
            .ranges
            .iter()
            .position(|(lo, hi)| (*lo..=*hi).contains(&x))
            && (i, x) < self.cursor
        {
            self.cursor = (i, x);
        }
        true
    }

    fn free(&self, v: T) -> bool {
        !self.reserved.contains(&v) && !self.avoided.contains(&v) && !self.held.contains(&v)
    }

    /// The lowest free value in range order, held.
    pub fn first_free(&mut self) -> Option<T> {
        let (start, from) = self.cursor;
        for (i, &(lo, hi)) in self.ranges.iter().enumerate().skip(start) {
            let lo = if i == start { from.max(lo) } else { lo };
            if let Some(v) = (lo..=hi).map(T::from_u64).find(|v| self.free(*v)) {
                self.cursor = (i, v.to_u64());
                self.held.insert(v);
                return Some(v);
            }
        }
        self.cursor = (self.ranges.len(), 0);
        None
    }

    /// The highest free value in reverse range order, held (the Nodes' addresses fill a
    /// Subnet from its top while the Pods' fill it from its bottom).
    pub fn last_free(&mut self) -> Option<T> {
        let v = self
            .ranges
            .iter()
            .rev()
            .find_map(|&(lo, hi)| (lo..=hi).rev().map(T::from_u64).find(|v| self.free(*v)))?;
        self.held.insert(v);
        Some(v)
    }
}

impl Pool<Ipv4Addr> {
    /// The host addresses of `net`: without its network and broadcast addresses, but
    /// for a /31 or /32, whose every address is a host.
    pub fn hosts(net: Ipv4Net) -> Self {
        let (lo, hi) = (net.network(), net.broadcast());
        if net.prefix_len() >= 31 {
            return Self::new([(lo, hi)]);
        }
        Self::new([(
            Ipv4Addr::from(u32::from(lo) + 1),
            Ipv4Addr::from(u32::from(hi) - 1),
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn first_fit_skips_reserved_avoided_and_held_and_a_release_is_found_again() {
        let mut p = Pool::hosts("10.0.0.0/29".parse().unwrap());
        p.reserve(ip("10.0.0.1")).avoid(ip("10.0.0.3"));
        p.hold(ip("10.0.0.2"));
        assert_eq!(p.first_free(), Some(ip("10.0.0.4")));
        assert_eq!(p.first_free(), Some(ip("10.0.0.5")));
        assert_eq!(p.first_free(), Some(ip("10.0.0.6")));
        assert_eq!(p.first_free(), None, "the broadcast address is no host");
        assert!(p.release(ip("10.0.0.5")));
        assert!(!p.release(ip("10.0.0.5")), "released once");
        assert_eq!(p.first_free(), Some(ip("10.0.0.5")));
        // The avoided one is granted to the one who asks for it.
        assert_eq!(p.claim(ip("10.0.0.3")), Ok(ip("10.0.0.3")));
    }

    #[test]
    fn claims_are_checked_against_the_ranges_the_reserved_and_the_held() {
        let mut p = Pool::new([(2u32, 9)]);
        p.reserve(5);
        assert_eq!(p.claim(1), Err(Refused::Outside));
        assert_eq!(p.claim(5), Err(Refused::Reserved));
        assert_eq!(p.claim(7), Ok(7));
        assert_eq!(p.claim(7), Err(Refused::Held));
        assert_eq!(p.check(8), Ok(()));
        assert!(!p.is_held(8), "a check grants nothing");
        // A claim does not move the first fit.
        assert_eq!(p.first_free(), Some(2));
    }

    #[test]
    fn ranges_are_taken_in_their_order_and_last_free_runs_backwards() {
        let mut p = Pool::new([
            (ip("192.0.2.10"), ip("192.0.2.11")),
            (ip("192.0.2.1"), ip("192.0.2.1")),
        ]);
        assert_eq!(p.first_free(), Some(ip("192.0.2.10")));
        assert_eq!(p.last_free(), Some(ip("192.0.2.1")), "the last range's top");
        assert_eq!(p.last_free(), Some(ip("192.0.2.11")));
        assert_eq!(p.first_free(), None);
        assert!(p.contains(ip("192.0.2.1")) && !p.contains(ip("192.0.2.2")));
    }

    #[test]
    fn a_pass_over_a_large_range_stays_first_fit() {
        let mut p = Pool::hosts("10.1.0.0/16".parse().unwrap());
        let got: Vec<Ipv4Addr> = (0..1000).map_while(|_| p.first_free()).collect();
        assert_eq!(got.len(), 1000);
        assert_eq!(got[0], ip("10.1.0.1"));
        assert_eq!(got[999], ip("10.1.3.232"));
        assert!(got.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn tiny_prefixes_are_all_hosts_and_empty_ranges_hold_nothing() {
        let mut p = Pool::hosts("10.0.0.4/31".parse().unwrap());
        assert_eq!(p.first_free(), Some(ip("10.0.0.4")));
        assert_eq!(p.first_free(), Some(ip("10.0.0.5")));
        let mut empty = Pool::new([(9u32, 3)]);
        assert_eq!(empty.first_free(), None);
        assert_eq!(empty.claim(5), Err(Refused::Outside));
    }
}
