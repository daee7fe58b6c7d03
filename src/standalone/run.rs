//! A running standalone cluster: the embedded store (served to the daemons on a local
//! socket), the controller loop, the Node namespaces with their supervised `juneau
//! node` processes, and the Pods. `juneau standalone` drives one from a scenario;
//! tests drive one step by step (add and delete Pods, kill a daemon).
use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use super::{
    RunningPod, Scenario, StandaloneError, cleanup, pin_dir_of, socket_of,
    supervisor::{DaemonSpec, Supervisor},
    topology::{self, Topology},
};
use crate::{
    controller::{self, Config},
    netns::Owned,
    node::daemon::pid_file_of,
    scenario::{CLIENT, Outside, UPSTREAM},
    store::{ENDPOINT_SLICE_KIND, Object, SERVICE_KIND, Store, StoreError},
};

/// Runs of one process (tests start several): each gets its own folder and record.
static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// How long a daemon may take to come up (load, adopt, reconcile).
const DAEMON_START: Duration = Duration::from_secs(20);

pub struct Options {
    /// The daemons' aging time (L2-30).
    pub aging: Duration,
    /// Print the daemons' restarts as they happen.
    pub echo_daemon_events: bool,
    /// More arguments for every `juneau node` (`--garp-rounds 0`, ...).
    pub node_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            aging: super::DEFAULT_AGING,
            echo_daemon_events: false,
            node_args: Vec::new(),
        }
    }
}

pub struct Run {
    pub store: Store,
    pub daemons: Arc<Supervisor>,
    pub(super) pods: Vec<RunningPod>,
    /// Scratch folder of the scenario's steps (`{tmp}`).
    tmp: PathBuf,
    pub(super) prefix: String,
    seq: u32,
    run_dir: PathBuf,
    stop: Arc<AtomicBool>,
    controller: Option<std::thread::JoinHandle<()>>,
    // Dropped last: the Node, outside and underlay namespaces.
    pub(super) topo: Topology,
}

