//! One function per target; each must answer (an error or a value) for every input
//! and never panic, and checks what its parser promises beyond that.
use std::collections::BTreeMap;

use juneau::{
    admission::validate,
    api::annotations,
    cni::plugin::{Invocation, invocation},
    node::veth::PortAlias,
    webhook::{Half, answer_with},
};
use juneau_harness::decode;
use kube::core::{DynamicObject, admission::AdmissionReview};

use crate::{snapshot, typed};

/// Pod annotations, as a tenant writes them: `parse` and the webhook's Pod rule over a
/// populated snapshot must answer (Ok or a message), never panic.
pub fn annotations(data: &[u8]) {
    if let Some((networks, skip, extra)) = typed::<(String, String, Vec<(String, String)>)>(data) {
        annotations_with(networks, skip, extra);
    }
}

/// [`annotations`] on a decoded input (the replay test feeds it mutated valid ones).
pub fn annotations_with(networks: String, skip: String, extra: Vec<(String, String)>) {
    let mut a: BTreeMap<String, String> = extra.into_iter().collect();
    a.insert("juneau.loutres.me/networks".into(), networks);
    a.insert("juneau.loutres.me/dns-inject-skip".into(), skip);
    let parsed = annotations::parse(&a);
    let verdict = validate::validate_pod_create(&a, snapshot());
    // A rule that accepts what the parser refuses would plumb an unreadable Pod.
    if parsed.is_err() {
        assert!(
            verdict.is_err(),
            "the webhook accepted annotations parse() refuses"
        );
    }
}

/// What the plugin reads of its environment and standard input.
#[derive(Clone, Debug, arbitrary::Arbitrary)]
pub struct CniInput {
    pub command: u8,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    pub stdin: String,
}

const COMMANDS: [&str; 7] = ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "BOGUS"];

/// The plugin's inputs (CNI_* environment, network configuration on stdin, CNI_ARGS):
/// a request or a CNI error, never a panic.
pub fn cni_invocation(data: &[u8]) {
    if let Some(i) = typed::<CniInput>(data) {
        cni_invocation_with(&i);
    }
}

/// [`cni_invocation`] on a decoded input.
pub fn cni_invocation_with(i: &CniInput) {
    let command = COMMANDS[i.command as usize % COMMANDS.len()];
    let env = |k: &str| match k {
        "CNI_COMMAND" => command.to_owned(),
        "CNI_CONTAINERID" => i.container_id.clone(),
        "CNI_NETNS" => i.netns.clone(),
        "CNI_IFNAME" => i.ifname.clone(),
        "CNI_ARGS" => i.args.clone(),
        _ => String::new(),
    };
    match invocation(&env, &i.stdin) {
        Ok(Invocation::Call { request, .. }) => {
            // What the daemon receives must survive its own encoding.
            let line = serde_json::to_string(&request).expect("requests serialize");
            let _: juneau::cni::Request = serde_json::from_str(&line).expect("and read back");
        }
        Ok(Invocation::Version(_)) => assert_eq!(command, "VERSION"),
        Err(e) => assert!(!e.msg.is_empty(), "an error without a message"),
    }
}

/// Scenario files: parse and check answer with a message naming the field, never panic.
pub fn scenario(data: &[u8]) {
    if let Some(text) = typed::<&str>(data) {
        let _ = juneau::scenario::Scenario::parse(text);
    }
}

/// AdmissionReview bodies as the API server (or anyone reaching the port) sends them:
/// both halves answer every decodable review with a response for its uid.
pub fn admission_review(body: &[u8]) {
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body) else {
        return;
    };
    let uid = review.request.as_ref().map(|r| r.uid.clone());
    let rewrite = juneau::webhook::Mutation {
        probe_port: Some(juneau::admission::probes::PROBE_PORT),
    };
    for half in [Half::Validate, Half::Mutate(rewrite)] {
        let out = answer_with(review.clone(), Ok(snapshot()), half);
        let response = out.response.as_ref().expect("a review without a response");
        if let Some(uid) = &uid {
            assert_eq!(&response.uid, uid, "answered another request");
        }
        serde_json::to_vec(&out).expect("responses serialize");
    }
}

/// The harness's frame decoder (goldens' text, failure messages) over any bytes a
/// capture may hold, and the port alias parser over any alias a link may carry.
pub fn frames(frame: &[u8]) {
    let mut copy = frame.to_vec();
    decode::normalize_underlay(&mut copy);
    let _ = decode::render(&[frame.to_vec(), copy]);
    if let Some(p) = std::str::from_utf8(frame).ok().and_then(PortAlias::parse) {
        // What parse accepts, render gives back.
        assert_eq!(PortAlias::parse(&p.render()), Some(p));
    }
}
