//! A Pod NIC is born without IPv6: the Pod namespace's default `disable_ipv6` is switched
//! on around the veth's creation (the kernel copies a namespace's defaults into each new
//! interface) and then put back as it was, so the Pod's own later interfaces keep its
//! setting.
//!
//! Why not the interface's own `disable_ipv6` afterwards: that write takes RTNL by
//! `rtnl_trylock` and is restarted from user space until it gets it; with a hundred ADDs
//! at once the spinning was a sixth of the Node's CPU. Writing the default takes no
//! RTNL since Linux 6.9 ("ipv6: addrconf_disable_ipv6() optimizations"); on an older
//! kernel it spins the same way, twice, so there [`Ipv6Off::supported`] is false and the
//! caller writes the interface's own sysctl as before.
//!
//! Two ADDs into one Pod namespace at the same moment could see each other's temporary
//! value; a runtime sets up one sandbox's network once, and its NICs one after another.
use std::{fs::File, io::ErrorKind, os::unix::fs::FileExt, sync::OnceLock};

use super::NetlinkError;

const DEFAULT: &str = "/proc/sys/net/ipv6/conf/default/disable_ipv6";

fn sysctl_err(source: std::io::Error) -> NetlinkError {
    NetlinkError::Sysctl {
        path: DEFAULT.into(),
        source,
    }
}

/// The default switched on until [`Ipv6Off::restore`] (or, on an error path, the drop).
pub struct Ipv6Off<'a> {
    file: &'a File,
    /// The value to put back; `None` when it was on already.
    previous: Option<Vec<u8>>,
}

impl<'a> Ipv6Off<'a> {
    /// Opens the default of the calling thread's namespace (call from a thread inside the
    /// Pod's: a /proc/sys/net file stays bound to the namespace it was opened in); `None`
    /// when the kernel has no IPv6 or writing the default would take RTNL.
    pub fn open() -> Result<Option<File>, NetlinkError> {
        if !Self::supported() {
            return Ok(None);
        }
        match File::options().read(true).write(true).open(DEFAULT) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(sysctl_err(source)),
        }
    }

    /// True on Linux 6.9 and later (read once: the kernel does not change under us).
    pub fn supported() -> bool {
        static SUPPORTED: OnceLock<bool> = OnceLock::new();
        *SUPPORTED.get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|r| at_least_6_9(&r))
        })
    }

    pub fn begin(file: &'a File) -> Result<Ipv6Off<'a>, NetlinkError> {
        let mut buf = [0u8; 16];
        let n = file.read_at(&mut buf, 0).map_err(sysctl_err)?;
        let previous = buf[..n].trim_ascii().to_vec();
        if previous == b"1" {
            return Ok(Ipv6Off {
                file,
                previous: None,
            });
        }
        file.write_at(b"1", 0).map_err(sysctl_err)?;
        Ok(Ipv6Off {
            file,
            previous: Some(previous),
        })
    }

    /// Puts the previous value back; a failure fails the NIC (the Pod's later interfaces
    /// would silently have no IPv6).
    pub fn restore(mut self) -> Result<(), NetlinkError> {
        self.put_back()
    }

    /// Writes the previous value back once (a no-op afterwards, or when it was on).
    fn put_back(&mut self) -> Result<(), NetlinkError> {
        match self.previous.take() {
            Some(previous) => self
                .file
                .write_at(&previous, 0)
                .map(drop)
                .map_err(sysctl_err),
            None => Ok(()),
        }
    }
}

impl Drop for Ipv6Off<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.put_back() {
            tracing::warn!(%error, "cannot restore the Pod namespace's default disable_ipv6");
        }
    }
}

/// `release` as `uname -r` gives it ("6.18.0-1-cloud-amd64").
fn at_least_6_9(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_from_6_9_write_the_default_without_rtnl() {
        for (release, want) in [
            ("6.18.0-1-cloud-amd64", true),
            ("6.9.0", true),
            ("6.10.0", true),
            ("7.0.1", true),
            ("6.8.12-arch1", false),
            ("6.1.0-28-amd64", false),
            ("5.15.0-91-generic", false),
            ("", false),
        ] {
            assert_eq!(at_least_6_9(release), want, "{release}");
        }
    }
}
