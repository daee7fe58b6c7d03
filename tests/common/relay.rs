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
