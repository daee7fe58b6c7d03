//! `kubectl juneau bgp status --node N` (BGP-03): what Node N's speaker says right now
//! over its control socket (never the daemon's records): each session, its state,
//! since when and its last error, and the routes it announces.
use serde::Serialize;

use super::{bird::ctl, feature::SpeakerDir, report::ask};
use crate::cli::CliError;

#[derive(Debug, Serialize)]
pub struct SessionRow {
    pub peer: String,
    pub address: String,
    pub state: String,
    pub bgp_state: String,
    pub exported: u32,
    pub last_error: String,
}

#[derive(Debug, Serialize)]
pub struct BgpStatus {
    pub node: String,
    /// `BIRD 2.0.12`, and its condition (`Daemon is up and running`).
    pub speaker: String,
    pub sessions: Vec<SessionRow>,
    /// The prefixes it announces (its table `jn_adv`).
    pub routes: Vec<String>,
}

fn query(why: impl ToString) -> CliError {
    CliError::Query {
        what: "the Node's BGP speaker".into(),
        why: format!(
            "{}; does the Node run one (a BGPPeer exists) and is its daemon on this machine?",
            why.to_string()
        ),
    }
}

pub fn status(node: &str) -> Result<BgpStatus, CliError> {
    let dir = SpeakerDir(crate::node::daemon::bgp_dir_of(
        &crate::node::daemon::socket_of(node),
    ));
    let (st, sessions) = ask(&dir).map_err(query)?;
    let mut c = ctl::connect(&dir.ctl()).map_err(query)?;
    let routes = c
        .command("show route table jn_adv")
        .map_err(query)?
        .body()
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    Ok(BgpStatus {
        node: node.into(),
        speaker: format!("{}: {}", st.version, st.condition),
        sessions: sessions
            .into_iter()
            .map(|s| SessionRow {
                peer: s.peer_name.unwrap_or(s.protocol),
                address: s.peer_address.map(|a| a.to_string()).unwrap_or_default(),
                state: s.state.as_str().into(),
                bgp_state: s.bgp_state.unwrap_or_default(),
                exported: s.exported_routes,
                last_error: s.last_error.map(|e| e.to_string()).unwrap_or_default(),
            })
            .collect(),
        routes,
    })
}

pub fn render(s: &BgpStatus) -> String {
    let mut out = format!("NODE {}  SPEAKER {}\n", s.node, s.speaker);
    out += &format!(
        "{:<16} {:<15} {:<7} {:<12} {:>8}  LASTERROR\n",
        "PEER", "ADDRESS", "STATE", "BGPSTATE", "EXPORTED"
    );
    for r in &s.sessions {
        out += &format!(
            "{:<16} {:<15} {:<7} {:<12} {:>8}  {}\n",
            r.peer,
            r.address,
            r.state,
            r.bgp_state,
            r.exported,
            if r.last_error.is_empty() {
                "-"
            } else {
                &r.last_error
            }
        );
    }
    out += "ROUTES\n";
    for r in &s.routes {
        out += &format!("{r}\n");
    }
    out
}
