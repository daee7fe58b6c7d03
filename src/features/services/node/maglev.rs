//! Maglev consistent hashing (Eisenbud et al., NSDI 2016): a Service's lookup table of
//! `M` slots (a prime), each naming a backend, filled from every backend's own
//! permutation of the slots in turn. The datapath picks `table[hash(5-tuple) % M]` for
//! a connection's first packet. When a backend goes, only the slots it held change
//! hands (about 1/N of them), so the other backends keep their connections' new
//! packets too; kept connections never look again (their entry names the backend).
//!
//! A fresh table ([`table`]) depends only on the backends (the hashes are fixed
//! FNV-1a, not the process's random SipHash). A change of backends is applied to the
//! table written before ([`rebalance`]): plain Maglev moves about 12% of the slots
//! when 1 of 10 backends goes at this table size (measured: 0.1255 on average at
//! M = 1,021, 0.105 only at M = 16,381, 16 times the memory); keeping every slot
//! whose backend stays and refilling only the freed ones (and, when a backend comes,
//! the surplus of the others) moves the removed backend's share and no more, with
//! the shares still even to a slot.

/// Slots of a Service's table: a prime well above the backend count (Cilium's
/// smallest is 251, its default 16,381). 1,021 keeps 10,000 Services at 40 MiB and
/// the share a backend's departure moves within a percent of the ideal 1/N for up to
/// ~100 backends.
pub const TABLE_SIZE: u32 = juneau_common::svc::MAGLEV_SLOTS;

fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A final mix: FNV's low bits are weak for short keys.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The table for `backends` (each named by stable bytes: its address and port), of
/// `m` slots (`m` prime, > 1): each slot holds an index into `backends`. Empty when
/// there are no backends.
pub fn table(backends: &[impl AsRef<[u8]>], m: u32) -> Vec<u32> {
    fill(backends, vec![FREE; m as usize])
}

const FREE: u32 = u32::MAX;

/// Fills the free slots of `out` from every backend's permutation in turn, each
/// backend taking slots while it holds fewer than its share (`m / n`; `m % n` of them
/// one more).
fn fill(backends: &[impl AsRef<[u8]>], mut out: Vec<u32>) -> Vec<u32> {
    let n = backends.len();
    let m = out.len() as u64;
    if n == 0 || m < 2 {
        return Vec::new();
    }
    let (offset, skip): (Vec<u64>, Vec<u64>) = backends
        .iter()
        .map(|b| {
            let b = b.as_ref();
            (
                fnv1a(0x6d61_676c, b) % m,
                fnv1a(0x736b_6970, b) % (m - 1) + 1,
            )
        })
        .unzip();
    let base = m / n as u64;
    let extra = m % n as u64;
    let mut count = vec![0u64; n];
    for s in out.iter().filter(|s| **s != FREE) {
        count[*s as usize] += 1;
    }
    let mut free = out.iter().filter(|s| **s == FREE).count() as u64;
    let mut big = count.iter().filter(|c| **c > base).count() as u64;
    let mut next = vec![0u64; n];
    while free > 0 {
        for i in 0..n {
            if free == 0 {
                break;
            }
            if !(count[i] < base || (count[i] == base && big < extra)) {
                continue;
            }
            // Backend i's next preferred slot that is still free.
            let mut slot = (offset[i] + next[i] * skip[i]) % m;
            while out[slot as usize] != FREE {
                next[i] += 1;
                slot = (offset[i] + next[i] * skip[i]) % m;
            }
            out[slot as usize] = i as u32;
            next[i] += 1;
            if count[i] == base {
                big += 1;
            }
            count[i] += 1;
            free -= 1;
        }
    }
    out
}

