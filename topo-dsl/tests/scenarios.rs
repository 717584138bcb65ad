//! Every file in `scenarios/` parses.

use std::path::Path;

#[test]
fn every_scenario_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let lab = match turbonet_topo::parse(&name, &text) {
            Ok(lab) => lab,
            Err(e) => panic!("{name}:\n{}", e.render_plain(100)),
        };
        // Impaired links are fine now that the userspace link engine
        // applies them; the summary must still be computable.
        let s = turbonet_topo::summary(&lab);
        assert!(s.impaired_links <= lab.fabric.links.len(), "{name}");
        seen += 1;
    }
    assert!(seen >= 7, "only {seen} scenarios found");
}

#[test]
fn scenario_lab_names() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    for (file, lab_name) in [
        ("fat-tree-k4.toml", "k4"),
        ("fat-tree-k8.toml", "k8"),
        ("fat-tree-k16.toml", "k16"),
        ("leaf-spine.toml", "ls"),
        ("hpn.toml", "hpn"),
        ("hpn-pod.toml", "hpnpod"),
        ("hpn-pods.toml", "hpnpods"),
        ("clos-5.toml", "clos5"),
        ("custom-triangle.toml", "tri"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let lab = turbonet_topo::parse(file, &text).unwrap();
        assert_eq!(lab.name, lab_name);
    }
}
