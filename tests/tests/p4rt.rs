//! The P4Runtime path without a switch: `turbonet softswitch` serves
//! P4Runtime, `turbonet plan --program` writes a fabric's plan into it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use turbonet_tests::{binary, run, text, workspace};

/// A soft switch on a free port, killed when dropped.
struct SoftSwitch {
    child: Child,
    addr: String,
}

impl SoftSwitch {
    fn start() -> SoftSwitch {
        let mut child = Command::new(binary())
            .args(["softswitch", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("turbonet softswitch starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .rsplit_once("P4Runtime at ")
            .map(|(_, a)| a.to_owned())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        SoftSwitch { child, addr }
    }
}

impl Drop for SoftSwitch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn plan_programs_a_fat_tree_into_the_soft_switch() {
    let switch = SoftSwitch::start();
    let scenario = workspace().join("scenarios/fat-tree-k4.toml");
    let program = format!("s1={}", switch.addr);
    let base = [
        "plan",
        scenario.to_str().unwrap(),
        "--switch",
        "s1=64x100G",
        "--program",
        &program,
    ];

    // The pipeline's v1model queues are 3 bits: 32 queues per port cannot
    // be programmed, and the error says what to plan with.
    let out = run(&base);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("plan with --queues 8"),
        "{}",
        text(&out)
    );

    let mut args = base.to_vec();
    args.extend(["--queues", "8"]);
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out));
    // 20 virtual switches, 80 virtual ports: 80 port-mapper and 80
    // queue-mapper entries, an ARP and a local entry per switch address,
    // and the static routes; every one read back from the device.
    let shown = text(&out);
    let line = shown
        .lines()
        .find(|l| l.starts_with("programmed s1"))
        .unwrap_or_else(|| panic!("{shown}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let (written, read_back) = (numbers[numbers.len() - 2], numbers[numbers.len() - 1]);
    assert!(read_back >= 160 && read_back < written, "{line}");

    // Programming again replaces the pipeline and its entries.
    let again = run(&args);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains(line.split(" at ").next().unwrap()));
}
