//! Child processes that end with the process that started them: programs a run starts
//! in Pods (a DHCP server) and the Node daemons of a standalone run must not outlive a
//! run killed before its teardown.
use std::{os::unix::process::CommandExt, process::Command};

/// Makes `cmd`'s process get `signal` when the thread that spawns it exits (and so
/// when this process dies, SIGKILL included). The setting survives exec (`ip netns
/// exec`, `sh -c 'exec ...'`). Spawn from a thread that lives as long as the child
/// should.
pub fn die_with_parent(cmd: &mut Command, signal: i32) -> &mut Command {
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal comes.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the parent is gone"));
            }
            Ok(())
        })
    }
}
