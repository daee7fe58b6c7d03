//! A datapath whose writers one owner holds together: for the tests, the benchmarks
//! and the harness, which drive it from one thread. The daemon never uses it: its
//! features each keep their writer behind their own lock (`node::features`).
use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    ops::{Deref, DerefMut},
    path::Path,
};

use juneau_common::{NbrEntry, NbrKey};

use super::{
    Conntrack, Dataplane, DataplaneError, Delivery, ElasticIpWriter, ExtPoolWriter, Holder,
    PolicyWriter, RouterSync, RouterWriter, ServiceSync, ServiceWriter,
};
use crate::features::{router::gateway::RouterState, services::node::ServiceState};

/// The port owner (reached through `Deref`) with the router's and the ElasticIPs'
/// writers beside it.
pub struct Whole {
    pub ports: Dataplane,
    pub router: RouterWriter,
    pub eips: ElasticIpWriter,
    pub pools: ExtPoolWriter,
    pub services: ServiceWriter,
    pub policy: PolicyWriter,
    pub conntrack: Conntrack,
}

impl Whole {
    /// [`Dataplane::load`], its writers taken.
    pub fn load(pin_root: Option<&Path>) -> Result<Self, DataplaneError> {
        Self::of(Dataplane::load(pin_root)?)
    }

    /// Takes the writers of a loaded datapath.
    pub fn of(mut ports: Dataplane) -> Result<Self, DataplaneError> {
        Ok(Self {
            router: ports.take_router()?,
            eips: ports.take_elastic_ips()?,
            pools: ports.take_ext_pools()?,
            services: ports.take_services()?,
            policy: ports.take_policy()?,
            conntrack: ports.take_conntrack()?,
            ports,
        })
    }

    /// The router's sync, the ports' gateway bits written by the port owner, as the
    /// daemon's router feature does.
    pub fn sync_router(&mut self, want: &RouterState) -> Result<RouterSync, DataplaneError> {
        let ports = &mut self.ports;
        self.router.sync(want, |g| ports.set_gateways(g))
    }

    /// The ElasticIP holders, local ones pointing at their ports.
    pub fn set_elastic_ips(
        &mut self,
        want: &BTreeMap<Ipv4Addr, Holder>,
    ) -> Result<usize, DataplaneError> {
        let local = self.ports.held_ports();
        self.eips.set_elastic_ips(want, &local)
    }

    pub fn set_arp_answers(
        &mut self,
        want: &BTreeMap<Ipv4Addr, [u8; 6]>,
    ) -> Result<usize, DataplaneError> {
        self.eips.set_arp_answers(want)
    }

    /// The Services' frontends, backends and Maglev tables.
    pub fn sync_services(&mut self, want: &ServiceState) -> Result<ServiceSync, DataplaneError> {
        self.services.sync(want)
    }

    pub fn gw_neighbours(&self) -> Result<Vec<(NbrKey, NbrEntry)>, DataplaneError> {
        self.router.neighbours()
    }

    pub fn elastic_ips(&self) -> Result<BTreeMap<Ipv4Addr, Holder>, DataplaneError> {
        self.eips.elastic_ips()
    }

    pub fn arp_answers(&self) -> Result<BTreeMap<Ipv4Addr, [u8; 6]>, DataplaneError> {
        self.eips.arp_answers()
    }

    /// How this Node delivers the announced prefixes (EIP-14).
    pub fn set_ext_pools(
        &mut self,
        want: &BTreeMap<ipnet::Ipv4Net, Delivery>,
    ) -> Result<usize, DataplaneError> {
        self.pools.set(want)
    }
}

impl Deref for Whole {
    type Target = Dataplane;
    fn deref(&self) -> &Dataplane {
        &self.ports
    }
}

impl DerefMut for Whole {
    fn deref_mut(&mut self) -> &mut Dataplane {
        &mut self.ports
    }
}
