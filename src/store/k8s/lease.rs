//! Leader election on a coordination.k8s.io Lease, as kube-controller-manager does it:
//! the holder renews `renewTime`; another replica takes the Lease over only after
//! `leaseDurationSeconds` without a renewal, and every write carries the Lease's
//! resourceVersion, so two replicas can never both believe they hold it.
use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};

use kube::api::{Api, ObjectMeta, PostParams};

use super::{KubeCluster, is_not_found, refused};
use crate::cluster::ClusterError;

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl KubeCluster {
    /// Refuses a write once this replica's leadership may have passed to another (see
    /// `write_fence`); a replica that never took part in an election writes freely.
    pub(super) fn may_write(&self) -> Result<(), ClusterError> {
        match *self.write_fence.lock().expect("fence lock") {
            Some(until) if std::time::Instant::now() >= until => Err(ClusterError::Refused(
                "this replica's Lease may have passed to another replica (not renewed within its duration); the write is dropped and the current leader writes it".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Tries to hold the Lease `namespace/name` for `identity` for `duration`: creates
    /// it, renews it when ours, takes it over when its holder stopped renewing. True
    /// while this replica leads.
    pub fn hold_lease(
        &self,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Result<bool, ClusterError> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
        // Another replica waits `duration` from when it sees our renewal, which is after
        // this instant: until then our writes cannot race its.
        let asked = std::time::Instant::now();
        let held = self.rt.block_on(async {
            let what = format!("lease {namespace}/{name}");
            let seconds = duration.as_secs().max(1) as i32;
            let current = match api.get(name).await {
                Ok(l) => l,
                Err(e) if is_not_found(&e) => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(name.into()),
                            namespace: Some(namespace.into()),
                            ..Default::default()
                        },
                        spec: Some(LeaseSpec {
                            holder_identity: Some(identity.into()),
                            lease_duration_seconds: Some(seconds),
                            acquire_time: Some(now()),
                            renew_time: Some(now()),
                            lease_transitions: Some(0),
                            ..Default::default()
                        }),
                    };
                    return match api.create(&PostParams::default(), &lease).await {
                        Ok(_) => Ok(true),
                        Err(e) if is_conflict(&e) => Ok(false),
                        Err(e) => Err(refused(&what)(e)),
                    };
                }
                Err(e) => return Err(refused(&what)(e)),
            };
            // Expiry is timed on this replica's own clock, from when it last saw the
            // record change (as client-go does): another host's renewTime is never
            // compared with ours, so clock skew cannot hand over a live Lease.
            let version = current.metadata.resource_version.clone().unwrap_or_default();
            let seen_since = {
                let mut seen = self.lease_seen.lock().expect("lease lock");
                match seen.as_ref() {
                    Some((v, at)) if *v == version => *at,
                    _ => {
                        let at = std::time::Instant::now();
                        *seen = Some((version, at));
                        at
                    }
                }
            };
            let mut lease = current.clone();
            let spec = lease.spec.get_or_insert_with(Default::default);
            let ours = spec.holder_identity.as_deref() == Some(identity);
            if !ours {
                let held_for =
                    Duration::from_secs(spec.lease_duration_seconds.unwrap_or(seconds).max(1) as u64);
                if spec.holder_identity.is_some() && seen_since.elapsed() < held_for {
                    return Ok(false);
                }
                spec.holder_identity = Some(identity.into());
                spec.acquire_time = Some(now());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                tracing::info!(lease = what, from = ?current.spec.as_ref().and_then(|s| s.holder_identity.clone()), "taking over an expired lease");
            }
            spec.renew_time = Some(now());
            spec.lease_duration_seconds = Some(seconds);
            // The resourceVersion read above makes this a compare-and-swap.
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(refused(&what)(e)),
            }
        });
        let mut fence = self.write_fence.lock().expect("fence lock");
        match held {
            Ok(true) => *fence = Some(asked + duration),
            Ok(false) => *fence = Some(asked),
            // Unknown: the last renewal's fence stands.
            Err(_) => {
                fence.get_or_insert(asked);
            }
        }
        held
    }
}
