//! FRR and BIRD configurations generated from the BGP plan: golden files
//! for one fat-tree edge switch and one HPN ToR, and a syntax check of every
//! switch's files with the real tools when they are installed (`bird -p`,
//! `vtysh --dryrun`). Regenerate the goldens with
//! `UPDATE_GOLDEN=1 cargo test -p turbonet-routing --test bgp_config`.

use std::path::{Path, PathBuf};
use std::process::Command;

use turbonet_routing::bgp::config;
use turbonet_routing::bgp::plan::{self, Speaker};
use turbonet_topo::{BgpTimers, Lab};

const TIMERS: BgpTimers = BgpTimers {
    hold_time: 9,
    keepalive: 3,
    connect_retry: 5,
};

fn lab(path: &str) -> Lab {
    let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .expect("bundled scenario");
    turbonet_topo::parse(path, &text).expect("valid scenario")
}

fn speaker(speakers: &[Speaker], name: &str) -> Speaker {
    speakers
        .iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| {
            let names: Vec<&str> = speakers.iter().map(|s| s.name.as_str()).collect();
            panic!("no speaker {name}; speakers: {names:?}")
        })
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Compares `actual` with the golden file, or rewrites it when
/// `UPDATE_GOLDEN` is set.
fn check_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    if expected != actual {
        let (line, (e, a)) = expected
            .lines()
            .chain(std::iter::repeat("<end of file>"))
            .zip(actual.lines().chain(std::iter::repeat("<end of file>")))
            .enumerate()
            .find(|(_, (e, a))| e != a)
            .map_or((0, ("<trailing newline differs>", "")), |(i, p)| (i + 1, p));
        panic!(
            "{name} differs from the golden file at line {line}:\n  expected: {e}\n  actual:   {a}\n(run with UPDATE_GOLDEN=1 to accept)"
        );
    }
}

/// A private scratch directory, removed on drop.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("turbonet-bgp-config-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `program` is on the PATH (`vtysh --version` exits 1, so running it says
/// nothing).
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Runs a checker on `file`; panics with its output if it refuses the file.
fn accepted(program: &str, args: &[&str], file: &Path, text: &str) {
    let out = Command::new(program)
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{program} {args:?} {} refused it ({}):\n{stdout}{stderr}\n--- file ---\n{text}",
        file.display(),
        out.status
    );
}

// ---- content ------------------------------------------------------------

#[test]
fn fat_tree_edge_golden() {
    let lab = lab("scenarios/fat-tree-k4.toml");
    let speakers = plan::speakers(&lab.fabric);
    let edge = speakers
        .iter()
        .find(|s| s.name.starts_with('e') || s.name.contains("edge"))
        .expect("an edge switch");
    check_golden("fat-tree-k4-edge.frr.conf", &config::frr(edge, &TIMERS));
    check_golden("fat-tree-k4-edge.bird.conf", &config::bird(edge, &TIMERS));
}

#[test]
fn hpn_tor_golden() {
    let lab = lab("scenarios/hpn.toml");
    let speakers = plan::speakers(&lab.fabric);
    // The first ToR with dual-homed hosts: it has port-bound originations.
    let tor = speakers
        .iter()
        .find(|s| s.originate.iter().any(|o| o.port.is_some()))
        .expect("a ToR with dual-homed hosts");
    let tor = speaker(&speakers, &tor.name);
    check_golden("hpn-tor.frr.conf", &config::frr(&tor, &TIMERS));
    check_golden("hpn-tor.bird.conf", &config::bird(&tor, &TIMERS));
}

