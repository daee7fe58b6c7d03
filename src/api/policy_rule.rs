//! What NetworkACL and SecurityGroup rules share: the protocol and the ports an entry
//! matches (POL-01, POL-02). The protocol is a name or a number, as the reference
//! writes it; admission normalises and checks both (`features/policy/admission.rs`).
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `all icmp tcp udp sctp gre esp ah`, or an IP protocol number 0-255 written as an
/// integer (a quoted number is refused at admission, as the reference does).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Protocol {
    Number(i64),
    Name(String),
}

impl Default for Protocol {
    fn default() -> Self {
        Protocol::Name("all".into())
    }
}

impl JsonSchema for Protocol {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Protocol".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

/// The protocol names and their numbers; `all` is none (every protocol).
pub const PROTOCOL_NAMES: [(&str, u8); 7] = [
    ("icmp", 1),
    ("tcp", 6),
    ("udp", 17),
    ("sctp", 132),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
];

impl Protocol {
    /// The IP protocol number, `None` for `all`; an error says what is wrong.
    pub fn number(&self) -> Result<Option<u8>, String> {
        match self {
            Protocol::Number(n) => u8::try_from(*n)
                .map(Some)
                .map_err(|_| format!("protocol {n} is outside 0-255")),
            Protocol::Name(s) if s == "all" || s.is_empty() => Ok(None),
            Protocol::Name(s) => {
                if let Some((_, n)) = PROTOCOL_NAMES.iter().find(|(name, _)| name == s) {
                    return Ok(Some(*n));
                }
                if s.parse::<u8>().is_ok() {
                    return Err(format!(
                        "protocol {s:?} is a quoted number; write it as an integer ({s}) or use a name (all, icmp, tcp, udp, sctp, gre, esp, ah)"
                    ));
                }
                Err(format!(
                    "protocol {s:?} is unknown; use all, icmp, tcp, udp, sctp, gre, esp, ah or a number 0-255"
                ))
            }
        }
    }

    /// Whether entries of this protocol may name ports (TCP and UDP only).
    pub fn has_ports(&self) -> bool {
        matches!(self.number(), Ok(Some(6 | 17)))
    }
}

/// One port or a range of them (tcp and udp only).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PortSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range: Option<PortRange>,
}

/// `from` to `to`, both included.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub struct PortRange {
    pub from: u32,
    pub to: u32,
}

impl PortSpec {
    /// The inclusive range, or what is wrong with it.
    pub fn range(&self) -> Result<(u16, u16), String> {
        let (from, to) = match (self.port, &self.port_range) {
            (Some(p), None) => (p, p),
            (None, Some(r)) => (r.from, r.to),
            (Some(_), Some(_)) => return Err("give either port or portRange, not both".into()),
            (None, None) => return Err("give port or portRange".into()),
        };
        if from == 0 || to > 65535 || from > to {
            return Err(format!(
                "ports {from}-{to} are not a range within 1-65535 (from <= to)"
            ));
        }
        Ok((from as u16, to as u16))
    }
}
