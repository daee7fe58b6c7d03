//! The program of the Node's Service device (SVC-02): `svc_host` on its peer's ingress,
//! a tc filter as a port's (replaced in place by a later daemon).
use juneau_common::prog_names;

use super::{Dataplane, DataplaneError};

impl Dataplane {
    /// Attaches `svc_host` to `ifname` (the Service device's peer, in the calling
    /// thread's namespace) unless this datapath runs it there already.
    pub fn attach_service_peer(
        &mut self,
        ifname: &str,
        ifindex: u32,
    ) -> Result<(), DataplaneError> {
        if self.attached(ifindex, prog_names::SVC_HOST) {
            return Ok(());
        }
        let link = self.attach_filter(prog_names::SVC_HOST, ifname)?;
        self.links.insert(ifindex, link);
        Ok(())
    }
}
