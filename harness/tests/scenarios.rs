//! Every datapath scenario file under `scenarios/datapath/` holds: each declares the
//! requirements it proves, and the runner checks each of its expectations with real
//! tools. (The stack scenarios run with `juneau standalone`, tests/standalone.rs.)
use juneau_harness::scenario;

#[test]
fn every_scenario_file_names_its_layer_by_its_folder() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut seen = 0;
    for (folder, layer) in [
        ("datapath", scenario::Layer::Datapath),
        ("stack", scenario::Layer::Stack),
    ] {
        for e in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = e.unwrap().path();
            let s = scenario::Scenario::load(&path).unwrap();
            assert_eq!(s.layer, layer, "{}", path.display());
            assert!(!s.proves.is_empty(), "{} proves nothing", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 5);
    let stray: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(
        stray.is_empty(),
        "scenarios outside a layer folder: {stray:?}"
    );
}

#[test]
fn l2_28_every_scenario_file_holds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/datapath");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "scenarios missing: {files:?}");
    let mut failures = Vec::new();
    for f in &files {
        let mut log = Vec::new();
        if let Err(e) = scenario::run(f, &mut |l| log.push(l)) {
            failures.push(format!("{}: {e}\n{}", f.display(), log.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_scenario_with_a_wrong_expectation_fails_and_says_which() {
    let dir = std::env::temp_dir().join(format!("jn-bad-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.yaml");
    std::fs::write(
        &f,
        "description: wrong on purpose\nlayer: datapath\nproves: []\nnodes: [n0]\nsegments: {s: {vni: 9}}\npods:\n  - {name: a, node: n0, segment: s}\n  - {name: b, node: n0, segment: s}\nsteps:\n  - send: {from: a, frame: {dst: broadcast, ethertype: 0x88b5}, expect: {a: 1}}\n",
    )
    .unwrap();
    let err = scenario::run(&f, &mut |_| {}).unwrap_err();
    assert!(err.contains("a received 0 frame(s), expected 1"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
