//! Renders `bird.conf` from a Node's BGP intent (docs/bgp-plan.md, section 2).
//!
//! Pure: the same intent always gives the same bytes, so the daemon can compare the
//! rendered text with the file on disk and run `configure` only when it differs (a
//! daemon restart then changes nothing on the wire). The export filter and the peer
//! template are fixed text: BIRD restarts a session whose filter changed on
//! `configure`, so an advertisement only ever changes routes of `protocol static
//! jn_announce`, never a filter or a peer block.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// BIRD refuses a symbol longer than this (`SYM_MAX_LEN` in `conf/conf.h`).
pub const SYMBOL_MAX: usize = 64;
/// How much of a long BGPPeer name its protocol symbol keeps before the hash.
const NAME_KEEP: usize = 50;
/// The column the trailing `#` comments start at, so the file reads as a table.
const COMMENT_COLUMN: usize = 37;

/// What one Node's speaker is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// The Node the file is for (named in the header only).
    pub node: String,
    /// Set explicitly: BIRD's default is the lowest IPv4 of any link, which on a Node
    /// may be a veth's or the VXLAN's.
    pub router_id: Ipv4Addr,
    /// Source of every session and of BFD: the Node's InternalIP, never a pool address.
    pub local_address: Ipv4Addr,
    pub peers: Vec<Peer>,
    pub prefixes: Vec<Announce>,
}

/// One BGPPeer as this Node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The BGPPeer's name; the protocol is `'jn-<name>'`, the description carries it
    /// whole (the state parser matches on the description, not the symbol).
    pub name: String,
    pub my_asn: u32,
    pub peer_asn: u32,
    pub peer_address: Ipv4Addr,
    pub peer_port: u16,
    /// 0 (no keepalives) or 3-65535; always written, BIRD's default (240) is nobody's.
    pub hold_time: u16,
    /// `None` renders `bfd off;`.
    pub bfd: Option<Bfd>,
}

/// BFD timers of one peer (both directions use the same interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bfd {
    pub interval_ms: u32,
    pub multiplier: u8,
}

/// One announced prefix and why (the comment names the BGPAdvertisement and pool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    pub prefix: Ipv4Net,
    pub comment: String,
}

/// Why an intent cannot be rendered: each of these would make BIRD refuse the file,
/// and a refused file must never replace a working one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("BGPPeer {0:?}: a name of BGPPeer holds only letters, digits, '-', '.', ':' and '_'")]
    PeerName(String),
    #[error("BGPPeer {0:?} is listed twice")]
    DuplicatePeer(String),
    #[error("BGPPeers {0:?} and {1:?} give the same protocol name {2}")]
    SymbolClash(String, String, String),
    #[error("BGPPeer {name:?}: AS {asn} is not in 1-4294967294")]
    Asn { name: String, asn: u32 },
    #[error("BGPPeer {name:?}: port 0 is not a port")]
    Port { name: String },
    #[error("BGPPeer {name:?}: hold time {hold} is not 0 or 3-65535")]
    HoldTime { name: String, hold: u16 },
    #[error(
        "BGPPeer {name:?}: BFD needs an interval of at least 1 ms and a multiplier of at least 1"
    )]
    Bfd { name: String },
    #[error("{0} has host bits set: BIRD refuses such a route")]
    HostBits(Ipv4Net),
}

/// The protocol symbol of a BGPPeer: `jn-<name>`, or `jn-<first 50>-<8 hex>` when that
/// would pass BIRD's 64 characters. The hash is FNV-1a (32 bit) of the whole name:
/// fixed by its definition, so the symbol never changes between builds or releases
/// (a changed symbol would be a new protocol, i.e. a session reset).
pub fn protocol_name(peer: &str) -> String {
    let whole = format!("jn-{peer}");
    if whole.len() <= SYMBOL_MAX {
        return whole;
    }
    let keep: String = peer.chars().take(NAME_KEEP).collect();
    format!("jn-{keep}-{:08x}", fnv1a32(peer.as_bytes()))
}

/// FNV-1a, 32 bit: small, std-free of `DefaultHasher`'s per-release freedom.
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Renders the whole file. Peers are sorted by name and prefixes by address and
/// length, so the text depends on the intent's content, not on the order the
/// objects were listed in. A prefix named by several advertisements is one route
/// whose comment lists them all: its removal from one advertisement then leaves the
/// route, and the file says why it is there.
pub fn render(intent: &Intent) -> Result<String, RenderError> {
    let peers = checked_peers(&intent.peers)?;
    let routes = merged_routes(&intent.prefixes)?;
    let mut out = String::new();
    // Writing into a String cannot fail; `let _` keeps the function free of unwraps.
    let _ = write_head(&mut out, intent);
    let _ = write_routes(&mut out, &routes);
    out.push_str(FIXED_MIDDLE);
    for peer in peers {
        let _ = write_peer(&mut out, intent.local_address, peer);
    }
    Ok(out)
}

fn checked_peers(peers: &[Peer]) -> Result<Vec<&Peer>, RenderError> {
    let mut sorted: Vec<&Peer> = peers.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut symbols: BTreeMap<String, &str> = BTreeMap::new();
    for pair in sorted.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(RenderError::DuplicatePeer(pair[0].name.clone()));
        }
    }
    for peer in &sorted {
        check_peer(peer)?;
        let symbol = protocol_name(&peer.name);
        if let Some(other) = symbols.insert(symbol.clone(), &peer.name) {
            return Err(RenderError::SymbolClash(
                other.to_string(),
                peer.name.clone(),
                symbol,
            ));
        }
    }
    Ok(sorted)
}

