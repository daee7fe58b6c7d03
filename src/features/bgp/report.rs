//! BGPNodeState's status (BGP-03), from what this Node's speaker says over its socket
//! (`show status`, `show protocols all`) and the intent: one line per BGPPeer (Up,
//! Down with the last error and its NOTIFICATION, or Unknown), what the Node means to
//! announce by pool, the objects left out, and the conditions `BirdRunning` and
//! `Ready`. Written when it differs, and at least every [`HEARTBEAT`].
use std::{
    net::Ipv4Addr,
    path::PathBuf,
    time::{Duration, Instant, SystemTime},
};

use k8s_openapi::jiff::Timestamp;

use super::{
    bird::{
        ctl,
        render::render,
        state::{Session, SessionState, Status, parse_protocols, parse_status, up_since},
    },
    desired::{by_pool, intent},
    feature::SpeakerDir,
};
use crate::{
    api::{
        bgpnodestate::{AdvertisementState, BGPNodeStateStatus, BgpError, BgpSession},
        condition::Condition,
    },
    cluster::{Cluster, ClusterError, World},
};

/// How often the daemon reads its speaker.
pub const EVERY: Duration = Duration::from_secs(1);
/// The longest a status goes unwritten (the anchor's heartbeat).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

fn rfc3339(t: SystemTime) -> String {
    Timestamp::try_from(t)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// What the speaker answered, or why it did not.
pub type Speaker = Result<(Status, Vec<Session>), String>;

/// Why a Node with `--bgp-speaker off` has no speaker to ask.
pub const DISABLED: &str = "the BGP speaker is off on this Node (--bgp-speaker off)";

/// The status of Node `node` (pure): `applied` is whether the speaker's file is the
/// one the intent renders today.
pub fn node_state(
    world: &World,
    node: &str,
    node_ip: Ipv4Addr,
    speaker: &Speaker,
    applied: bool,
    now: SystemTime,
) -> BGPNodeStateStatus {
    let (_, left_out) = intent(world, node, node_ip);
    let mut sessions: Vec<BgpSession> = world
        .objects
        .bgp_peers
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let mine = speaker.as_ref().ok().and_then(|(st, ss)| {
                Some((
                    st,
                    ss.iter().find(|s| s.peer_name.as_deref() == Some(&name))?,
                ))
            });
            let (state, up, last_error, exported) = match mine {
                Some((st, s)) => (
                    s.state.as_str(),
                    s.since
                        .filter(|_| s.state == SessionState::Up)
                        .map(|since| rfc3339(up_since(now, st.server_time, since)))
                        .unwrap_or_default(),
                    s.last_error
                        .as_ref()
                        .map(|e| e.to_string())
                        .unwrap_or_default(),
                    s.exported_routes,
                ),
                None => ("Unknown", String::new(), String::new(), 0),
            };
            BgpSession {
                peer_address: p.spec.peer_address.clone(),
                peer_name: name,
                state: state.into(),
                up_since: up,
                last_error,
                exported_routes: exported,
            }
        })
        .collect();
    sessions.sort_by(|a, b| a.peer_name.cmp(&b.peer_name));
    let synced = speaker
        .as_ref()
        .ok()
        .and_then(|(st, _)| st.last_reconfiguration.or(st.last_reboot).map(|t| (st, t)))
        .map(|(st, t)| rfc3339(up_since(now, st.server_time, t)))
        .unwrap_or_default();
    let advertisements = by_pool(world, node)
        .into_iter()
        .map(|(pool, prefixes)| AdvertisementState {
            address_pool: pool,
            prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
            last_synced_at: if applied {
                synced.clone()
            } else {
                String::new()
            },
        })
        .collect();
    let errors = left_out
        .iter()
        .map(|line| {
            let mut words = line.splitn(3, ' ');
            let kind = words.next().unwrap_or_default().to_owned();
            let name = words
                .next()
                .unwrap_or_default()
                .trim_end_matches(':')
                .to_owned();
            BgpError {
                kind,
                name,
                message: words.next().unwrap_or_default().to_owned(),
                last_seen: rfc3339(now),
            }
        })
        .collect();
    let up = sessions.iter().filter(|s| s.state == "Up").count();
    let running = speaker.as_ref().is_ok_and(|(st, _)| st.running());
    let bird = match speaker {
        Ok((st, _)) => Condition::new("BirdRunning", running, "Status", st.condition.clone()),
        Err(why) => Condition::new("BirdRunning", false, "NoAnswer", why.clone()),
    };
    let ready = if matches!(speaker, Err(why) if why == DISABLED) {
        Condition::new(
            "Ready",
            false,
            "SpeakerDisabled",
            "this Node's daemon runs with --bgp-speaker off: it announces nothing and peers with no BGPPeer",
        )
    } else if !running {
        Condition::new("Ready", false, "SpeakerDown", "the speaker does not answer")
    } else if !applied {
        Condition::new(
            "Ready",
            false,
            "NotApplied",
            "the speaker runs an older configuration",
        )
    } else if up == 0 {
        let why: Vec<String> = sessions
            .iter()
            .map(|s| {
                format!(
                    "{} ({}): {}",
                    s.peer_name,
                    s.peer_address,
                    if s.last_error.is_empty() {
                        "no session yet"
                    } else {
                        &s.last_error
                    }
                )
            })
            .collect();
        Condition::new("Ready", false, "NoSessionUp", why.join("; "))
    } else {
        Condition::new("Ready", true, "Healthy", "")
    };
    BGPNodeStateStatus {
        heartbeat: rfc3339(now),
        bgp_sessions: sessions,
        sessions_up: u32::try_from(up).unwrap_or(u32::MAX),
        advertisements,
        errors,
        conditions: vec![bird, ready],
    }
}

