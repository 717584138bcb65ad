//! The kernel impairment engine (netem), tested where netem exists: a
//! Debian 12 VM booted with qemu (this kernel, and CI's, have no sch_netem).
//! The VM image is built once with debootstrap and cached under
//! /var/tmp/turbonet-vm; a run boots it in about 20 s.

use turbonet_tests::{binary, require_root, workspace};

#[test]
fn kernel_engine_applies_netem_in_a_vm() {
    require_root!();
    let script = workspace().join("scripts/vm-kernel-engine-test");
    let out = std::process::Command::new(&script)
        .arg(binary())
        .output()
        .expect("the VM test script runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("TN-VM-RESULT: PASS"),
        "kernel engine in the VM failed (console: /var/tmp/turbonet-vm/console.log)\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The VM saw netem carry both links, with the delay the scenario declares.
    assert!(stdout.contains("vm: sch_netem loaded"), "{stdout}");
    assert!(stdout.contains("vm: rtt"), "{stdout}");
}
