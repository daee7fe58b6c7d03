//! ★ Gratuitous ARP when this Node starts answering for an ElasticIP (EIP-11 goes
//! further than the reference, which sends none): neighbours that cached another
//! Node's MAC for the address move to this one at once instead of when their entry
//! ages out. Each round is a request and a reply about the address, rounds 1.1 s apart:
//! Linux ignores a second update of an entry within its 1 s lock time (MetalLB #172),
//! and some hosts heed only one of the two kinds.
use std::{net::Ipv4Addr, os::fd::AsRawFd, time::Duration};

/// Time between two rounds: past a neighbour entry's lock time.
pub const ROUND_GAP: Duration = Duration::from_millis(1100);
/// Rounds by default (`--garp-rounds`).
pub const DEFAULT_ROUNDS: u32 = 3;

/// The request and the reply that announce `ip` at `mac`, to everyone.
pub fn frames(mac: [u8; 6], ip: Ipv4Addr) -> [Vec<u8>; 2] {
    let one = |op: u8, target_mac: [u8; 6]| {
        let mut f = Vec::with_capacity(42);
        f.extend_from_slice(&[0xff; 6]);
        f.extend_from_slice(&mac);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, op]);
        f.extend_from_slice(&mac);
        f.extend_from_slice(&ip.octets());
        f.extend_from_slice(&target_mac);
        f.extend_from_slice(&ip.octets());
        f
    };
    [one(1, [0; 6]), one(2, [0xff; 6])]
}

#[derive(Debug, thiserror::Error)]
pub enum GarpError {
    #[error("cannot open a packet socket: {0}")]
    Socket(std::io::Error),
    #[error("cannot send on ifindex {ifindex}: {source}")]
    Send {
        ifindex: u32,
        source: std::io::Error,
    },
}

/// Sends one frame out of `ifindex` (the calling thread's namespace).
fn send(fd: &std::os::fd::OwnedFd, ifindex: u32, frame: &[u8]) -> Result<(), GarpError> {
    // SAFETY: a zeroed sockaddr_ll is valid; the fields set below are the ones the
    // kernel reads for a send on a raw packet socket.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_ifindex = ifindex as i32;
    addr.sll_halen = 6;
    addr.sll_addr[..6].copy_from_slice(&[0xff; 6]);
    // SAFETY: the buffer and the address outlive the call; sizes are theirs.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if sent < 0 {
        return Err(GarpError::Send {
            ifindex,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `rounds` rounds for every address, on a thread of its own (the caller's namespace:
/// threads keep the process's). Errors are logged: a lost announcement costs only the
/// time until neighbours ask again.
pub fn announce(ifindex: u32, mac: [u8; 6], addresses: Vec<Ipv4Addr>, rounds: u32) {
    if rounds == 0 || addresses.is_empty() {
        return;
    }
    std::thread::spawn(move || {
        // SAFETY: plain socket call; the descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if raw < 0 {
            tracing::warn!(error = %GarpError::Socket(std::io::Error::last_os_error()), "no gratuitous ARP");
            return;
        }
        // SAFETY: a descriptor we just opened and own alone.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        for round in 0..rounds {
            if round > 0 {
                std::thread::sleep(ROUND_GAP);
            }
            for ip in &addresses {
                for f in frames(mac, *ip) {
                    if let Err(e) = send(&fd, ifindex, &f) {
                        tracing::warn!(error = %e, %ip, "gratuitous ARP not sent");
                    }
                }
            }
        }
        tracing::info!(addresses = ?addresses, rounds, "gratuitous ARP sent");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eip_11_a_round_is_a_broadcast_request_and_reply_about_the_address() {
        let mac = [2, 0, 0, 0x99, 0, 2];
        let [req, rep] = frames(mac, Ipv4Addr::new(10, 99, 0, 110));
        assert_eq!(req.len(), 42);
        assert_eq!(&req[0..6], &[0xff; 6]);
        assert_eq!(&req[12..14], &[0x08, 0x06]);
        assert_eq!((req[21], rep[21]), (1, 2), "op: request, then reply");
        for f in [&req, &rep] {
            assert_eq!(&f[22..28], &mac, "sender MAC");
            assert_eq!(&f[28..32], &[10, 99, 0, 110], "sender address");
            assert_eq!(&f[38..42], &[10, 99, 0, 110], "target address: the same");
        }
        assert_eq!(&rep[32..38], &[0xff; 6]);
    }
}
