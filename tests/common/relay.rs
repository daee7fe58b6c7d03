//! A TCP relay from a Node namespace's loopback to the API server on the test's own
//! loopback. A socket belongs to the namespace it was made in: the listener is made on
//! a thread inside the Node's namespace, each upstream connection on a thread of the
//! test's, and bytes are copied between them. So a daemon in the Node reaches the API
//! at `https://127.0.0.1:<port>` (a name the serving certificate has) without a route
//! or an interface between the namespaces.
#![allow(dead_code)]
use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
};

/// Starts relaying; returns the port listening on the Node namespace's 127.0.0.1. The
/// relay lives as long as the test process (its threads hold only loopback sockets).
pub fn relay_into(netns: &Path, upstream: SocketAddr) -> u16 {
    relay_at(netns, "127.0.0.1:0".parse().unwrap(), upstream)
}

/// [`relay_into`] listening at `at` in the namespace (a Node's own address: the API
/// server as a hostNetwork backend of the `kubernetes` Service); returns the port.
pub fn relay_at(netns: &Path, at: SocketAddr, upstream: SocketAddr) -> u16 {
    let listener = juneau::netns::run_in(netns, || TcpListener::bind(at))
        .expect("enter the Node namespace")
        .expect("listen in the Node's namespace");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(down) = conn else { continue };
            std::thread::spawn(move || {
                let Ok(up) = TcpStream::connect(upstream) else {
                    return;
                };
                let (mut up_r, mut down_w) = (up.try_clone().unwrap(), down.try_clone().unwrap());
                let back = std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_r, &mut down_w);
                    let _ = down_w.shutdown(std::net::Shutdown::Write);
                });
                let (mut down_r, mut up_w) = (down, up);
                let _ = std::io::copy(&mut down_r, &mut up_w);
                let _ = up_w.shutdown(std::net::Shutdown::Write);
                let _ = back.join();
            });
        }
    });
    port
}

/// An HTTP CONNECT proxy on the unix socket `socket` that dials every target from
/// Node namespace `netns`: the API server's `cluster` egress (its
/// `--egress-selector-config-file`), as konnectivity serves a cluster whose control
/// plane has no route to its Nodes. The API server reaches webhooks and kubelets
/// served in the Nodes through it, while the test's own namespace keeps no route into
/// them. Lives as long as the test process.
pub fn connect_proxy(socket: &Path, netns: &Path) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind the proxy socket");
    let netns = netns.to_owned();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(down) = conn else { continue };
            let netns = netns.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(down.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                // "CONNECT host:port HTTP/1.1", then headers up to an empty line.
                let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                loop {
                    let mut h = String::new();
                    match reader.read_line(&mut h) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if h.trim().is_empty() => break,
                        Ok(_) => {}
                    }
                }
                let mut down_w = down.try_clone().unwrap();
                let dialed = target.parse::<SocketAddr>().ok().and_then(|addr| {
                    juneau::netns::run_in(&netns, || {
                        TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))
                    })
                    .ok()?
                    .ok()
                });
                let Some(up) = dialed else {
                    let _ = down_w.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                if down_w
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .is_err()
                {
                    return;
                }
                let mut up_r = up.try_clone().unwrap();
                let back = std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_r, &mut down_w);
                    let _ = down_w.shutdown(std::net::Shutdown::Write);
                });
                // What the reader buffered past the headers goes first (a client may
                // send its TLS hello before it reads the 200).
                let mut up_w = up;
                let _ = up_w.write_all(reader.buffer());
                let mut rest = reader.into_inner();
                let _ = std::io::copy(&mut rest, &mut up_w);
                let _ = up_w.shutdown(std::net::Shutdown::Write);
                let _ = back.join();
            });
        }
    });
}