#[test]
fn every_rule_of_the_plan_is_in_both_files() {
    let lab = lab("scenarios/hpn.toml");
    let speakers = plan::speakers(&lab.fabric);
    for s in &speakers {
        let frr = config::frr(s, &TIMERS);
        let bird = config::bird(s, &TIMERS);
        assert!(frr.starts_with(&format!("! generated by turbonet for {}\n", s.name)));
        assert!(bird.starts_with(&format!("# generated by turbonet for {}\n", s.name)));
        assert!(frr.contains(&format!("router bgp {}\n", s.asn)));
        assert!(frr.contains(&format!(" bgp router-id {}\n", s.router_id)));
        assert!(bird.contains(&format!("router id {};\n", s.router_id)));
        assert!(bird.contains(&format!("    local as {};\n", s.asn)));
        for n in &s.neighbours {
            let p = n.peer_addr;
            assert!(frr.contains(&format!(" neighbor {p} remote-as {}\n", n.peer_asn)));
            assert!(frr.contains(&format!(" neighbor {p} timers 3 9\n")));
            assert!(frr.contains(&format!(" neighbor {p} timers connect 5\n")));
            assert_eq!(
                frr.contains(&format!(" neighbor {p} passive\n")),
                n.passive,
                "{} {p}",
                s.name
            );
            assert!(bird.contains(&format!("    neighbor {p} as {};\n", n.peer_asn)));
            assert!(bird.contains(&format!("    local {};\n", n.local_addr)));
        }
        // One passive flag per session direction: the plan's own.
        let passive = s.neighbours.iter().filter(|n| n.passive).count();
        assert_eq!(bird.matches("    passive on;\n").count(), passive);
        for o in &s.originate {
            match &o.port {
                None => {
                    assert!(frr.contains(&format!("  network {}\n", o.prefix)));
                    assert!(bird.contains(&format!("    route {} blackhole;\n", o.prefix)));
                }
                Some(port) => {
                    assert!(frr.contains(&format!(" permit {}\n", o.prefix)));
                    assert!(!frr.contains(&format!("  network {}\n", o.prefix)));
                    assert!(bird.contains(&format!("    route {} via \"{port}\";\n", o.prefix)));
                }
            }
        }
        let ports = s.originate.iter().any(|o| o.port.is_some());
        assert_eq!(frr.contains("redistribute kernel"), ports, "{}", s.name);
        // Nothing refers to a file.
        for text in [&frr, &bird] {
            assert!(!text.contains("/etc"), "{}", s.name);
            assert!(!text.contains("include"), "{}", s.name);
            assert!(!text.contains("log file"), "{}", s.name);
        }
    }
}

#[test]
fn four_octet_asns_are_written_as_plain_numbers() {
    let lab = lab("scenarios/fat-tree-k4.toml");
    let mut s = plan::speakers(&lab.fabric).remove(0);
    s.asn = 4_200_001_000;
    s.neighbours[0].peer_asn = 4_294_967_294;
    let frr = config::frr(&s, &TIMERS);
    assert!(frr.contains("router bgp 4200001000\n"));
    assert!(frr.contains("remote-as 4294967294\n"));
    let bird = config::bird(&s, &TIMERS);
    assert!(bird.contains("local as 4200001000;"));
    assert!(bird.contains("as 4294967294;"));
}

// ---- syntax, with the real tools ----------------------------------------

/// Every switch of every scenario given, both tools: what the daemons will
/// be given must parse.
fn all_configs() -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for path in ["scenarios/fat-tree-k4.toml", "scenarios/hpn.toml"] {
        let lab = lab(path);
        for s in plan::speakers(&lab.fabric) {
            all.push((
                format!("{}-{}", lab.name, s.name),
                config::frr(&s, &TIMERS),
                config::bird(&s, &TIMERS),
            ));
        }
    }
    all
}

#[test]
fn bird_accepts_the_configs() {
    if !installed("bird") {
        eprintln!("bgp_config: BIRD syntax check skipped, `bird` not installed (Debian bird2)");
        return;
    }
    let dir = Scratch::new("bird");
    for (name, _, bird) in all_configs() {
        let file = dir.0.join(format!("{name}.bird.conf"));
        std::fs::write(&file, &bird).unwrap();
        // -p: parse the configuration and exit.
        accepted("bird", &["-p", "-c"], &file, &bird);
    }
}

#[test]
fn frr_accepts_the_configs() {
    if !installed("vtysh") {
        eprintln!("bgp_config: FRR syntax check skipped, `vtysh` not installed (Debian frr)");
        return;
    }
    let dir = Scratch::new("frr");
    for (name, frr, _) in all_configs() {
        let file = dir.0.join(format!("{name}.frr.conf"));
        std::fs::write(&file, &frr).unwrap();
        // --dryrun: parse with every daemon's command grammar, run nothing.
        accepted("vtysh", &["--dryrun", "--inputfile"], &file, &frr);
        if Path::new(BGPD).exists() {
            bgpd_accepts(&dir.0, &file, &frr);
        }
    }
}

const BGPD: &str = "/usr/lib/frr/bgpd";

/// bgpd's own parser: `--dryrun` reads the file and exits, without zebra
/// (-Z), without listening (-p 0) and without changing user (-S), so it
/// also runs unprivileged. It exits 0 even on a bad line and reports it as
/// "<problem> on config line N", so the output is checked too.
fn bgpd_accepts(dir: &Path, file: &Path, text: &str) {
    let out = Command::new(BGPD)
        .args(["--dryrun", "-S", "-Z", "-p", "0", "-f"])
        .arg(file)
        .arg("-i")
        .arg(dir.join("bgpd.pid"))
        .arg("--vty_socket")
        .arg(dir)
        .arg("-z")
        .arg(dir.join("zserv.api"))
        .output()
        .expect("bgpd");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && !all.contains("config line"),
        "bgpd --dryrun {} refused it ({}):\n{all}\n--- file ---\n{text}",
        file.display(),
        out.status
    );
}
