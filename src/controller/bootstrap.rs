//! The default Vpc and its default Subnet (`--default-subnet-cidr`, 10.16.0.0/16 as
//! kube-ovn's `ovn-default`), made when absent: a Pod without Juneau annotations gets
//! eth0 there, as every Pod of a cluster expects a network. Never changed once made:
//! a default Subnet edited or made by hand is kept as it is.
use ipnet::Ipv4Net;

use crate::{
    admission::validate::Snapshot,
    api::{
        DEFAULT_VPC, Subnet, Vpc,
        subnet::SubnetSpec,
        vpc::{ServiceProvider, VpcService, VpcSpec},
    },
};

/// The default Vpc and Subnet to create, those that do not exist yet.
pub fn missing(snap: &Snapshot, cidr: Option<Ipv4Net>) -> (Option<Vpc>, Option<Subnet>) {
    let Some(cidr) = cidr else {
        return (None, None);
    };
    let vpc = snap.vpc(DEFAULT_VPC).is_none().then(|| {
        Vpc::new(
            DEFAULT_VPC,
            VpcSpec {
                // The default Vpc's Pods use cluster DNS and Services (SVC-01), and
                // provide backends to the others (SVC-02), as the reference's does.
                service: Some(VpcService {
                    consume: true,
                    provider: Some(ServiceProvider {
                        nat_source_subnet: DEFAULT_VPC.into(),
                    }),
                }),
                ..VpcSpec::default()
            },
        )
    });
    let subnet = snap.subnet(DEFAULT_VPC).is_none().then(|| {
        Subnet::new(
            DEFAULT_VPC,
            SubnetSpec {
                vpc: DEFAULT_VPC.into(),
                cidr: cidr.to_string(),
                network_acl: None,
            },
        )
    });
    (vpc, subnet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_05_the_default_vpc_and_subnet_are_made_once_and_left_alone() {
        let cidr: Ipv4Net = "10.16.0.0/16".parse().unwrap();
        let mut snap = Snapshot::default();
        let (vpc, subnet) = missing(&snap, Some(cidr));
        let (vpc, subnet) = (vpc.unwrap(), subnet.unwrap());
        assert_eq!(subnet.spec.vpc, "default");
        assert_eq!(subnet.spec.cidr, "10.16.0.0/16");
        // SVC-01: the default Vpc's Pods reach the cluster's Services.
        assert!(vpc.spec.service.as_ref().is_some_and(|s| s.consume));
        // The default Subnet passes the same admission as any other.
        snap.vpcs.push(vpc);
        crate::admission::validate::validate_subnet_create(&subnet, &snap).unwrap();
        // Once there (even edited by hand), nothing more is made.
        let mut edited = subnet;
        edited.spec.cidr = "10.17.0.0/16".into();
        snap.subnets.push(edited);
        assert_eq!(missing(&snap, Some(cidr)), (None, None));
        // Turned off: nothing at all.
        assert_eq!(missing(&Snapshot::default(), None), (None, None));
    }
}
