//! BGPNodeState from BIRD's own words (docs/bgp-plan.md, section 4): pure parsers of
//! `show status` and `show protocols all`, as `birdc` prints them (which is
//! [`super::ctl::Reply::body`]). Tested on text captured from bird 2.0.12
//! (`testdata/`), not on a guess.
//!
//! Times: BIRD prints wall-clock times in its own time zone (`timeformat ... iso long
//! ms`, set by the renderer). They are never read as absolute: a session's age is
//! `server time - Since`, both read from the same clock in one sweep, and `upSince`
//! is the caller's `now` minus that age, so the speaker's zone never matters.

use std::fmt;
use std::net::Ipv4Addr;
use std::time::{Duration, SystemTime};

/// Why a reply could not be read as what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("show status: no \"Current server time is\" line")]
    NoServerTime,
    #[error("not a BIRD time (expected YYYY-MM-DD HH:MM:SS[.fff]): {0:?}")]
    Time(String),
    #[error("show protocols: no header line, got {0:?}")]
    NotProtocols(String),
}

/// A wall-clock reading of the speaker, in milliseconds since 1970-01-01 00:00 of
/// *its* zone: only differences of two readings mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BirdTime(pub i64);

impl BirdTime {
    /// Parses `2026-12-06 05:53:36.896` (milliseconds optional).
    pub fn parse(text: &str) -> Result<Self, StateError> {
        let bad = || StateError::Time(text.to_string());
        let (date, time) = text.trim().split_once(' ').ok_or_else(bad)?;
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
        let d: Vec<&str> = date.split('-').collect();
        let (clock, frac) = time.split_once('.').unwrap_or((time, "0"));
        let t: Vec<&str> = clock.split(':').collect();
        let ([y, mo, da], [h, mi, s]) = (d.as_slice(), t.as_slice()) else {
            return Err(bad());
        };
        let (y, mo, da) = (num(y)?, num(mo)?, num(da)?);
        let (h, mi, s) = (num(h)?, num(mi)?, num(s)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || s > 60 {
            return Err(bad());
        }
        if frac.is_empty() || frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let ms = num(frac)? * 10_i64.pow(3 - frac.len() as u32);
        let days = days_from_civil(y, mo, da);
        Ok(Self((((days * 24 + h) * 60 + mi) * 60 + s) * 1000 + ms))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `upSince = now - (server time - since)`; a `since` ahead of the server time (a
/// clock step between the two lines) counts as "just now".
pub fn up_since(now: SystemTime, server_time: BirdTime, since: BirdTime) -> SystemTime {
    let age = Duration::from_millis(u64::try_from(server_time.0 - since.0).unwrap_or(0));
    now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// What `show status` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// `BIRD 2.0.12`
    pub version: String,
    pub router_id: Option<Ipv4Addr>,
    pub server_time: BirdTime,
    pub last_reboot: Option<BirdTime>,
    pub last_reconfiguration: Option<BirdTime>,
    /// Started with `-R` and still holding exports back (`graceful restart wait`).
    pub graceful_recovery: bool,
    /// The last line: `Daemon is up and running`, `Reconfiguration in progress`, ...
    pub condition: String,
}

impl Status {
    /// The `BirdRunning` condition: up, not shutting down.
    pub fn running(&self) -> bool {
        self.condition == "Daemon is up and running"
            || self.condition == "Reconfiguration in progress"
    }
}

pub fn parse_status(text: &str) -> Result<Status, StateError> {
    let mut status = Status {
        version: String::new(),
        router_id: None,
        server_time: BirdTime(0),
        last_reboot: None,
        last_reconfiguration: None,
        graceful_recovery: false,
        condition: String::new(),
    };
    let mut server_time = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(v) = line.strip_prefix("Current server time is ") {
            server_time = Some(BirdTime::parse(v)?);
        } else if let Some(v) = line.strip_prefix("Last reboot on ") {
            status.last_reboot = Some(BirdTime::parse(v)?);
        } else if let Some(v) = line.strip_prefix("Last reconfiguration on ") {
            status.last_reconfiguration = Some(BirdTime::parse(v)?);
        } else if let Some(v) = line.strip_prefix("Router ID is ") {
            status.router_id = v.trim().parse().ok();
        } else if line.starts_with("BIRD ") && status.version.is_empty() {
            status.version = line.trim().to_string();
        } else if line.starts_with("Graceful restart recovery") {
            status.graceful_recovery = true;
        }
        if !line.starts_with(' ') {
            status.condition = line.trim().to_string();
        }
    }
    status.server_time = server_time.ok_or(StateError::NoServerTime)?;
    Ok(status)
}

/// The plan's session states: `up` is Up, every other protocol state is Down;
/// Unknown is for a BGPPeer whose protocol is not in the output at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Up,
    Down,
    Unknown,
}

impl SessionState {
    /// As BGPNodeState and `kubectl juneau bgp status` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Up => "Up",
            SessionState::Down => "Down",
            SessionState::Unknown => "Unknown",
        }
    }
}

