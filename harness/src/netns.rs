//! Uniquely named network namespaces that delete themselves, with the helpers tests use.
use std::{
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace made for one test, removed by name on drop (also when the test
/// panics).
pub struct Netns {
    inner: juneau::netns::Owned,
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Creates `jn-<role>-<pid>-<n>`: loopback up, IPv6 off by default, its own
    /// resolv.conf.
    pub fn new(role: &str) -> Netns {
        Netns {
            inner: juneau::netns::Owned::create(&Self::unique(role))
                .expect("create test namespace"),
        }
    }

    /// A unique name prefix for namespaces made elsewhere (`jn-<role>-<pid>-<n>`).
    pub fn unique(role: &str) -> String {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        format!("jn-{role}-{}-{n}", std::process::id())
    }

    pub fn name(&self) -> &str {
        self.inner.name()
    }

    pub fn path(&self) -> &std::path::Path {
        self.inner.path()
    }

    /// `ip -n <ns> ARGS`, panicking with the error when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        run(Command::new("ip").arg("-n").arg(self.name()).args(args)).unwrap()
    }

    /// A veth pair: `name` here, `peer_name` in `peer`, both with `mtu` when given
    /// (left down: callers set addresses and bring them up).
    pub fn add_veth(&self, name: &str, peer: &Netns, peer_name: &str, mtu: Option<u32>) {
        let mtu = mtu.map(|m| m.to_string());
        let mut args = vec!["link", "add", name];
        if let Some(m) = &mtu {
            args.extend(["mtu", m]);
        }
        args.extend(["type", "veth", "peer", "name", peer_name]);
        if let Some(m) = &mtu {
            args.extend(["mtu", m]);
        }
        args.extend(["netns", peer.name()]);
        self.ip(&args);
    }

    /// Runs a program inside the namespace and returns its stdout; panics on failure.
    pub fn exec(&self, argv: &[&str]) -> String {
        self.try_exec(argv).unwrap()
    }

    pub fn try_exec(&self, argv: &[&str]) -> Result<String, String> {
        self.inner.exec(argv)
    }

    /// `ping -c count` (0.2 s apart) from here that must get every reply: `ping` exits
    /// 0 on partial loss, so the summary is read. `extra` goes before the target (`-6`).
    pub fn ping_all(&self, extra: &[&str], target: &str, count: u32) {
        let count_s = count.to_string();
        let mut argv = vec!["ping", "-c", &count_s, "-i", "0.2", "-W", "2"];
        argv.extend_from_slice(extra);
        argv.push(target);
        let out = self.try_exec(&argv).unwrap_or_else(|e| e);
        let want = format!("{count} packets transmitted, {count} received");
        assert!(
            out.contains(&want),
            "ping {target}: not every reply came back:\n{out}"
        );
    }

    pub fn sysctl(&self, key: &str, value: &str) {
        self.exec(&["sysctl", "-qw", &format!("{key}={value}")]);
    }

    /// Runs `f` on a thread inside this namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        juneau::netns::run_in(self.path(), f).expect("enter test namespace")
    }

    /// An interface counter (`tx_packets`, ...) as the namespace sees it (`ip netns
    /// exec` remounts /sys).
    pub fn counter(&self, ifname: &str, counter: &str) -> u64 {
        let path = format!("/sys/class/net/{ifname}/statistics/{counter}");
        self.exec(&["cat", &path]).trim().parse().expect("counter")
    }
}

impl From<juneau::netns::Owned> for Netns {
    fn from(inner: juneau::netns::Owned) -> Self {
        Netns { inner }
    }
}
