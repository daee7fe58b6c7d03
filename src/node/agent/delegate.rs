//! Which of a Pod's NICs one CNI call handles (MX-04). Without Multus, containerd's
//! one call (eth0) plumbs every NIC the Pod lists. Under Multus, the cluster network's
//! call (Juneau's conflist, which names no network) plumbs the NICs Multus does not
//! call a delegate for; a NetworkAttachmentDefinition whose config is Juneau's plugin
//! and names the NIC's L2Network or Subnet plumbs the one interface `CNI_IFNAME`
//! names, and its DEL and CHECK touch that one alone.
use std::collections::BTreeSet;

use crate::{
    api::NetworkInterface,
    cni::{CniError, Request, code},
};

/// Multus' call for one interface: its config names a network.
pub(super) fn delegated(req: &Request) -> bool {
    req.config.l2_network.is_some() || req.config.subnet.is_some()
}

/// The NICs `req` handles among the Pod's `nics`; `multus` gives the interfaces Multus
/// calls a delegate for (`api::multus`), asked only when the Pod has a NIC other than
/// the call's (a Pod with one NIC, the common case, costs no read of the Pod).
pub(super) fn nics_of_call(
    req: &Request,
    pod: &str,
    nics: Vec<NetworkInterface>,
    multus: impl FnOnce() -> BTreeSet<String>,
) -> Result<Vec<NetworkInterface>, CniError> {
    if !delegated(req) {
        if nics.iter().all(|n| n.spec.interface == req.ifname) {
            return Ok(nics);
        }
        let multus = multus();
        let own: Vec<NetworkInterface> = nics
            .into_iter()
            .filter(|n| n.spec.interface == req.ifname || !multus.contains(&n.spec.interface))
            .collect();
        return Ok(own);
    }
    let iface = &req.ifname;
    let (key, want) = match (&req.config.l2_network, &req.config.subnet) {
        (Some(l2), None) => ("l2Network", l2),
        (None, Some(s)) => ("subnet", s),
        _ => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "the network configuration names both l2Network and subnet: name one",
            ));
        }
    };
    let Some(nic) = nics.into_iter().find(|n| &n.spec.interface == iface) else {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!(
                "Pod {pod} has no Juneau NIC {iface}: list {{\"interface\": \"{iface}\", \"{key}\": \"{want}\"}} in its juneau.loutres.me/networks annotation"
            ),
        ));
    };
    let has = match key {
        "l2Network" => nic.spec.l2_network.as_ref(),
        _ => nic.spec.subnet.as_ref(),
    };
    if has != Some(want) {
        let on = nic
            .spec
            .l2_network
            .as_ref()
            .map(|l| format!("L2Network {l}"))
            .or_else(|| nic.spec.subnet.as_ref().map(|s| format!("Subnet {s}")))
            .or_else(|| {
                nic.spec
                    .elastic_ip
                    .as_ref()
                    .map(|e| format!("ElasticIP {e}"))
            })
            .unwrap_or_default();
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!(
                "the NetworkAttachmentDefinition's config names {key} {want}, but Pod {pod}'s NIC {iface} is on {on}: make them the same"
            ),
        ));
    }
    Ok(vec![nic])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        api::networkinterface::NetworkInterfaceSpec,
        cni::{NetConf, Request},
    };

    fn nic(iface: &str, l2: Option<&str>) -> NetworkInterface {
        NetworkInterface::new(
            &format!("p.{iface}"),
            NetworkInterfaceSpec {
                interface: iface.into(),
                l2_network: l2.map(Into::into),
                subnet: l2.is_none().then(|| "default".into()),
                ..Default::default()
            },
        )
    }

    fn req(ifname: &str, l2: Option<&str>) -> Request {
        Request {
            command: "ADD".into(),
            ifname: ifname.into(),
            config: NetConf {
                l2_network: l2.map(Into::into),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn ifaces(v: &[NetworkInterface]) -> Vec<&str> {
        v.iter().map(|n| n.spec.interface.as_str()).collect()
    }

    #[test]
    fn mx_04_the_cluster_network_call_leaves_multus_interfaces_to_their_own_call() {
        let nics = vec![nic("eth0", None), nic("net1", Some("lab-net"))];
        let none = BTreeSet::new;
        let all = nics_of_call(&req("eth0", None), "d/p", nics.clone(), none).unwrap();
        assert_eq!(
            ifaces(&all),
            ["eth0", "net1"],
            "no Multus: one call for all"
        );
        let multus = || BTreeSet::from(["net1".to_owned()]);
        let primary = nics_of_call(&req("eth0", None), "d/p", nics.clone(), multus).unwrap();
        assert_eq!(ifaces(&primary), ["eth0"]);
        let one = nics_of_call(&req("net1", Some("lab-net")), "d/p", nics, multus).unwrap();
        assert_eq!(
            ifaces(&one),
            ["net1"],
            "the delegate's call: its interface alone"
        );
        // One NIC, the call's own: the Pod's Multus networks are not even asked.
        let single = vec![nic("eth0", None)];
        let asked = || -> BTreeSet<String> { panic!("read the Pod for a one-NIC call") };
        let own = nics_of_call(&req("eth0", None), "d/p", single, asked).unwrap();
        assert_eq!(ifaces(&own), ["eth0"]);
    }

    #[test]
    fn mx_04_a_delegate_call_names_what_is_wrong() {
        let nics = vec![nic("eth0", None), nic("net1", Some("lab-net"))];
        let none = BTreeSet::new;
        let e = nics_of_call(&req("net2", Some("lab-net")), "d/p", nics.clone(), none).unwrap_err();
        assert!(
            e.msg
                .contains(r#"list {"interface": "net2", "l2Network": "lab-net"}"#),
            "{}",
            e.msg
        );
        let e = nics_of_call(&req("net1", Some("other")), "d/p", nics, none).unwrap_err();
        assert_eq!(
            e.msg,
            "the NetworkAttachmentDefinition's config names l2Network other, but Pod d/p's NIC net1 is on L2Network lab-net: make them the same"
        );
    }
}