/// One BGP protocol of `show protocols all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The BIRD symbol, e.g. `jn-upstream` (maybe shortened: match on `peer_name`).
    pub protocol: String,
    /// From `Description: BGPPeer <name>`; `None` for a protocol Juneau did not write.
    pub peer_name: Option<String>,
    pub peer_address: Option<Ipv4Addr>,
    pub state: SessionState,
    /// The BGP FSM state: `Established`, `Active`, `Idle`, ...
    pub bgp_state: Option<String>,
    /// When the protocol last changed state (speaker's clock; see [`up_since`]).
    pub since: Option<BirdTime>,
    pub last_error: Option<LastError>,
    /// Summed over the protocol's channels; a channel that is down shows none.
    pub exported_routes: u32,
}

/// BIRD's `Last error:` line, and the NOTIFICATION it names if it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// As BIRD printed it, e.g. `Received: Bad peer AS`.
    pub text: String,
    /// (code, subcode) for a NOTIFICATION received (`Received:`) or sent (`BGP Error:`).
    pub notification: Option<(u8, u8)>,
}

impl LastError {
    pub fn new(text: &str) -> Self {
        let text = text.trim().to_string();
        let notification = ["Received: ", "BGP Error: "]
            .iter()
            .find_map(|class| text.strip_prefix(class))
            .and_then(notification_code);
        Self { text, notification }
    }
}

impl fmt::Display for LastError {
    /// `Received: Bad peer AS (NOTIFICATION 2/2)`: BIRD's words, and the numbers a
    /// router's operator looks up on the other side.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.notification {
            Some((code, sub)) => write!(f, "{} (NOTIFICATION {code}/{sub})", self.text),
            None => f.write_str(&self.text),
        }
    }
}

/// BIRD 2.0.12's `bgp_msg_table` (proto/bgp/packets.c): the only texts its
/// `bgp_error_dsc` prints for a NOTIFICATION, so the mapping back is exact.
const BGP_MSG_TABLE: &[(u8, u8, &str)] = &[
    (1, 0, "Invalid message header"),
    (1, 1, "Connection not synchronized"),
    (1, 2, "Bad message length"),
    (1, 3, "Bad message type"),
    (2, 0, "Invalid OPEN message"),
    (2, 1, "Unsupported version number"),
    (2, 2, "Bad peer AS"),
    (2, 3, "Bad BGP identifier"),
    (2, 4, "Unsupported optional parameter"),
    (2, 5, "Authentication failure"),
    (2, 6, "Unacceptable hold time"),
    (2, 7, "Required capability missing"),
    (2, 8, "No supported AFI/SAFI"),
    (2, 11, "Role mismatch"),
    (3, 0, "Invalid UPDATE message"),
    (3, 1, "Malformed attribute list"),
    (3, 2, "Unrecognized well-known attribute"),
    (3, 3, "Missing mandatory attribute"),
    (3, 4, "Invalid attribute flags"),
    (3, 5, "Invalid attribute length"),
    (3, 6, "Invalid ORIGIN attribute"),
    (3, 7, "AS routing loop"),
    (3, 8, "Invalid NEXT_HOP attribute"),
    (3, 9, "Optional attribute error"),
    (3, 10, "Invalid network field"),
    (3, 11, "Malformed AS_PATH"),
    (4, 0, "Hold timer expired"),
    (5, 0, "Finite state machine error"),
    (5, 1, "Unexpected message in OpenSent state"),
    (5, 2, "Unexpected message in OpenConfirm state"),
    (5, 3, "Unexpected message in Established state"),
    (6, 0, "Cease"),
    (6, 1, "Maximum number of prefixes reached"),
    (6, 2, "Administrative shutdown"),
    (6, 3, "Peer de-configured"),
    (6, 4, "Administrative reset"),
    (6, 5, "Connection rejected"),
    (6, 6, "Other configuration change"),
    (6, 7, "Connection collision resolution"),
    (6, 8, "Out of Resources"),
    (7, 0, "Invalid ROUTE-REFRESH message"),
    (7, 1, "Invalid ROUTE-REFRESH message length"),
];

