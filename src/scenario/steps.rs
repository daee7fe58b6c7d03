//! The steps both layers run the same way: programs and pings inside a Pod (or a host
//! behind a Pod's bridge), narrated, each failure naming its step.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::Step;

/// Where steps act: the namespaces of Pods and hosts by name, and a scratch folder
/// (`{tmp}` in commands).
pub trait Bed {
    /// The named network namespace of a Pod or host.
    fn netns_name(&self, at: &str) -> Result<String, String>;
    fn tmp(&self) -> &Path;
}

/// A program a scenario (or a test) started in a namespace; stopped (only it) on drop,
/// and killed with the process that started it should that die first.
pub struct Daemon(Child);

impl Daemon {
    /// Starts `argv` in the named namespace, output discarded.
    pub fn start(netns: &str, argv: &[&str]) -> std::io::Result<Daemon> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", netns])
            .args(argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        crate::child::die_with_parent(&mut command, libc::SIGKILL)
            .spawn()
            .map(Daemon)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Err(e) = self.0.kill() {
            tracing::debug!(error = %e, "scenario program already gone");
        }
        let _ = self.0.wait();
    }
}

fn expand(bed: &dyn Bed, cmd: &[String]) -> Vec<String> {
    let tmp = bed.tmp().display().to_string();
    cmd.iter().map(|a| a.replace("{tmp}", &tmp)).collect()
}

/// Runs `argv` in the namespace of `at`; its stdout, or why it failed.
pub fn exec(bed: &dyn Bed, at: &str, argv: &[&str]) -> Result<String, String> {
    crate::netns::exec_in(&bed.netns_name(at)?, argv)
}

/// The summary line of `ping` when every probe was answered; an error naming the loss
/// otherwise (`ping` exits 0 on partial loss).
pub fn ping_all(bed: &dyn Bed, from: &str, to: &str, count: u32) -> Result<String, String> {
    let count_s = count.to_string();
    let out = exec(
        bed,
        from,
        &["ping", "-c", &count_s, "-i", "0.2", "-W", "2", to],
    )
    .map_err(|e| format!("ping {from} -> {to}: {e}"))?;
    let summary = out
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or("")
        .to_owned();
    if summary.starts_with(&format!("{count} packets transmitted, {count} received")) {
        Ok(summary)
    } else {
        Err(format!(
            "ping {from} -> {to}: not every reply came back: {summary}"
        ))
    }
}

/// Runs step `n` if it is one of the shared kinds; `Ok(false)` leaves it to the layer.
pub fn run_common(
    n: usize,
    step: &Step,
    bed: &dyn Bed,
    daemons: &mut Vec<Daemon>,
    say: &mut dyn FnMut(String),
) -> Result<bool, String> {
    match step {
        Step::Daemon { at, cmd } => {
            let cmd = expand(bed, cmd);
            let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let daemon = Daemon::start(&bed.netns_name(at)?, &argv)
                .map_err(|e| format!("step {n}: cannot start {cmd:?}: {e}"))?;
            daemons.push(daemon);
            std::thread::sleep(Duration::from_millis(300));
            say(format!("  step {n}: started {} in {at}", cmd[0]));
        }
        Step::Run { at, cmd } => {
            let cmd = expand(bed, cmd);
            let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let printed = exec(bed, at, &argv).map_err(|e| format!("step {n}: {e}"))?;
            let mut shown = cmd.join(" ");
            if shown.len() > 72 {
                shown.truncate(shown.floor_char_boundary(69));
                shown.push_str("...");
            }
            say(format!("  step {n}: {shown} in {at}: ok"));
            // What the program said last, when it said anything (a check's count).
            if let Some(last) = printed.lines().rev().find(|l| !l.trim().is_empty()) {
                say(format!("    {}", last.trim()));
            }
        }
        Step::Ping { from, to } => {
            let summary = ping_all(bed, from, to, 3).map_err(|e| format!("step {n}: {e}"))?;
            say(format!("  step {n}: ping {from} -> {to}: {summary}"));
        }
        Step::Sleep { seconds } => {
            std::thread::sleep(Duration::from_secs_f64(seconds.clamp(0.0, 600.0)));
            say(format!("  step {n}: slept {seconds} s"));
        }
        Step::Send { .. }
        | Step::Age { .. }
        | Step::DeletePod { .. }
        | Step::AddPod { .. }
        | Step::Apply { .. } => {
            return Ok(false);
        }
    }
    Ok(true)
}
