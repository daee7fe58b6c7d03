//! BGPNodeStates (BGP-03): one per Node, named after it, while at least one BGPPeer
//! exists (a cluster without BGP shows none), gone with its Node. Only the spec is the
//! controller's; each Node's daemon writes the status.
use crate::{
    api::{BGPNodeState, bgpnodestate::BGPNodeStateSpec},
    cluster::World,
};

pub fn node_states(world: &World) -> Vec<BGPNodeState> {
    if world.objects.bgp_peers.is_empty() {
        return Vec::new();
    }
    world
        .nodes
        .iter()
        .map(|n| {
            BGPNodeState::new(
                &n.name,
                BGPNodeStateSpec {
                    node_name: n.name.clone(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BGPPeer, NodeRecord, bgppeer::BGPPeerSpec};

    #[test]
    fn bgp_03_one_node_state_per_node_while_a_peer_exists() {
        let mut w = World::default();
        for n in ["node-a", "node-b"] {
            w.nodes.push(NodeRecord {
                name: n.into(),
                ..Default::default()
            });
        }
        assert!(node_states(&w).is_empty(), "no BGPPeer, no BGPNodeState");
        w.objects
            .bgp_peers
            .push(BGPPeer::new("upstream", BGPPeerSpec::default()));
        let names: Vec<String> = node_states(&w)
            .iter()
            .map(|s| s.spec.node_name.clone())
            .collect();
        assert_eq!(names, ["node-a", "node-b"]);
    }
}