/// The NOTIFICATION of a description; BIRD prints `Unknown error C.S` for pairs
/// outside its table, which carries the numbers itself.
pub fn notification_code(description: &str) -> Option<(u8, u8)> {
    if let Some(&(code, sub, _)) = BGP_MSG_TABLE.iter().find(|(_, _, d)| *d == description) {
        return Some((code, sub));
    }
    let (code, sub) = description
        .strip_prefix("Unknown error ")?
        .split_once('.')?;
    Some((code.parse().ok()?, sub.parse().ok()?))
}

/// The BGP protocols of `show protocols all`, in BIRD's order. Other protocols
/// (device, bfd, static) are skipped.
pub fn parse_protocols(text: &str) -> Result<Vec<Session>, StateError> {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    match lines.next() {
        None => return Ok(Vec::new()),
        Some(head)
            if head
                .split_whitespace()
                .eq(["Name", "Proto", "Table", "State", "Since", "Info"]) => {}
        Some(other) => return Err(StateError::NotProtocols(other.to_string())),
    }
    let mut sessions = Vec::new();
    let mut current: Option<Session> = None;
    for line in lines {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            sessions.extend(current.take());
            current = protocol_row(line);
        } else if let Some(session) = current.as_mut() {
            detail(session, line);
        }
    }
    sessions.extend(current);
    Ok(sessions)
}

/// A BGPPeer's state: its protocol's, found by the description (the symbol may be
/// shortened), or Unknown when BIRD lists no such protocol (not yet configured).
pub fn state_of(sessions: &[Session], peer_name: &str) -> SessionState {
    sessions
        .iter()
        .find(|s| s.peer_name.as_deref() == Some(peer_name))
        .map_or(SessionState::Unknown, |s| s.state)
}

/// `jn-upstream BGP --- up 2026-12-06 05:53:36.896  Established`: a Session when
/// the protocol is BGP, else `None` (its detail lines are then skipped).
fn protocol_row(line: &str) -> Option<Session> {
    let cols: Vec<&str> = line.split_whitespace().collect();
    let [name, proto, _table, state, rest @ ..] = cols.as_slice() else {
        return None;
    };
    if *proto != "BGP" {
        return None;
    }
    let since = match rest {
        [date, time, ..] => BirdTime::parse(&format!("{date} {time}")).ok(),
        _ => None,
    };
    Some(Session {
        protocol: name.to_string(),
        peer_name: None,
        peer_address: None,
        state: if *state == "up" {
            SessionState::Up
        } else {
            SessionState::Down
        },
        bgp_state: None,
        since,
        last_error: None,
        exported_routes: 0,
    })
}

fn detail(session: &mut Session, line: &str) {
    let Some((key, value)) = line.trim_start().split_once(':') else {
        return;
    };
    let value = value.trim();
    match key {
        "Description" => session.peer_name = value.strip_prefix("BGPPeer ").map(str::to_string),
        "BGP state" => session.bgp_state = Some(value.to_string()),
        // `%I%J`: an interface may follow as `%ifname`.
        "Neighbor address" => {
            session.peer_address = value.split('%').next().and_then(|a| a.parse().ok())
        }
        "Last error" => session.last_error = Some(LastError::new(value)),
        "Routes" => session.exported_routes += exported(value),
        _ => {}
    }
}

/// `0 imported, 2 exported, 0 preferred` (or with `N filtered,`) -> 2.
fn exported(value: &str) -> u32 {
    value
        .split(',')
        .filter_map(|part| part.trim().strip_suffix(" exported"))
        .filter_map(|n| n.trim().parse::<u32>().ok())
        .sum()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
