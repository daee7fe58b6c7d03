//! The BGP speaker of this Node as a Node feature (BGP-01, BGP-02). A cluster without
//! BGPPeers runs nothing. With some, each sync renders BIRD's file from the intent
//! (`desired`) and, when it changed, has BIRD check it, puts it in place and
//! reconfigures over the control socket: a changed advertisement changes static
//! routes only, so no session restarts.
//!
//! BIRD is started through the daemon's supervisor, untied and in its own process
//! group, with `-R` (graceful restart): a daemon that dies or restarts withdraws
//! nothing, and the next daemon finds it answering on its socket and adopts it (it
//! starts one only when none answers). A SIGKILLed BIRD is started again at the next
//! sync; the upstream keeps its routes meanwhile (graceful restart, measured in
//! `docs/bgp-bed/frr.md`).
use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{
    bird::{
        ctl::{self, Configured},
        render::render,
    },
    desired::intent,
};
use crate::{
    cluster::World,
    node::feature::{FeatureError, LoggedOnce, NodeFeature, NodeView},
    supervisor::{ProcessSpec, Ready, Supervisor},
};

/// Debian's `bird2`.
pub const BIRD: &str = "/usr/sbin/bird";
/// The supervisor's name for the speaker.
const SPEAKER: &str = "bgp-speaker";

/// Who runs the speaker (`--bgp-speaker`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpeakerMode {
    /// The daemon starts it through its supervisor (standalone, a plain host).
    #[default]
    Supervised,
    /// Another container runs it (`juneau speaker`, the DaemonSet): the daemon only
    /// writes its file and reconfigures it.
    Container,
    /// No speaker: BGPPeers are not served on this Node.
    Off,
}

/// `juneau speaker --dir D` (the DaemonSet's speaker container): waits for the
/// daemon's first file, then becomes BIRD (`exec`, so the container's process is the
/// speaker itself, and its restart is BIRD's graceful restart, `-R`).
pub fn exec_speaker(dir: &Path) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let d = SpeakerDir(dir.to_owned());
    while !d.conf().exists() {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::process::Command::new(BIRD)
        .args(["-f", "-R", "-c"])
        .arg(d.conf())
        .arg("-s")
        .arg(d.ctl())
        .arg("-P")
        .arg(d.pid())
        .exec()
}

/// The files of one Node's speaker, in `<the daemon's run folder>/bgp/`.
#[derive(Clone, Debug)]
pub struct SpeakerDir(pub PathBuf);

impl SpeakerDir {
    pub fn conf(&self) -> PathBuf {
        self.0.join("bird.conf")
    }
    fn staged(&self) -> PathBuf {
        self.0.join("bird.conf.new")
    }
    pub fn ctl(&self) -> PathBuf {
        self.0.join("bird.ctl")
    }
    pub fn pid(&self) -> PathBuf {
        self.0.join("bird.pid")
    }
    fn log(&self) -> PathBuf {
        self.0.join("bird.log")
    }
}

