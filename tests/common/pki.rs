//! The test control plane's certificates: a CA of its own, and leaves it signs.
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// A CA of its own: (certificate, key).
pub fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).unwrap(), key)
}

/// A certificate for `sans` signed by `ca`: (certificate PEM, key PEM).
pub fn leaf(
    sans: &[&str],
    cn: &str,
    org: Option<&str>,
    usage: ExtendedKeyUsagePurpose,
    (ca, ca_key): &(rcgen::Certificate, KeyPair),
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    if let Some(o) = org {
        p.distinguished_name.push(DnType::OrganizationName, o);
    }
    p.extended_key_usages = vec![usage];
    let cert = p.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}
