//! How the upstream's FRR daemons are started: the command lines as data (a
//! supervisor's `ProcessSpec` takes program and args as they are) and when each counts
//! as up.
//!
//! Every path a daemon is told of is inside the run folder `D`, and two runs never
//! share a socket: `-f` config, `-i` pid file, `-z` zebra's API socket (zebra serves
//! it, bfdd and bgpd dial it), `--vty_socket D` (vtysh finds `D/<daemon>.vty`), bfdd's
//! `--bfdctl`. Two things still land outside `D` (FRR 8.4.4, seen in the bed), which
//! cleanup removes: every daemon makes the empty folder `/var/run/frr/<N>/` (`-N`,
//! pathspace), and each makes a crash-log folder `/var/tmp/frr/<daemon>.<pid>/`
//! (compiled in, `-N` does not move it) that stays after any exit, SIGTERM included.
//! `-P 0` opens no TCP vty. `-u root -g frrvty`: `-g root` makes every daemon exit at
//! start (see [`VTY_GROUP`]); `-u frr -g frr` works too but needs `D` chowned to `frr`.
//! As root each daemon logs twice "vty_serv_un: could chown socket, Operation not
//! permitted" (an `EC` error line, harmless: the sockets stay root's, mode 0770, and
//! vtysh runs as root). The daemons run in the foreground (no `-d`): the supervisor
//! owns them, and `--log stdout` goes to its log file. bgpd's `-l` binds port 179 on
//! that address only; despite `bgpd --help` ("implies -n") it still installs routes in
//! 8.4.
use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
};

/// FRR's daemons as Debian installs them.
pub const FRR_LIBEXEC: &str = "/usr/lib/frr";

/// The group FRR's Debian package makes for vty access; see [`Run::command_line`].
pub const VTY_GROUP: &str = "frrvty";

/// The three daemons, in the order they start: zebra serves the API the others dial,
/// bfdd must run before bgpd registers its BFD sessions (through zebra).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Daemon {
    Zebra,
    Bfdd,
    Bgpd,
}

impl Daemon {
    pub const ALL: [Daemon; 3] = [Daemon::Zebra, Daemon::Bfdd, Daemon::Bgpd];

    pub fn name(self) -> &'static str {
        match self {
            Daemon::Zebra => "zebra",
            Daemon::Bfdd => "bfdd",
            Daemon::Bgpd => "bgpd",
        }
    }
}

/// Where a daemon's log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Log {
    /// `--log stdout`: the supervisor's log file gets it with whatever FRR prints
    /// before its logging is up.
    Stdout,
    /// `--log file:<path>`: FRR writes the file itself.
    File(PathBuf),
}

/// One daemon's start, as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    pub daemon: Daemon,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// What `-i` names; the readiness rule reads it.
    pub pid_file: PathBuf,
    /// What `--vty_socket` makes: `D/<daemon>.vty` (vtysh talks to it).
    pub vty_socket: PathBuf,
}

/// The run's FRR folder and what the daemons are told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// `D`: configs, pid files, sockets.
    pub dir: PathBuf,
    /// `-N`: unique per run (the run's name), a plain word.
    pub pathspace: String,
    /// bgpd's `-l`: the upstream's own address; bgpd binds port 179 on it only.
    pub listen: Ipv4Addr,
    pub log: Log,
}

impl Run {
    /// Zebra's API socket (`-z`), the same path for all three.
    pub fn zserv(&self) -> PathBuf {
        self.dir.join("zserv.api")
    }

    /// bfdd's control socket (`--bfdctl`; default `/var/run/frr/bfdd.sock`).
    pub fn bfdctl(&self) -> PathBuf {
        self.dir.join("bfdd.sock")
    }

    /// The three command lines, in start order.
    pub fn command_lines(&self) -> Vec<CommandLine> {
        Daemon::ALL.iter().map(|&d| self.command_line(d)).collect()
    }

    pub fn command_line(&self, daemon: Daemon) -> CommandLine {
        let d = daemon.name();
        let path = |p: &Path| p.display().to_string();
        let pid_file = self.dir.join(format!("{d}.pid"));
        let mut args = vec![
            "-f".into(),
            path(&self.dir.join(format!("{d}.conf"))),
            "-i".into(),
            path(&pid_file),
            "-z".into(),
            path(&self.zserv()),
            "--vty_socket".into(),
            path(&self.dir),
            "-N".into(),
            self.pathspace.clone(),
            "-u".into(),
            "root".into(),
            // FRR exits at once unless the user is in the vty group (`frrvty`,
            // compiled in) by getgrouplist(user, -g): root is not, -g frrvty puts it
            // there without touching /etc/group.
            "-g".into(),
            VTY_GROUP.into(),
            // -P 0 alone opens no TCP vty; -A keeps it off every address should a
            // later FRR read 0 differently.
            "-A".into(),
            "127.0.0.1".into(),
            "-P".into(),
            "0".into(),
            "--log".into(),
            match &self.log {
                Log::Stdout => "stdout".into(),
                Log::File(f) => format!("file:{}", f.display()),
            },
        ];
        match daemon {
            Daemon::Zebra => {}
            Daemon::Bfdd => args.extend(["--bfdctl".into(), path(&self.bfdctl())]),
            Daemon::Bgpd => args.extend(["-l".into(), self.listen.to_string()]),
        }
        CommandLine {
            daemon,
            program: Path::new(FRR_LIBEXEC).join(d),
            args,
            pid_file,
            vty_socket: self.dir.join(format!("{d}.vty")),
        }
    }
}

/// The readiness rule: the pid file names the process that was spawned.
///
/// FRR writes its pid file after its options are read and its privileges set, before
/// its event loop runs (`frr_config_fork`); a stale file from an earlier run names
/// another pid, so a leftover never counts. Measured in the bed: the pid file 24-38 ms
/// after the spawn, the vty socket within 2 ms of it. Ready is not "serving": a bgpd
/// whose `-l` address is missing writes its pid file and vty socket, then exits ("bind:
/// Cannot assign requested address ... Program cannot continue"); the supervisor sees
/// the exit. Whoever runs vtysh right away checks [`serving`] too.
pub fn ready(pid_file: &Path, spawned: u32) -> bool {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        == Some(spawned)
}

/// The daemon answers vtysh: its vty socket exists.
pub fn serving(line: &CommandLine) -> bool {
    std::fs::symlink_metadata(&line.vty_socket)
        .map(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
        .unwrap_or(false)
}

#[cfg(test)]
#[path = "procs_tests.rs"]
mod tests;
