//! Uniquely named network namespaces that delete themselves.
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace made for one test, removed by name on drop.
pub struct Netns {
    name: String,
    path: PathBuf,
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
    /// Creates `jn-<role>-<pid>-<n>` with loopback up and IPv6 off by default, so that
    /// no interface made in it emits router solicitations or MLD reports on its own.
    pub fn new(role: &str) -> Netns {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("jn-{role}-{}-{n}", std::process::id());
        // `ip netns exec` bind-mounts /etc/netns/<name>/* over /etc: give every namespace
        // its own resolv.conf, so a client inside (udhcpc's script, say) can never
        // rewrite the machine's.
        let etc = Path::new("/etc/netns").join(&name);
        std::fs::create_dir_all(&etc).expect("create /etc/netns/<name>");
        std::fs::write(etc.join("resolv.conf"), "").expect("write per-namespace resolv.conf");
        run(Command::new("ip").args(["netns", "add", &name])).expect("ip netns add");
        let ns = Netns {
            path: juneau::netns::named(&name),
            name,
        };
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1");
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1");
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// `ip -n <ns> ARGS`, panicking with the error when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args)).unwrap()
    }

    /// Runs a program inside the namespace and returns its stdout; panics on failure.
    pub fn exec(&self, argv: &[&str]) -> String {
        self.try_exec(argv).unwrap()
    }

    pub fn try_exec(&self, argv: &[&str]) -> Result<String, String> {
        run(Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv))
    }

    pub fn sysctl(&self, key: &str, value: &str) {
        self.exec(&["sysctl", "-qw", &format!("{key}={value}")]);
    }

    /// Runs `f` on a thread inside this namespace.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        juneau::netns::run_in(&self.path, f).expect("enter test namespace")
    }

    /// An interface counter (`tx_packets`, `rx_packets`, ...), read through netlink
    /// statistics of `ip -s`, so it is the namespace's own view.
    pub fn counter(&self, ifname: &str, counter: &str) -> u64 {
        let path = format!("/sys/class/net/{ifname}/statistics/{counter}");
        // /sys shows the namespace of the mount, so read it from a remounted view.
        self.exec(&["cat", &path]).trim().parse().expect("counter")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting by name only: never anything this test did not create.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&self.name));
    }
}
