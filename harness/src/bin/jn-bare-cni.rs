//! The ceiling row of `pod_ready`'s `pod_network_share_p99`: the least a CNI plugin
//! must do on the kubelet bed for a Pod to have a routed eth0, and nothing else. ADD
//! makes a veth pair into the Pod's namespace, addresses it (10.89.0.0/16, the address
//! derived from the container ID: no IPAM store), adds its default route and brings
//! both ends up, through the same netlink calls Juneau's ADD makes (`veth::create_on`,
//! one session for the Node's and the Pod's namespaces). No controller to wait for, no
//! datapath, no API write: under a burst, its ADD time is what the kernel's netlink
//! (RTNL) and the Node's CPUs give any plugin. DEL removes the host end; the rest are
//! answered empty.
use std::{
    io::Read,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::ExitCode,
};

use juneau::node::{
    netlink::{self, Session},
    veth::{self, VethSpec},
};

/// A stable 32-bit hash of the container ID (FNV-1a).
fn hash(id: &str) -> u32 {
    id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn host_name(id: &str) -> String {
    format!("bare{:08x}", hash(id))
}

fn fail(msg: String) -> ExitCode {
    println!(
        "{}",
        serde_json::json!({"cniVersion": "1.0.0", "code": 999, "msg": msg})
    );
    ExitCode::FAILURE
}

fn add(id: &str, netns: &Path, ifname: &str) -> Result<serde_json::Value, String> {
    let h = hash(id);
    // 10.89.0.2 .. 10.89.255.254: a hundred Pods collide with odds of about 1 in 13.
    let host = ((h % 0xfffd) + 2) as u16;
    let address = Ipv4Addr::new(10, 89, (host >> 8) as u8, host as u8);
    let gateway = Ipv4Addr::new(10, 89, 0, 1);
    let nl = Session::open(Some(netns)).map_err(|e| e.to_string())?;
    let mac = |salt: u32| {
        let b = (h ^ salt).to_be_bytes();
        [0x02, 0x42, b[0], b[1], b[2], b[3]]
    };
    let spec = VethSpec {
        host_name: host_name(id),
        host_mac: mac(0x5a5a_5a5a),
        pod_netns: netns.to_owned(),
        pod_name: ifname.to_owned(),
        pod_mac: mac(0),
        mtu: None,
        alias: "jn-bare-cni".into(),
        clsact: false,
    };
    veth::create_on(&nl, &spec).map_err(|e| e.to_string())?;
    let net = ipnet::Ipv4Net::new(address, 16).expect("a /16");
    let index = nl.pod_index(ifname).map_err(|e| e.to_string())?;
    nl.block_on(netlink::add_address_on(nl.pod(), (index, ifname), net))
        .map_err(|e| e.to_string())?;
    nl.block_on(netlink::add_default_route_on(nl.pod(), gateway))
        .map_err(|e| e.to_string())?;
    Ok(serde_json::json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": ifname, "sandbox": netns}],
        "ips": [{"address": net.to_string(), "gateway": gateway.to_string(), "interface": 0}],
    }))
}

fn main() -> ExitCode {
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    // The network configuration on stdin is read and not needed.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let id = env("CNI_CONTAINERID");
    match env("CNI_COMMAND").as_str() {
        "ADD" => match add(&id, &PathBuf::from(env("CNI_NETNS")), &env("CNI_IFNAME")) {
            Ok(result) => {
                println!("{result}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        "DEL" => {
            // Gone already (the sandbox's namespace took it) is fine.
            let _ = veth::delete(None, &host_name(&id));
            ExitCode::SUCCESS
        }
        "VERSION" => {
            println!(r#"{{"cniVersion":"1.0.0","supportedVersions":["1.0.0","1.1.0"]}}"#);
            ExitCode::SUCCESS
        }
        _ => ExitCode::SUCCESS,
    }
}