/// Asks the speaker of `dir` to withdraw everything and leave (`down`): how a
/// standalone run's teardown ends what outlives its daemons. One that does not answer
/// but whose pid file names a live `bird` gets SIGTERM. True when one was there.
pub fn take_down(dir: &Path) -> bool {
    let dir = SpeakerDir(dir.to_owned());
    if ctl::connect(&dir.ctl()).and_then(|mut c| c.down()).is_ok() {
        return true;
    }
    let Some(pid) = std::fs::read_to_string(dir.pid())
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
    else {
        return false;
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != "bird" {
        return false;
    }
    // SAFETY: a plain kill(2) of the pid our own speaker wrote.
    unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
}

pub struct Bgp {
    mode: SpeakerMode,
    node_ip: Ipv4Addr,
    dir: SpeakerDir,
    /// The daemon's supervisor, once it starts its features.
    processes: Mutex<Option<Arc<Supervisor>>>,
    /// The file the running speaker took last (`None`: none yet, or unknown).
    applied: Mutex<Option<String>>,
    logged: LoggedOnce,
}

impl Bgp {
    pub fn new(mode: SpeakerMode, node_ip: Ipv4Addr, dir: PathBuf) -> Self {
        Self {
            mode,
            node_ip,
            dir: SpeakerDir(dir),
            processes: Mutex::new(None),
            applied: Mutex::new(None),
            logged: LoggedOnce::default(),
        }
    }

    fn answering(&self) -> bool {
        ctl::connect(&self.dir.ctl()).is_ok()
    }

    /// Starts BIRD on the file in place, through the supervisor.
    fn start_speaker(&self) -> Result<(), FeatureError> {
        let processes = self.processes.lock().expect("bgp lock").clone();
        let Some(processes) = processes else {
            return Err(FeatureError::Host {
                what: "the BGP speaker",
                cause: "the daemon has not started its features yet".into(),
            });
        };
        let d = &self.dir;
        processes.add(ProcessSpec {
            name: SPEAKER.into(),
            what: "BGP speaker (bird)".into(),
            program: BIRD.into(),
            args: [
                "-f".into(),
                "-R".into(),
                "-c".into(),
                d.conf().display().to_string(),
                "-s".into(),
                d.ctl().display().to_string(),
                "-P".into(),
                d.pid().display().to_string(),
            ]
            .into(),
            netns: None,
            log: d.log(),
            ready: Ready::PidFile(d.pid()),
            stop_signal: libc::SIGTERM,
            tied: false,
        });
        processes
            .start(SPEAKER, Duration::from_secs(10))
            .map(|_| ())
            .map_err(|source| FeatureError::Process {
                what: "the BGP speaker",
                source,
            })
    }

    /// Has the running speaker check `conf`, then take it.
    fn reconfigure(&self, conf: &str) -> Result<(), FeatureError> {
        let host = |cause: String| FeatureError::Host {
            what: "the BGP speaker's configuration",
            cause,
        };
        let d = &self.dir;
        std::fs::write(d.staged(), conf).map_err(|e| host(e.to_string()))?;
        let mut c = ctl::connect(&d.ctl()).map_err(|e| host(e.to_string()))?;
        let check = c
            .configure_check(&d.staged())
            .map_err(|e| host(e.to_string()))?;
        if let Configured::Refused(why) = check.configured() {
            // The running file stays: a refused one never replaces it.
            return Err(host(format!("bird refused it: {why}")));
        }
        std::fs::rename(d.staged(), d.conf()).map_err(|e| host(e.to_string()))?;
        match c.configure().map_err(|e| host(e.to_string()))?.configured() {
            Configured::Refused(why) => Err(host(format!("bird refused it: {why}"))),
            Configured::Done | Configured::InProgress | Configured::Queued => Ok(()),
        }
    }
}

impl NodeFeature for Bgp {
    fn name(&self) -> &'static str {
        "bgp"
    }

    fn start(&self, processes: &Arc<Supervisor>, _node: &str) -> Result<(), FeatureError> {
        *self.processes.lock().expect("bgp lock") = Some(processes.clone());
        Ok(())
    }

    fn sync(&self, world: &World, node: &NodeView<'_>) -> Result<usize, FeatureError> {
        if self.mode == SpeakerMode::Off {
            return Ok(0);
        }
        let (intent, left_out) = intent(world, node.name, self.node_ip);
        for line in left_out {
            self.logged.warn(line, "BGP: left out");
        }
        let answering = self.answering();
        if intent.peers.is_empty() && !answering {
            return Ok(0);
        }
        let conf = render(&intent).map_err(|e| FeatureError::Host {
            what: "the BGP speaker's configuration",
            cause: e.to_string(),
        })?;
        let mut applied = self.applied.lock().expect("bgp lock");
        if answering && applied.as_deref() == Some(conf.as_str()) {
            return Ok(0);
        }
        std::fs::create_dir_all(&self.dir.0).map_err(|e| FeatureError::Host {
            what: "the BGP speaker's folder",
            cause: e.to_string(),
        })?;
        if answering {
            // Adopted, or ours: reconfigured in place (an unchanged file changes
            // nothing on the wire).
            self.reconfigure(&conf)?;
        } else {
            std::fs::write(self.dir.conf(), &conf).map_err(|e| FeatureError::Host {
                what: "the BGP speaker's configuration",
                cause: e.to_string(),
            })?;
            if self.mode == SpeakerMode::Supervised {
                self.start_speaker()?;
            }
            // Container: the speaker container starts on this file.
        }
        *applied = Some(conf);
        Ok(1)
    }

    /// The speaker outlives the daemon: its routes stay announced while the daemon
    /// restarts, and the next daemon adopts it.
    fn stop(&self, _processes: &Supervisor) {}
}
