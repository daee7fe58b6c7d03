//! Connect-reset loops for the connection-rate benchmarks (`tcp_crr_*`): a listener
//! that accepts and closes at once, and a client that connects and closes by RST
//! (`SO_LINGER` 0), so that TIME_WAIT never bounds the rate. Both run in a namespace
//! given by its path, on plain threads (never a tokio worker: entering a namespace
//! is a `setns` of the calling thread).
use std::{
    net::{Ipv4Addr, SocketAddr, TcpStream},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// A listener on `addr:port` in the namespace at `ns`, accepting and closing until
/// `stop`. A deep accept queue and a blocking accept with a short timeout: a queue
/// that overflows drops SYNs, which a client sends again only a second later, and the
/// rate would measure that instead.
pub fn server(ns: &Path, addr: Ipv4Addr, port: u16, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let path: PathBuf = ns.to_owned();
    // Bound before the thread returns, so that a client started next finds it.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        juneau::netns::run_in(&path, || {
            let fd = listen(addr, port);
            ready_tx.send(()).expect("the caller waits");
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: accept on our listening socket; the result is closed at once.
                let c = unsafe {
                    libc::accept(fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut())
                };
                if c >= 0 {
                    // SAFETY: a descriptor accept just gave us.
                    unsafe { libc::close(c) };
                }
            }
        })
        .expect("enter the server's namespace");
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the listener is bound");
    handle
}

fn listen(addr: Ipv4Addr, port: u16) -> OwnedFd {
    let fd = bound(addr, port).unwrap_or_else(|e| panic!("bind {addr}:{port}: {e}"));
    set_option(
        &fd,
        libc::SO_RCVTIMEO,
        &libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        },
    );
    // SAFETY: listen on a bound socket we own.
    assert_eq!(unsafe { libc::listen(fd.as_raw_fd(), 4096) }, 0, "listen");
    fd
}

fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    }
}

const SOCKADDR_LEN: u32 = std::mem::size_of::<libc::sockaddr_in>() as u32;

/// A socket-level option of `fd`.
fn set_option<T>(fd: &impl AsRawFd, name: libc::c_int, value: &T) {
    // SAFETY: a valid socket, and a value of the size given.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        );
    }
}

/// A TCP socket with `SO_REUSEADDR`, bound to `ip:port`.
fn bound(ip: Ipv4Addr, port: u16) -> std::io::Result<OwnedFd> {
    // SAFETY: a plain socket call; the descriptor is owned from here on.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket");
        OwnedFd::from_raw_fd(fd)
    };
    set_option(&fd, libc::SO_REUSEADDR, &(1 as libc::c_int));
    let sa = sockaddr(ip, port);
    // SAFETY: an address of the right size, alive for the call.
    if unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            SOCKADDR_LEN,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// What a client loop did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rate {
    /// Connections made a second.
    pub per_s: f64,
    /// Connections that failed (refused or timed out after 1 s).
    pub failed: u64,
}

/// Connections a second from the namespace at `ns` for `secs`, each to the next of
/// `to` in turn: connect, then close by RST.
pub fn client(ns: &Path, to: &[SocketAddr], secs: f64) -> Rate {
    juneau::netns::run_in(ns, || {
        let start = Instant::now();
        let (mut n, mut failed) = (0u64, 0u64);
        while start.elapsed().as_secs_f64() < secs {
            let dst = &to[(n + failed) as usize % to.len()];
            let c = match TcpStream::connect_timeout(dst, Duration::from_secs(1)) {
                Ok(c) => c,
                Err(_) => {
                    failed += 1;
                    continue;
                }
            };
            reset_on_close(&c);
            drop(c);
            n += 1;
        }
        Rate {
            per_s: n as f64 / start.elapsed().as_secs_f64(),
            failed,
        }
    })
    .expect("enter the client's namespace")
}

/// `n` connections from the namespace at `ns`, each to the next of `to` in turn,
/// connect then close by RST; how many of them failed.
pub fn client_n(ns: &Path, to: &[SocketAddr], n: u64) -> u64 {
    juneau::netns::run_in(ns, || {
        let mut failed = 0;
        for i in 0..n {
            match TcpStream::connect_timeout(&to[i as usize % to.len()], Duration::from_secs(1)) {
                Ok(c) => reset_on_close(&c),
                Err(_) => failed += 1,
            }
        }
        failed
    })
    .expect("enter the client's namespace")
}

/// [`client_n`] with each connection's source port given: `first_port + i` for the
/// `i`-th, so that what the connections leave behind (connection-table entries) can
/// be told from any other's by port. The ports lie above the kernel's ephemeral range
/// (32768-60999 by default), so no other connection of the namespace has them.
pub fn client_n_from(ns: &Path, to: &[SocketAddr], n: u64, first_port: u16) -> u64 {
    juneau::netns::run_in(ns, || {
        let mut failed = 0;
        for i in 0..n {
            let SocketAddr::V4(dst) = to[i as usize % to.len()] else {
                panic!("IPv4 only");
            };
            if !connect_from(first_port + i as u16, dst) {
                failed += 1;
            }
        }
        failed
    })
    .expect("enter the client's namespace")
}

/// One connection from source port `port` to `dst`, closed by RST; whether it was made.
fn connect_from(port: u16, dst: std::net::SocketAddrV4) -> bool {
    let Ok(fd) = bound(Ipv4Addr::UNSPECIFIED, port) else {
        return false;
    };
    let to = sockaddr(*dst.ip(), dst.port());
    // SAFETY: an address of the right size, alive for the call.
    if unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&to as *const libc::sockaddr_in).cast(),
            SOCKADDR_LEN,
        )
    } != 0
    {
        return false;
    }
    reset_on_close(&TcpStream::from(fd));
    true
}

/// `SO_LINGER` 0: the close sends an RST and leaves no TIME_WAIT.
fn reset_on_close(c: &TcpStream) {
    set_option(
        c,
        libc::SO_LINGER,
        &libc::linger {
            l_onoff: 1,
            l_linger: 0,
        },
    );
}
