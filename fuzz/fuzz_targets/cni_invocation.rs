//! The plugin's inputs (CNI_* environment, network configuration on stdin, CNI_ARGS):
//! a request or a CNI error, never a panic.
#![no_main]
use juneau::cni::plugin::{Invocation, invocation};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, arbitrary::Arbitrary)]
struct Input {
    command: u8,
    container_id: String,
    netns: String,
    ifname: String,
    args: String,
    stdin: String,
}

const COMMANDS: [&str; 7] = ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "BOGUS"];

fuzz_target!(|i: Input| {
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
});
