//! What `fail`, `restore` and `link set` ask of the kernel on a `netns`
//! lab, as the daemon's plane applies them, recorded and compared with
//! `lab/tests/golden/run/<case>.txt`, so a change of how a running
//! fabric is changed shows without root. Impaired links are carried by
//! the kernel here (netem, tbf), as on a machine that has `sch_netem`.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p turbonet-lab
//! characterisation`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use turbonet_host::kernel::Recorder;
use turbonet_routing::Failures;
use turbonet_topo::{LinkId, LinkParams, NodeId};

use crate::carrier::Carrier;
use crate::dataplane::netns::NetnsPlane;
use crate::dataplane::{DataPlane, Desired};
use crate::events::Events;
use crate::state::LabDir;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("in the workspace")
        .to_path_buf()
}

/// The requests of `changes` applied one after another to the bundled
/// scenario `file`, each under a `# what` line.
fn record(file: &str, changes: &[(&str, Failures, Vec<LinkParams>)]) -> String {
    let path = workspace().join("scenarios").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lab = turbonet_topo::parse(&path.display().to_string(), &text).unwrap();
    // netem, as `engine = "kernel"` asks (auto would take the kernel
    // engine, which this recorder does not drive).
    lab.engine = turbonet_topo::EngineChoice::Kernel;
    let lab = Arc::new(lab);
    let carriers = crate::carrier::carriers(
        &lab,
        &crate::carrier::Qdiscs::known(true, Err("not asked for".to_owned())),
    )
    .unwrap();
    assert!(
        !carriers.iter().any(Carrier::is_userspace),
        "{file}: the link engine needs root"
    );
    let root =
        std::env::temp_dir().join(format!("turbonet-run-golden-{}-{file}", std::process::id()));
    let dir = LabDir::new(&root, &lab.name);
    dir.claim().unwrap();
    let events = Events::open(&dir, crate::events::unix_now()).unwrap();
    let routes = crate::routes::compute(&lab, &Failures::default());
    let mut plane = NetnsPlane::with_kernel(
        Recorder::default(),
        lab.clone(),
        turbonet_topo::machines::Share::whole(&lab.fabric),
        &carriers,
        Vec::new(),
        Some(routes),
        &events,
    )
    .unwrap();
    let mut out = String::new();
    let mut seen = 0;
    for (what, failures, params) in changes {
        let routes = crate::routes::compute(&lab, failures);
        let desired = Desired {
            failures,
            params,
            routes: &routes,
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(plane.apply(desired))
            .unwrap();
        let lines = plane.kernel().lines();
        out.push_str(&format!("# {what}\n"));
        for line in &lines[seen..] {
            out.push_str(line);
            out.push('\n');
        }
        seen = lines.len();
    }
    plane.stop().unwrap();
    drop(events);
    let _ = std::fs::remove_dir_all(&root);
    out
}

/// Compares `text` with the golden file `case`, or writes it.
fn golden(case: &str, text: &str) {
    let path = workspace().join(format!("lab/tests/golden/run/{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no golden file {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert!(
        expected == text,
        "{case}: the requests differ from {} (UPDATE_GOLDEN=1 rewrites it):\n{text}",
        path.display()
    );
}

/// Fail and restore an uplink of fat-tree k=4, then a whole switch.
#[test]
fn fail_and_restore_take_ports_down_and_rewrite_the_routes_around_them() {
    let lab = {
        let path = workspace().join("scenarios/fat-tree-k4.toml");
        turbonet_topo::parse("k4", &std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let params: Vec<LinkParams> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
    let link = lab.fabric.link_by_name("edge0-0--agg0-0").unwrap().id;
    let switch = lab.fabric.node_by_name("agg0-1").unwrap().id;
    let failed = |links: &[LinkId], nodes: &[NodeId]| Failures {
        links: links.iter().copied().collect(),
        nodes: nodes.iter().copied().collect(),
    };
    let text = record(
        "fat-tree-k4.toml",
        &[
            (
                "fail link edge0-0--agg0-0",
                failed(&[link], &[]),
                params.clone(),
            ),
            (
                "restore link edge0-0--agg0-0",
                failed(&[], &[]),
                params.clone(),
            ),
            ("fail node agg0-1", failed(&[], &[switch]), params.clone()),
            ("restore node agg0-1", failed(&[], &[]), params),
        ],
    );
    golden("fat-tree-k4-fail-restore", &text);
}

/// `link set` on a link netem carries, then `link reset`.
#[test]
fn link_set_replaces_netem_on_both_ends() {
    let lab = {
        let path = workspace().join("scenarios/two-hosts.toml");
        turbonet_topo::parse("duo", &std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let scenario: Vec<LinkParams> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
    let link = lab.fabric.link_by_name("h1--s1").unwrap().id.0 as usize;
    let mut set = scenario.clone();
    set[link].delay = Some("20ms".parse().unwrap());
    set[link].loss = Some("0.1%".parse().unwrap());
    let text = record(
        "two-hosts.toml",
        &[
            (
                "link set h1--s1 --delay 20ms --loss 0.1%",
                Failures::default(),
                set,
            ),
            ("link reset h1--s1", Failures::default(), scenario),
        ],
    );
    golden("two-hosts-link-set", &text);
}
