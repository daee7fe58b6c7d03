//! Subnet admission: a Vpc that exists, the default Subnet in the default Vpc only, a
//! CIDR of /16 to /28 that overlaps nothing it could reach (L2-08's checks, which an
//! L2Network shares), a NetworkACL of its own Vpc; Vpc and CIDR immutable.
use crate::admission::validate::{
    Snapshot, Verdict, reject,
    segment::{Segment, acl_of_vpc, cidr_of, overlaps},
};
use crate::api::{DEFAULT_VPC, Subnet};

fn name(s: &Subnet) -> &str {
    s.metadata.name.as_deref().unwrap_or("")
}

pub fn validate_subnet_create(new: &Subnet, snap: &Snapshot) -> Verdict {
    let spec = &new.spec;
    if spec.vpc.is_empty() {
        return Err(reject(
            "spec.vpc",
            "required: every Subnet belongs to exactly one Vpc",
        ));
    }
    let default_name = name(new) == DEFAULT_VPC;
    if spec.vpc == DEFAULT_VPC && !default_name {
        return Err(reject(
            "spec.vpc",
            "the default Vpc holds only the default Subnet; create a Vpc of your own for this Subnet",
        ));
    }
    if default_name && spec.vpc != DEFAULT_VPC {
        return Err(reject(
            "metadata.name",
            "the Subnet named default belongs to the default Vpc only; pick another name",
        ));
    }
    if snap.vpc(&spec.vpc).is_none() {
        return Err(reject(
            "spec.vpc",
            format!("Vpc {:?} does not exist; create it first", spec.vpc),
        ));
    }
    let net = cidr_of(&spec.cidr)?;
    overlaps(Segment::Subnet(name(new)), &spec.vpc, net, snap)?;
    if let Some(acl) = &spec.network_acl {
        acl_of_vpc(acl, &spec.vpc, snap)?;
    }
    Ok(())
}

pub fn validate_subnet_update(old: &Subnet, new: &Subnet, snap: &Snapshot) -> Verdict {
    if old.spec.vpc != new.spec.vpc {
        return Err(reject(
            "spec.vpc",
            "is immutable; create a new Subnet in the other Vpc instead",
        ));
    }
    if old.spec.cidr != new.spec.cidr {
        return Err(reject(
            "spec.cidr",
            "is immutable: its Pods hold addresses of it; create a new Subnet with the other CIDR instead",
        ));
    }
    validate_subnet_create(new, snap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{L2Network, Vpc, l2network::L2NetworkSpec, subnet::SubnetSpec, vpc::VpcSpec};

    fn subnet(name: &str, vpc: &str, cidr: &str) -> Subnet {
        Subnet::new(
            name,
            SubnetSpec {
                vpc: vpc.into(),
                cidr: cidr.into(),
                network_acl: None,
            },
        )
    }

    fn msg(v: Verdict) -> String {
        v.unwrap_err().to_string()
    }

    fn snap() -> Snapshot {
        let mut s = Snapshot {
            vpcs: vec![
                Vpc::new("default", VpcSpec::default()),
                Vpc::new("a", VpcSpec::default()),
            ],
            ..Default::default()
        };
        s.subnets.push(subnet("web", "a", "10.81.0.0/24"));
        s.l2networks.push(L2Network::new(
            "lab",
            L2NetworkSpec {
                vpc: "a".into(),
                cidr: Some("10.80.0.0/24".into()),
                ..Default::default()
            },
        ));
        s.service_cidrs.push("10.96.0.0/12".parse().unwrap());
        s
    }

    #[test]
    fn l2_08_subnets_are_held_to_the_same_overlap_checks_as_l2networks() {
        let s = snap();
        let check =
            |n: &str, vpc: &str, cidr: &str| validate_subnet_create(&subnet(n, vpc, cidr), &s);
        assert!(check("db", "a", "10.82.0.0/24").is_ok());
        assert_eq!(
            msg(check("db", "a", "10.81.0.128/25")),
            "spec.cidr: 10.81.0.128/25 overlaps Subnet \"web\" (10.81.0.0/24) in the same Vpc \"a\""
        );
        assert_eq!(
            msg(check("db", "a", "10.81.0.0/16")),
            "spec.cidr: 10.81.0.0/16 overlaps Subnet \"web\" (10.81.0.0/24) in the same Vpc \"a\""
        );
        assert_eq!(
            msg(check("db", "a", "10.80.0.0/25")),
            "spec.cidr: 10.80.0.0/25 overlaps L2Network \"lab\" (10.80.0.0/24) in the same Vpc \"a\""
        );
        assert_eq!(
            msg(check("db", "a", "10.96.0.0/24")),
            "spec.cidr: 10.96.0.0/24 overlaps the cluster's Service CIDR 10.96.0.0/12"
        );
        assert_eq!(
            msg(check("db", "a", "10.82.0.0/29")),
            "spec.cidr: /29 is outside /16 to /28"
        );
        assert!(msg(check("db", "a", "10.82.0.0")).starts_with("spec.cidr: "));
        // Its own CIDR is no clash (an update re-checks it).
        assert!(validate_subnet_update(&s.subnets[0], &s.subnets[0], &s).is_ok());
    }

    #[test]
    fn l2_05_the_default_vpc_holds_only_the_default_subnet() {
        let s = snap();
        let check =
            |n: &str, vpc: &str| validate_subnet_create(&subnet(n, vpc, "10.16.0.0/16"), &s);
        assert!(check("default", "default").is_ok());
        assert_eq!(
            msg(check("mine", "default")),
            "spec.vpc: the default Vpc holds only the default Subnet; create a Vpc of your own for this Subnet"
        );
        assert_eq!(
            msg(check("default", "a")),
            "metadata.name: the Subnet named default belongs to the default Vpc only; pick another name"
        );
        assert_eq!(
            msg(check("x", "nope")),
            "spec.vpc: Vpc \"nope\" does not exist; create it first"
        );
    }

    #[test]
    fn l2_15_a_subnets_vpc_and_cidr_are_immutable() {
        let s = snap();
        let old = &s.subnets[0];
        let moved = subnet("web", "default", "10.81.0.0/24");
        assert!(msg(validate_subnet_update(old, &moved, &s)).starts_with("spec.vpc: is immutable"));
        let grown = subnet("web", "a", "10.81.0.0/23");
        assert!(
            msg(validate_subnet_update(old, &grown, &s)).starts_with("spec.cidr: is immutable")
        );
    }
}
