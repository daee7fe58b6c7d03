//! Two Subnets of one Vpc on one Node, the bed of the policy tests and benchmarks:
//! A (10.0.1.0/24) holds ports 0 and 1, B (10.0.2.0/24) ports 2 and 3.
use crate::router::Seg;

pub const VNI_A: u32 = 21;
pub const VNI_B: u32 = 22;
pub const GW_A: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 21];
pub const GW_B: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 22];
pub const SEG_A: Seg = Seg {
    vni: VNI_A,
    cidr: "10.0.1.0/24",
    gw: [10, 0, 1, 1],
    gw_mac: GW_A,
    mtu: 1500,
};
pub const SEG_B: Seg = Seg {
    vni: VNI_B,
    cidr: "10.0.2.0/24",
    gw: [10, 0, 2, 1],
    gw_mac: GW_B,
    mtu: 1500,
};

/// Port `i`'s address: 0 and 1 in A, 2 and 3 in B.
pub const fn ip(i: u8) -> [u8; 4] {
    if i < 2 {
        [10, 0, 1, 10 + i]
    } else {
        [10, 0, 2, 10 + i]
    }
}

/// Port `i`'s segment.
pub const fn vni(i: u8) -> u32 {
    if i < 2 { VNI_A } else { VNI_B }
}

/// Port `i`'s gateway MAC.
pub const fn gw(i: u8) -> [u8; 6] {
    if i < 2 { GW_A } else { GW_B }
}
