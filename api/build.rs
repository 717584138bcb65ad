//! Compiles the control API (`proto/turbonet/v1/lab.proto`, in this
//! crate) and the workers' (`workers.proto`) for prost and tonic with
//! `protox`, a protobuf compiler in Rust: no system `protoc`. The well-known types
//! (`google.protobuf.Duration`) come with protox and map to `prost-types`.

use std::env;
use std::fs;
use std::path::PathBuf;

const PROTOS: [&str; 2] = [
    "proto/turbonet/v1/lab.proto",
    "proto/turbonet/v1/workers.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(PROTOS, ["proto"]).map_err(|e| format!("{e:?}"))?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    // Kept for gRPC reflection and for clients that want the schema.
    fs::write(
        out_dir.join("turbonet_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
