//! Raw frames in and out of an interface with AF_PACKET sockets opened inside the
//! interface's namespace.
use std::{
    ffi::CString,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::Duration,
};

use crate::Netns;

const ETH_P_ALL: u16 = 0x0003;

fn packet_socket(ns: &Netns, ifname: &str) -> (OwnedFd, i32) {
    let ifname = ifname.to_owned();
    ns.run(move || {
        // SAFETY: plain socket calls on a descriptor we own.
        unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                (ETH_P_ALL).to_be() as i32,
            );
            assert!(
                fd >= 0,
                "AF_PACKET socket: {}",
                std::io::Error::last_os_error()
            );
            let fd = OwnedFd::from_raw_fd(fd);
            let c = CString::new(ifname.clone()).unwrap();
            let ifindex = libc::if_nametoindex(c.as_ptr()) as i32;
            assert!(ifindex > 0, "no interface {ifname}");
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (ETH_P_ALL).to_be();
            sll.sll_ifindex = ifindex;
            let rc = libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            // The kernel keeps 802.1Q tags out of the frame (skb metadata); ask for them
            // so that a capture shows the frame as it was on the wire, as libpcap does.
            let on: i32 = 1;
            let rc = libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_AUXDATA,
                &on as *const i32 as *const libc::c_void,
                4,
            );
            assert_eq!(rc, 0, "PACKET_AUXDATA: {}", std::io::Error::last_os_error());
            (fd, ifindex)
        }
    })
}

/// Sends one raw frame out of `ifname` in `ns`, exactly as given.
pub fn inject(ns: &Netns, ifname: &str, frame: &[u8]) {
    if let Err(e) = try_inject(ns, ifname, frame) {
        panic!("send: {e}");
    }
}

/// [`inject`], returning the kernel's refusal (a frame above the MTU: EMSGSIZE).
pub fn try_inject(ns: &Netns, ifname: &str, frame: &[u8]) -> std::io::Result<()> {
    let (fd, _) = packet_socket(ns, ifname);
    // SAFETY: sending a buffer we own on a bound packet socket.
    let n = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    assert_eq!(n as usize, frame.len(), "a short send");
    Ok(())
}

/// A packet socket bound to one interface, kept open for many frames: opening and
/// closing one per frame costs the kernel a grace period each (milliseconds), which a
/// loop of thousands of frames cannot afford.
pub struct Injector(OwnedFd);

impl Injector {
    pub fn open(ns: &Netns, ifname: &str) -> Self {
        Self(packet_socket(ns, ifname).0)
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: sending a buffer we own on a bound packet socket.
        let n = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Everything an interface receives from the moment it is opened.
pub struct Capture {
    pub name: String,
    fd: OwnedFd,
}

impl Capture {
    /// Starts capturing on `ifname` in `ns`; `name` names it in goldens and diffs.
    pub fn start(ns: &Netns, ifname: &str, name: &str) -> Capture {
        let (fd, _) = packet_socket(ns, ifname);
        Capture {
            name: name.to_owned(),
            fd,
        }
    }

    /// Frames received so far (outgoing ones are left out), waiting until the interface
    /// has been quiet for `quiet`.
    pub fn received(&self, quiet: Duration) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on our own descriptor.
            let ready = unsafe { libc::poll(&mut pfd, 1, quiet.as_millis() as i32) };
            if ready <= 0 {
                return frames;
            }
            let (n, sll, vlan) = recv_frame(&self.fd, &mut buf);
            let mut frame = buf[..n].to_vec();
            if let Some((tpid, tci)) = vlan {
                let mut tag = tpid.to_be_bytes().to_vec();
                tag.extend_from_slice(&tci.to_be_bytes());
                frame.splice(12..12, tag);
            }
            if sll.sll_pkttype != libc::PACKET_OUTGOING {
                frames.push(frame);
            }
        }
    }
}

const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// One frame with its link-layer address and, when the kernel held it aside, its VLAN
/// tag (TPID, TCI).
fn recv_frame(fd: &OwnedFd, buf: &mut [u8]) -> (usize, libc::sockaddr_ll, Option<(u16, u16)>) {
    // SAFETY: recvmsg into buffers we own, cmsgs walked with the libc macros.
    unsafe {
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u8; 256];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        let n = libc::recvmsg(fd.as_raw_fd(), &mut msg, 0);
        assert!(n >= 0, "recvmsg: {}", std::io::Error::last_os_error());
        let mut vlan = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_PACKET && (*cmsg).cmsg_type == libc::PACKET_AUXDATA {
                let aux =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::tpacket_auxdata);
                if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                    let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        aux.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    vlan = Some((tpid, aux.tp_vlan_tci));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        (n as usize, sll, vlan)
    }
}