fn check_peer(peer: &Peer) -> Result<(), RenderError> {
    let name = || peer.name.clone();
    let symbol_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_');
    if peer.name.is_empty() || !peer.name.chars().all(symbol_char) {
        return Err(RenderError::PeerName(name()));
    }
    for asn in [peer.my_asn, peer.peer_asn] {
        if asn == 0 || asn == u32::MAX {
            return Err(RenderError::Asn { name: name(), asn });
        }
    }
    if peer.peer_port == 0 {
        return Err(RenderError::Port { name: name() });
    }
    if matches!(peer.hold_time, 1 | 2) {
        return Err(RenderError::HoldTime {
            name: name(),
            hold: peer.hold_time,
        });
    }
    if let Some(bfd) = peer.bfd
        && (bfd.interval_ms == 0 || bfd.multiplier == 0)
    {
        return Err(RenderError::Bfd { name: name() });
    }
    Ok(())
}

/// Prefix -> the comments of every advertisement naming it (sorted, unique).
fn merged_routes(
    prefixes: &[Announce],
) -> Result<BTreeMap<Ipv4Net, BTreeSet<String>>, RenderError> {
    let mut routes: BTreeMap<Ipv4Net, BTreeSet<String>> = BTreeMap::new();
    for a in prefixes {
        if a.prefix.trunc() != a.prefix {
            return Err(RenderError::HostBits(a.prefix));
        }
        routes
            .entry(a.prefix)
            .or_default()
            .insert(one_line(&a.comment));
    }
    Ok(routes)
}

/// A comment runs to the end of its line: a newline in a name must not end it.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `text`, padded to the comment column, then `# comment`.
fn commented(text: &str, comment: &str) -> String {
    let pad = COMMENT_COLUMN.saturating_sub(text.len()).max(1);
    format!("{text}{:pad$}# {comment}", "")
}

fn write_head(out: &mut String, intent: &Intent) -> std::fmt::Result {
    let node = one_line(&intent.node);
    writeln!(
        out,
        "# Rendered by juneau node for Node {node}. The daemon rewrites this file."
    )?;
    writeln!(out, "router id {};", intent.router_id)?;
    out.push_str("timeformat protocol iso long ms;\n");
    out.push_str("timeformat base iso long ms;\n");
    out.push_str("log stderr all;\n");
    let gr = "graceful restart wait 5;";
    writeln!(
        out,
        "{}",
        commented(gr, "recovery waits this long for a peer that is down")
    )?;
    out.push('\n');
    let table = "ipv4 table jn_adv;";
    writeln!(
        out,
        "{}",
        commented(table, "the announced prefixes, nothing else")
    )?;
    out.push('\n');
    out.push_str("protocol device {}\n");
    out.push_str("protocol bfd jn_bfd { accept ipv4 direct; }\n\n");
    Ok(())
}

fn write_routes(
    out: &mut String,
    routes: &BTreeMap<Ipv4Net, BTreeSet<String>>,
) -> std::fmt::Result {
    out.push_str("protocol static jn_announce {\n");
    out.push_str("  ipv4 { table jn_adv; };\n");
    for (prefix, comments) in routes {
        let route = format!("  route {prefix} blackhole;");
        let why: Vec<&str> = comments.iter().map(String::as_str).collect();
        writeln!(out, "{}", commented(&route, &why.join("; ")))?;
    }
    out.push_str("}\n\n");
    Ok(())
}

/// The filter and template: fixed, so `configure` never restarts a session for them.
const FIXED_MIDDLE: &str = r#"filter jn_export {
  if source = RTS_STATIC && proto = "jn_announce" then accept;
  reject;
}

template bgp jn_peer {
  connect delay time 1; connect retry time 5; error wait time 1, 10;
  graceful restart on; graceful restart time 30;
  ipv4 { table jn_adv; import none; export filter jn_export; next hop self; };
}
"#;

fn write_peer(out: &mut String, local: Ipv4Addr, peer: &Peer) -> std::fmt::Result {
    writeln!(out)?;
    writeln!(
        out,
        "protocol bgp '{}' from jn_peer {{",
        protocol_name(&peer.name)
    )?;
    writeln!(out, "  description \"BGPPeer {}\";", peer.name)?;
    writeln!(out, "  local {local} as {};", peer.my_asn)?;
    writeln!(
        out,
        "  neighbor {} port {} as {};",
        peer.peer_address, peer.peer_port, peer.peer_asn
    )?;
    if peer.hold_time == 0 {
        // BIRD takes no keepalive time of 0: with no hold timer, none is written.
        writeln!(out, "  hold time 0;")?;
    } else {
        let keepalive = peer.hold_time / 3;
        writeln!(
            out,
            "  hold time {}; keepalive time {keepalive};",
            peer.hold_time
        )?;
    }
    match peer.bfd {
        Some(b) => writeln!(
            out,
            "  bfd {{ min rx interval {i} ms; min tx interval {i} ms; multiplier {m}; }};",
            i = b.interval_ms,
            m = b.multiplier
        )?,
        None => writeln!(out, "  bfd off;")?,
    }
    writeln!(out, "}}")
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
