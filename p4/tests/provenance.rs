//! p4c's outputs of `p4/turbonet.p4` (`p4/build/`) are those of the source
//! as it is: `p4/build/PROVENANCE.toml` records the sha256 of the source
//! p4c compiled and of what it wrote, and `scripts/compile-p4` rewrites
//! all three. Editing the program without recompiling fails here.

use std::path::Path;

use sha2::{Digest, Sha256};

fn crate_file(path: &str) -> Vec<u8> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("reading {}: {e}", full.display()))
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The value of `"key" = "value"` in the provenance file.
fn recorded(provenance: &str, key: &str) -> String {
    let prefix = format!("\"{key}\" = \"");
    provenance
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.strip_suffix('"'))
        .unwrap_or_else(|| panic!("p4/build/PROVENANCE.toml records no {key}"))
        .to_owned()
}

#[test]
fn the_compiled_pipeline_is_p4cs_of_the_source_as_it_is() {
    let provenance = String::from_utf8(crate_file("build/PROVENANCE.toml")).unwrap();
    for (file, key) in [
        ("turbonet.p4", "p4/turbonet.p4"),
        ("build/turbonet.json", "p4/build/turbonet.json"),
        (
            "build/turbonet.p4info.txtpb",
            "p4/build/turbonet.p4info.txtpb",
        ),
    ] {
        assert_eq!(
            sha256(&crate_file(file)),
            recorded(&provenance, key),
            "{key} is not what p4/build/PROVENANCE.toml records: after changing \
             p4/turbonet.p4, run scripts/compile-p4 and commit p4/build/"
        );
    }
    for field in ["p4c_version", "p4c_commit", "bmv2_version", "command"] {
        assert!(
            provenance
                .lines()
                .any(|l| l.starts_with(&format!("{field} = \""))),
            "p4/build/PROVENANCE.toml lacks {field}"
        );
    }
}
