//! Compiles the kernel engine's BPF program (`bpf/link.bpf.c`) with clang
//! into `OUT_DIR/link.bpf.o`, which `src/program.rs` embeds.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "bpf/link.bpf.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("link.bpf.o");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    // <linux/bpf.h> includes <asm/types.h>, which Debian keeps under the
    // host's multiarch directory.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_owned());
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .arg(format!("-I{multiarch}"))
        .args(["-c", source, "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} could not compile {source} ({s}); see its messages above"),
        Err(e) => panic!(
            "cannot run `{clang}` to compile the kernel engine's BPF program ({e}): \
             install clang (Debian/Ubuntu: `apt-get install clang`, as scripts/setup does) \
             or point CLANG at it"
        ),
    }
}