/// Reads the speaker of `dir`.
pub fn ask(dir: &SpeakerDir) -> Speaker {
    let mut c = ctl::connect(&dir.ctl()).map_err(|e| e.to_string())?;
    let status = c.status().map_err(|e| e.to_string())?;
    let status = parse_status(&status.body()).map_err(|e| e.to_string())?;
    let protocols = c.protocols_all().map_err(|e| e.to_string())?;
    let sessions = parse_protocols(&protocols.body()).map_err(|e| e.to_string())?;
    Ok((status, sessions))
}

/// The daemon's side: what it wrote last, and when.
pub struct Reporter {
    /// `--bgp-speaker off`: the status says so instead of asking anyone.
    disabled: bool,
    node_ip: Ipv4Addr,
    dir: SpeakerDir,
    last: Option<(BGPNodeStateStatus, Instant)>,
}

impl Reporter {
    pub fn new(disabled: bool, node_ip: Ipv4Addr, dir: PathBuf) -> Self {
        Self {
            disabled,
            node_ip,
            dir: SpeakerDir(dir),
            last: None,
        }
    }

    /// One round: writes this Node's status when it differs (heartbeat aside) from
    /// the last written, or the last is [`HEARTBEAT`] old. True when written.
    pub fn round(&mut self, cluster: &dyn Cluster, node: &str) -> Result<bool, ClusterError> {
        let (world, _) = cluster.read()?;
        if world.objects.bgp_peers.is_empty() {
            return Ok(false);
        }
        let (want, _) = intent(&world, node, self.node_ip);
        let applied = render(&want).ok().is_some_and(|conf| {
            std::fs::read_to_string(self.dir.conf()).is_ok_and(|on_disk| on_disk == conf)
        });
        let speaker = if self.disabled {
            Err(DISABLED.to_owned())
        } else {
            ask(&self.dir)
        };
        let status = node_state(
            &world,
            node,
            self.node_ip,
            &speaker,
            applied,
            SystemTime::now(),
        );
        let same = |a: &BGPNodeStateStatus, b: &BGPNodeStateStatus| {
            let strip = |s: &BGPNodeStateStatus| BGPNodeStateStatus {
                heartbeat: String::new(),
                errors: s
                    .errors
                    .iter()
                    .map(|e| BgpError {
                        last_seen: String::new(),
                        ..e.clone()
                    })
                    .collect(),
                ..s.clone()
            };
            strip(a) == strip(b)
        };
        if let Some((last, at)) = &self.last
            && same(last, &status)
            && at.elapsed() < HEARTBEAT
        {
            return Ok(false);
        }
        let written = cluster.set_bgp_node_state(node, status.clone())?;
        self.last = Some((status, Instant::now()));
        Ok(written)
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
