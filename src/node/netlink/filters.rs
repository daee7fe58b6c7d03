//! The tc filters on an interface's clsact hooks that run a BPF program (cls_bpf): the
//! kernel's record of which program a port runs, read back for `attachments` (a daemon's
//! bookkeeping is not evidence; the kernel is).
use futures::{StreamExt, TryStreamExt};
use rtnetlink::{
    Handle,
    packet_core::{
        NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, NetlinkMessage,
        NetlinkPayload,
    },
    packet_route::{
        RouteNetlinkMessage,
        tc::{TcAttribute, TcHandle, TcMessage, TcOption},
    },
    packet_utils::nla::{Nla, NlaBuffer, NlasIterator},
};

use super::{NetlinkError, req};

/// cls_bpf's attributes inside TCA_OPTIONS (include/uapi/linux/pkt_cls.h).
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_ID: u16 = 11;

/// One BPF filter on one hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpfFilter {
    /// `tc/ingress` or `tc/egress`.
    pub hook: &'static str,
    pub priority: u16,
    pub handle: u32,
    pub program_id: u32,
    /// The name cls_bpf records: `<object section or program name>`, as the loader gave it.
    pub name: String,
}

/// Adds the clsact qdisc to `ifindex` (one already there is fine). Added while the link
/// is down, it costs no grace period: on a link that is up the kernel deactivates the
/// device around the graft and waits for an expedited RCU grace period under RTNL.
pub async fn add_clsact(handle: &Handle, ifindex: u32) -> Result<(), NetlinkError> {
    let mut msg = TcMessage::with_index(ifindex as i32);
    msg.header.parent = TcHandle::CLSACT;
    msg.header.handle = TcHandle {
        major: u16::MAX,
        minor: 0,
    };
    msg.attributes.push(TcAttribute::Kind("clsact".into()));
    let mut request = NetlinkMessage::from(RouteNetlinkMessage::NewQueueDiscipline(msg));
    request.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    let mut replies = handle.clone().request(request).map_err(req("add clsact"))?;
    while let Some(reply) = replies.next().await {
        if let NetlinkPayload::Error(e) = reply.payload
            && let Some(code) = e.code
        {
            if code.get() == -libc::EEXIST {
                return Ok(());
            }
            return Err(req("add clsact")(rtnetlink::Error::NetlinkError(e)));
        }
    }
    Ok(())
}

/// The BPF filters of `ifindex` (both clsact hooks), in the namespace `handle` is bound
/// to. An interface without clsact has none.
pub async fn bpf_filters(handle: &Handle, ifindex: u32) -> Result<Vec<BpfFilter>, NetlinkError> {
    let mut out = Vec::new();
    for (hook, minor) in [
        ("tc/ingress", TcHandle::MIN_INGRESS),
        ("tc/egress", TcHandle::MIN_EGRESS),
    ] {
        let mut msg = TcMessage::default();
        msg.header.index = ifindex as i32;
        msg.header.parent = TcHandle {
            major: u16::MAX,
            minor,
        };
        let mut request = NetlinkMessage::from(RouteNetlinkMessage::GetTrafficFilter(msg));
        request.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut replies = handle
            .clone()
            .request(request)
            .map_err(req("list tc filters"))?
            .map(Ok::<_, rtnetlink::Error>);
        while let Some(reply) = replies.try_next().await.map_err(req("list tc filters"))? {
            let filter = match reply.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewTrafficFilter(m)) => m,
                // An interface without clsact answers an empty dump; an error is one.
                NetlinkPayload::Error(e) if e.code.is_some() => {
                    return Err(req("list tc filters")(rtnetlink::Error::NetlinkError(e)));
                }
                NetlinkPayload::Error(_) | NetlinkPayload::Done(_) => break,
                _ => continue,
            };
            if let Some(f) = parse(hook, &filter) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

fn parse(hook: &'static str, m: &TcMessage) -> Option<BpfFilter> {
    let is_bpf = m
        .attributes
        .iter()
        .any(|a| matches!(a, TcAttribute::Kind(k) if k == "bpf"));
    if !is_bpf {
        return None;
    }
    let mut f = BpfFilter {
        hook,
        priority: (m.header.info >> 16) as u16,
        handle: u32::from(m.header.handle),
        program_id: 0,
        name: String::new(),
    };
    for a in &m.attributes {
        let TcAttribute::Options(opts) = a else {
            continue;
        };
        for o in opts {
            let TcOption::Other(nla) = o else { continue };
            // cls_bpf is not decoded by the library: its options arrive as one raw
            // attribute holding the nested ones.
            let mut nested = vec![0u8; nla.value_len()];
            nla.emit_value(&mut nested);
            for inner in NlasIterator::new(&nested[..]).flatten() {
                apply(&mut f, &inner);
            }
        }
    }
    // A filter the kernel describes without a program id is not one we can name.
    (f.program_id != 0).then_some(f)
}

fn apply(f: &mut BpfFilter, nla: &NlaBuffer<&[u8]>) {
    let v = nla.value();
    match nla.kind() {
        TCA_BPF_ID if v.len() >= 4 => f.program_id = u32::from_ne_bytes([v[0], v[1], v[2], v[3]]),
        TCA_BPF_NAME => {
            f.name = String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(v)).into_owned()
        }
        _ => {}
    }
}
