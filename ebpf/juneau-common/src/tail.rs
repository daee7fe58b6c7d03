//! The one tail-call table, `jn_progs`: the programs a hook enters instead of growing
//! (each is verified alone). A slot per program, all listed here.
use crate::prog_names;

/// The Vpc router (`gw_route`), from `port_ingress`.
pub const TAIL_ROUTER: u32 = 0;
/// A direct ElasticIP NIC's port (`eip_port`), from `port_ingress`.
pub const TAIL_EIP_PORT: u32 = 1;
/// ElasticIPs on the uplink (`eip_uplink`), from `underlay_ingress`.
pub const TAIL_EIP_UPLINK: u32 = 2;
/// Delivery into a port that consumes Services (`deliver_svc`), from every delivery
/// site: the reply's translation back, then the redirect, verified once instead of
/// inlined at each site.
pub const TAIL_DELIVER_SVC: u32 = 3;
/// The router's second half (`gw_forward`), from `gw_route`: the sender's side of
/// policy, the route and the hop, verified alone (after the Service stage).
pub const TAIL_GW_FORWARD: u32 = 4;
/// A NATGateway's way out (`nat_out`), from `gw_forward`: the source translated (a port
/// claimed for a new connection), then out by the Node's routing table; the port in
/// `cb[0]`, the address to translate to in `cb[1]`.
pub const TAIL_NAT_OUT: u32 = 5;
/// A packet routed to a Service source address of this Node (`svc_host`), from the
/// router's delivery and the overlay's: the reply of a connection from another Vpc to
/// a provider Pod (SVC-02), given its client back.
pub const TAIL_SVC_HOST: u32 = 6;
/// Slots of `jn_progs`, with room for the next stages (Services, policy, NAT).
pub const TAIL_SLOTS: u32 = 16;

/// Every slot and the program the daemon puts in it.
pub const TAIL_PROGRAMS: [(u32, &str); 7] = [
    (TAIL_ROUTER, prog_names::GW_ROUTE),
    (TAIL_EIP_PORT, prog_names::EIP_PORT),
    (TAIL_EIP_UPLINK, prog_names::EIP_UPLINK),
    (TAIL_DELIVER_SVC, prog_names::DELIVER_SVC),
    (TAIL_GW_FORWARD, prog_names::GW_FORWARD),
    (TAIL_NAT_OUT, prog_names::NAT_OUT),
    (TAIL_SVC_HOST, prog_names::SVC_HOST),
];

// Every slot in the table, and none given twice.
const _: () = {
    let mut i = 0;
    while i < TAIL_PROGRAMS.len() {
        assert!(TAIL_PROGRAMS[i].0 < TAIL_SLOTS);
        let mut j = i + 1;
        while j < TAIL_PROGRAMS.len() {
            assert!(TAIL_PROGRAMS[i].0 != TAIL_PROGRAMS[j].0);
            j += 1;
        }
        i += 1;
    }
};