impl Run {
    /// Admits the scenario's objects, starts the controller, builds the Nodes and starts
    /// one daemon per Node. Pods come with [`Run::add_pod`].
    pub fn start(
        s: &Scenario,
        opts: &Options,
        out: &mut dyn FnMut(String),
    ) -> Result<Run, StandaloneError> {
        let cleaned = cleanup::dead_runs(&mut |l| tracing::info!("{l}"));
        if cleaned > 0 {
            out(format!(
                "cleanup: removed what {cleaned} killed run(s) left"
            ));
        }
        let live = cleanup::live_nodes();
        for n in &s.nodes {
            if live.contains(n) || std::os::unix::net::UnixStream::connect(socket_of(n)).is_ok() {
                return Err(StandaloneError::Scenario(format!(
                    "another standalone run is serving Node {n:?} ({}); stop it first (Ctrl-C)",
                    socket_of(n).display()
                )));
            }
        }
        // Every object is read and admitted before anything is made on the machine, and
        // a refusal names the object: nothing of a bad scenario is half-built.
        let store = Store::new();
        store.write(|w| {
            w.objects
                .service_cidrs
                .push("10.96.0.0/12".parse().unwrap())
        });
        // The Nodes first, as kubelets register them before anyone writes objects: the
        // rules read their addresses (a BGPPeer is never a Node, BGP-01).
        for (i, name) in s.nodes.iter().enumerate() {
            store.put_node(crate::api::NodeRecord {
                name: name.clone(),
                internal_ip: super::topology::node_ip(i).to_string(),
                terminating: false,
            });
        }
        for (i, v) in s.objects.iter().enumerate() {
            let what = format!(
                "objects[{i}] ({} {:?})",
                v.get("kind").and_then(|k| k.as_str()).unwrap_or("no kind"),
                v.pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("")
            );
            // Services are Kubernetes' own kind: the store takes them as the API
            // server would (a ClusterIP allocated), not through Juneau's admission.
            let kind = v.get("kind").and_then(|k| k.as_str());
            let made = if kind == Some(SERVICE_KIND) {
                store.create_service(v.clone()).map(|_| ())
            } else if kind == Some(ENDPOINT_SLICE_KIND) {
                store.create_endpoint_slice(v.clone()).map(|_| ())
            } else {
                Object::from_value(v.clone())
                    .map_err(StoreError::from)
                    .and_then(|o| store.create(o))
            };
            made.map_err(|e| StandaloneError::Scenario(format!("{what}: {e}")))?;
        }
        let pid = std::process::id();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let run_dir = Path::new(crate::node::daemon::RUN_BASE).join(format!("sa-{pid}-{seq}"));
        cleanup::Record {
            pid,
            seq,
            start_time: cleanup::start_time(pid).unwrap_or(0),
            nodes: s.nodes.clone(),
            run_dir: run_dir.clone(),
        }
        .write()?;
        std::fs::create_dir_all(run_dir.join("tmp"))?;

        let stop = Arc::new(AtomicBool::new(false));
        let controller = {
            let (store, stop) = (store.clone(), stop.clone());
            // No kube-controller-manager here: the controller writes the Services'
            // EndpointSlices too.
            let cfg = Config {
                endpoint_slices: true,
                ..Config::default()
            };
            std::thread::spawn(move || controller::run_loop(&store, &cfg, &stop))
        };
        let store_socket = run_dir.join("store.sock");
        crate::store::remote::serve(store.clone(), &store_socket)?;

        let prefix = format!("jn-sa-{pid}-{seq}");
        let mut topo = Topology::new(&prefix, &s.nodes)?;
        if s.outside.any() {
            topo.add_outside(&prefix)?;
        }
        let mut specs = Vec::new();
        for n in &topo.nodes {
            let pin = pin_dir_of(&n.name);
            // A previous run of these Nodes is over (checked above): start clean.
            let _ = std::fs::remove_dir_all(&pin);
            let socket = socket_of(&n.name);
            specs.push(DaemonSpec {
                node: n.name.clone(),
                netns: n.ns.path().to_owned(),
                args: vec![
                    "--node-name".into(),
                    n.name.clone(),
                    "--underlay".into(),
                    topology::UNDERLAY_DEV.into(),
                    "--vtep".into(),
                    n.ip.to_string(),
                    "--pin-dir".into(),
                    pin.display().to_string(),
                    "--cni-socket".into(),
                    socket.display().to_string(),
                    "--store-socket".into(),
                    store_socket.display().to_string(),
                    "--fdb-aging".into(),
                    opts.aging.as_secs().to_string(),
                    "--metrics-addr".into(),
                    "127.0.0.1:9464".into(),
                ]
                .into_iter()
                .chain(opts.node_args.iter().cloned())
                .collect(),
                log: run_dir.join(format!("{}.log", n.name)),
                pid_file: pid_file_of(&socket),
            });
        }
        let daemons = Supervisor::new(specs, opts.echo_daemon_events);
        let run = Run {
            store,
            daemons,
            pods: Vec::new(),
            tmp: run_dir.join("tmp"),
            prefix,
            seq,
            run_dir,
            stop,
            controller: Some(controller),
            topo,
        };
        let nodes: Vec<(String, String, std::net::Ipv4Addr)> = run
            .topo
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.ns.name().to_owned(), n.ip))
            .collect();
        for (name, ns, ip) in nodes {
            let pid = run.daemons.start(&name, DAEMON_START)?;
            out(format!(
                "node {name}: namespace {ns}, VTEP {ip}, juneau node (pid {pid}) on {}, log {}",
                socket_of(&name).display(),
                run.run_dir.join(format!("{name}.log")).display()
            ));
        }
        if let (Outside::Bgp, Some(o)) = (s.outside, &run.topo.outside) {
            let (peers, nodes): (Vec<_>, Vec<_>) = (
                run.store.read().0.objects.bgp_peers,
                run.topo.nodes.iter().map(|n| n.ip).collect(),
            );
            let up = crate::standalone::frr::start::upstream(&peers, &nodes)?;
            crate::standalone::frr::start::bring_up(
                &run.daemons,
                &run.run_dir.join("frr"),
                &o.upstream,
                &run.prefix,
                &up,
            )?;
            out(format!(
                "outside: router {UPSTREAM} speaks BGP (FRR, AS {}) with every Node; vtysh --vty_socket {}",
                up.local_as,
                run.run_dir.join("frr").display()
            ));
        }
        if let Some(o) = &run.topo.outside {
            out(format!(
                "outside: router {UPSTREAM} (namespace {}) {} on the underlay, {} to the client; {CLIENT} (namespace {}) {}; ElasticIPs {}-{}",
                o.upstream.name(),
                topology::UPSTREAM_IP,
                topology::EXTERNAL_GATEWAY,
                o.client.name(),
                topology::CLIENT_IP,
                topology::EIP_FIRST,
                topology::EIP_LAST,
            ));
        }
        Ok(run)
    }

    /// The socket the run serves its store on (to its daemons).
    pub fn store_socket(&self) -> PathBuf {
        self.run_dir.join("store.sock")
    }

    /// The Node namespace of `node`.
    pub fn node_ns(&self, node: &str) -> Option<&Owned> {
        self.topo
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| &n.ns)
    }

    /// Waits until every daemon has seen every endpoint (their sweeps follow the store
    /// within a tenth of a second of a change).
    pub fn settle(&self) {
        std::thread::sleep(Duration::from_millis(200));
    }

    /// Tears down in reverse: Pod programs, CNI DEL of every Pod, the daemons, the
    /// Nodes' pins and sockets, the namespaces. Errors are reported, never stop it.
    pub fn teardown(mut self, out: &mut dyn FnMut(String)) -> Result<(), StandaloneError> {
        let mut first_error = None;
        let names: Vec<String> = self.pods.iter().rev().map(|p| p.def.name.clone()).collect();
        for name in names {
            if let Err(e) = self.delete_pod(&name) {
                out(format!("teardown: {e}"));
                first_error.get_or_insert(e);
            }
        }
        self.stop_everything();
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Daemons, controller, pins, sockets, the run's folder and record; idempotent.
    fn stop_everything(&mut self) {
        let frr: Vec<u32> = ["frr-zebra", "frr-bfdd", "frr-bgpd"]
            .iter()
            .filter_map(|n| self.daemons.pid(n))
            .collect();
        self.daemons.shutdown();
        crate::standalone::frr::start::remove_leftovers(&self.prefix, &frr);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.controller.take() {
            let _ = c.join();
        }
        for n in &self.topo.nodes {
            // The speakers outlive their daemons by design: asked to leave here.
            crate::features::bgp::feature::take_down(&crate::node::daemon::bgp_dir_of(&socket_of(
                &n.name,
            )));
            if let Some(dir) = socket_of(&n.name).parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
            // Removing the pins detaches the programs and frees the maps.
            let _ = std::fs::remove_dir_all(pin_dir_of(&n.name));
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
        cleanup::Record::remove(std::process::id(), self.seq);
    }
}

/// A run dropped without [`Run::teardown`] (a test that failed) still stops its
/// daemons and removes its pins; the namespaces go with their owners.
impl Drop for Run {
    fn drop(&mut self) {
        self.stop_everything();
    }
}

/// Scenario steps act in the run's Pods, and with an outside in its router
/// ([`UPSTREAM`]) and client ([`CLIENT`]).
impl crate::scenario::steps::Bed for Run {
    fn netns_name(&self, at: &str) -> Result<String, String> {
        let outside = self.topo.outside.as_ref().and_then(|o| match at {
            UPSTREAM => Some(&o.upstream),
            CLIENT => Some(&o.client),
            _ => None,
        });
        // A Node last: what its kubelet would see (probes to its Pods).
        let node = self.topo.nodes.iter().find(|n| n.name == at).map(|n| &n.ns);
        self.pod(at)
            .map(|p| &p.ns)
            .or(outside)
            .or(node)
            .map(|ns| ns.name().to_owned())
            .ok_or_else(|| format!("no Pod or Node named {at:?}"))
    }

    fn tmp(&self) -> &Path {
        &self.tmp
    }
}