/// The table for `backends` from `prev`, the table written for `prev_backends`: every
/// slot whose backend stays keeps it; the slots of backends that went, and what a
/// backend holds beyond its share when others came, are filled by [`table`]'s rule.
pub fn rebalance<T: AsRef<[u8]> + PartialEq>(
    prev: &[u32],
    prev_backends: &[T],
    backends: &[T],
    m: u32,
) -> Vec<u32> {
    let n = backends.len();
    if n == 0 || prev.len() != m as usize || prev_backends.is_empty() {
        return table(backends, m);
    }
    let now: Vec<Option<u32>> = prev_backends
        .iter()
        .map(|b| backends.iter().position(|x| x == b).map(|i| i as u32))
        .collect();
    let mut out: Vec<u32> = prev
        .iter()
        .map(|s| now.get(*s as usize).copied().flatten().unwrap_or(FREE))
        .collect();
    // At most one slot over the share each, and only `m % n` of them one over: the
    // surplus goes, taken from the highest slots.
    let (base, extra) = (m as usize / n, m as usize % n);
    let mut count = vec![0usize; n];
    for s in out.iter().filter(|s| **s != FREE) {
        count[*s as usize] += 1;
    }
    let mut over_allowed = extra;
    for (i, held) in count.iter().enumerate() {
        let keep = if *held > base && over_allowed > 0 {
            over_allowed -= 1;
            base + 1
        } else {
            base
        };
        let mut surplus = held.saturating_sub(keep);
        for s in out.iter_mut().rev() {
            if surplus == 0 {
                break;
            }
            if *s == i as u32 {
                *s = FREE;
                surplus -= 1;
            }
        }
    }
    fill(backends, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| [[10, 1, (i >> 8) as u8, i as u8], [0, 80, 0, 0]].concat())
            .collect()
    }

    #[test]
    fn svc_03_every_slot_names_a_backend_and_the_shares_are_even() {
        for n in [1, 2, 3, 10, 100] {
            let t = table(&names(n), TABLE_SIZE);
            assert_eq!(t.len(), TABLE_SIZE as usize);
            let mut share = vec![0u32; n];
            for s in &t {
                share[*s as usize] += 1;
            }
            let (lo, hi) = (*share.iter().min().unwrap(), *share.iter().max().unwrap());
            // Maglev's round-robin fill: shares differ by at most one slot.
            assert!(hi - lo <= 1, "{n} backends: shares {lo}..{hi}");
        }
        assert!(table(&names(0), TABLE_SIZE).is_empty());
    }

    #[test]
    fn svc_03_a_removed_backend_moves_little_more_than_its_own_slots() {
        let before = names(10);
        let t0 = table(&before, TABLE_SIZE);
        let gone = 3usize;
        let after: Vec<Vec<u8>> = before
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, b)| b.clone())
            .collect();
        let t1 = rebalance(&t0, &before, &after, TABLE_SIZE);
        let moved = t0
            .iter()
            .zip(&t1)
            .filter(|(a, b)| before[**a as usize] != after[**b as usize])
            .count() as f64
            / TABLE_SIZE as f64;
        // Ideal 0.1 (the removed backend's slots); the goal of maglev_churn is 0.11.
        assert!(moved <= 0.11, "moved {moved}");
        assert!(moved >= 0.09, "moved {moved}: its own slots must move");
        assert_even(&t1, 9);
        // A backend that comes takes its share from the others, no more.
        let t2 = rebalance(&t1, &after, &before, TABLE_SIZE);
        let moved = t1
            .iter()
            .zip(&t2)
            .filter(|(a, b)| after[**a as usize] != before[**b as usize])
            .count() as f64
            / TABLE_SIZE as f64;
        assert!(moved <= 0.11, "moved {moved} when a backend came");
        assert_even(&t2, 10);
        // Plain Maglev (a table from scratch) moves more at this size.
        let fresh = table(&after, TABLE_SIZE);
        let plain = t0
            .iter()
            .zip(&fresh)
            .filter(|(a, b)| before[**a as usize] != after[**b as usize])
            .count() as f64
            / TABLE_SIZE as f64;
        assert!(plain > moved, "plain {plain}");
    }

    fn assert_even(t: &[u32], n: usize) {
        let mut share = vec![0u32; n];
        for s in t {
            share[*s as usize] += 1;
        }
        let (lo, hi) = (*share.iter().min().unwrap(), *share.iter().max().unwrap());
        assert!(hi - lo <= 1, "shares {lo}..{hi}");
    }

    #[test]
    fn svc_03_the_table_is_the_same_on_every_node() {
        // Every Node computes a Service's table by itself, so it must not depend on the
        // process (a random seed, std's SipHash keys, the platform's word size). A second
        // call in the same process agrees whatever the seed: these figures are pinned
        // instead. They come from an independent implementation of `fill` (Python,
        // written from this file's rule), which also gives bench/results.json's
        // maglev_churn figures (0.1000000000000002 kept, 0.12616552399608236 afresh) to
        // the last digit.
        let t = table(&names(7), TABLE_SIZE);
        assert_eq!(
            &t[..16],
            &[4, 4, 0, 0, 1, 6, 3, 1, 6, 0, 5, 6, 6, 2, 1, 3],
            "the first slots"
        );
        let mut share = [0u32; 7];
        for s in &t {
            share[*s as usize] += 1;
        }
        // 1,021 = 7 x 145 + 6: the last backend of the round-robin is the one short.
        assert_eq!(share, [146, 146, 146, 146, 146, 146, 145]);
        let digest = t
            .iter()
            .fold(0u64, |h, s| h.wrapping_mul(31).wrapping_add(u64::from(*s)));
        assert_eq!(digest, 0xa335_c6df_f48e_470a, "the whole table");
    }

    #[test]
    fn svc_03_a_backend_that_goes_or_comes_moves_only_the_slots_it_must() {
        // Slot by slot, not a share with slack (the test above allows 1% of other
        // moves): when a backend goes, every slot of a backend that stays keeps it; when
        // it comes back, a slot keeps its backend or goes to the newcomer.
        let before = names(10);
        let gone = 3usize;
        let after: Vec<Vec<u8>> = before
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, b)| b.clone())
            .collect();
        let t0 = table(&before, TABLE_SIZE);
        let t1 = rebalance(&t0, &before, &after, TABLE_SIZE);
        for (slot, (a, b)) in t0.iter().zip(&t1).enumerate() {
            if *a as usize != gone {
                assert_eq!(
                    after[*b as usize], before[*a as usize],
                    "slot {slot} moved though its backend stays"
                );
            }
        }
        let t2 = rebalance(&t1, &after, &before, TABLE_SIZE);
        let mut came = 0;
        for (slot, (a, b)) in t1.iter().zip(&t2).enumerate() {
            if *b as usize == gone {
                came += 1;
            } else {
                assert_eq!(
                    before[*b as usize], after[*a as usize],
                    "slot {slot} moved between backends that stayed"
                );
            }
        }
        // Its share (1,021 / 10), taken from the others.
        assert!((102..=103).contains(&came), "the newcomer took {came}");
    }
}
