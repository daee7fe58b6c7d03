//! A long TCP stream across something that happens meanwhile (a daemon's SIGKILL): the
//! receiver checks every byte, the sender paces the stream so that it lasts.
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    sync::{
        Arc,
        mpsc::{Receiver, Sender},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// Accepts one connection on `listener` (telling `accepted`, when given), reads it to
/// its end and checks it against `expected`; its length and the peer.
pub fn receive(
    listener: TcpListener,
    expected: Arc<Vec<u8>>,
    accepted: Option<Sender<()>>,
) -> JoinHandle<(usize, SocketAddr)> {
    std::thread::spawn(move || {
        let (mut conn, peer) = listener.accept().unwrap();
        if let Some(tell) = accepted {
            let _ = tell.send(());
        }
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut got = Vec::with_capacity(expected.len());
        conn.read_to_end(&mut got).unwrap();
        if let Some(at) = got.iter().zip(expected.iter()).position(|(a, b)| a != b) {
            panic!("byte {at} of the stream differs");
        }
        (got.len(), peer)
    })
}

/// Connects from the namespace at `ns` to `dst` (again until it can, for ten seconds:
/// the first SYN may meet a datapath not written yet) and sends `data` in chunks of
/// 64 KiB, one every `every`.
pub fn send(ns: PathBuf, dst: SocketAddr, data: Arc<Vec<u8>>, every: Duration) -> JoinHandle<()> {
    send_held(ns, dst, data, every, None)
}

/// [`send`], stopping halfway until `hold` says go on (when given): what happens
/// meanwhile happens in the middle of the stream, however long it takes.
pub fn send_held(
    ns: PathBuf,
    dst: SocketAddr,
    data: Arc<Vec<u8>>,
    every: Duration,
    hold: Option<Receiver<()>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut conn = loop {
            let c = juneau::netns::run_in(&ns, || {
                TcpStream::connect_timeout(&dst, Duration::from_secs(2))
            })
            .unwrap();
            match c {
                Ok(c) => break c,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("connect: {e}; again");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("no connection to {dst}: {e}"),
            }
        };
        conn.set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let start = Instant::now();
        let chunks = data.len().div_ceil(1 << 16);
        let mut paused = Duration::ZERO;
        for (i, chunk) in data.chunks(1 << 16).enumerate() {
            if i == chunks / 2
                && let Some(hold) = &hold
            {
                let at = Instant::now();
                hold.recv_timeout(Duration::from_secs(120))
                    .expect("told to go on");
                paused = at.elapsed();
            }
            conn.write_all(chunk).unwrap();
            if let Some(wait) = (every * i as u32 + paused).checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    })
}
