//! Compiles `proto/` for prost and tonic without a system `protoc`:
//! `protox` (a protobuf compiler in Rust) parses the files into a
//! `FileDescriptorSet`, and `tonic-prost-build` generates the Rust code from
//! it. The well-known types (`google.protobuf.Any`) come from protox's
//! built-in copies and map to `prost-types`.

use std::env;
use std::fs;
use std::path::PathBuf;

/// The files to compile; their imports are found under `proto/`.
const PROTOS: &[&str] = &[
    "proto/p4/v1/p4runtime.proto",
    "proto/p4/v1/p4data.proto",
    "proto/p4/config/v1/p4info.proto",
    "proto/p4/config/v1/p4types.proto",
    "proto/google/rpc/status.proto",
    "proto/google/rpc/code.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }

    // protox errors carry the file, line and column of the problem.
    let fds = protox::compile(PROTOS, ["proto"]).map_err(|e| format!("{e:?}"))?;

    // Kept for gRPC reflection and for tools that want the schema at run time.
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("p4runtime_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Servers implement only what they support; the rest answers
        // UNIMPLEMENTED, as the specification allows for optional features.
        .generate_default_stubs(true)
        .compile_fds(fds)?;
    Ok(())
}
