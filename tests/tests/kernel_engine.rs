//! The kernel impairment engines — netem, and the kernel engine
//! (turbonet's BPF program holding frames in fq) — tested where their
//! qdiscs exist: a Debian 12 VM booted with qemu (this kernel, and CI's,
//! have neither sch_netem nor sch_fq). The VM image is built once with
//! debootstrap and cached under /var/tmp/turbonet-vm; a run boots it in
//! about 20 s.

use turbonet_tests::{binary, require_root, workspace};

#[test]
fn kernel_engines_carry_links_in_a_vm() {
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
    // The VM saw netem, then the kernel engine, carry both links with the
    // delay the scenario declares, and a TCP flow pass the kernel engine
    // unhindered by the sender's small-queue limit.
    for line in [
        "vm: sch_netem loaded",
        "vm: netem: rtt",
        "vm: sch_fq loaded",
        "vm: bpf: rtt",
        "vm: bpf: TCP over 200 ms",
    ] {
        assert!(stdout.contains(line), "no `{line}` in\n{stdout}");
    }
}
