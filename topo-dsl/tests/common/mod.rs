//! Helpers the scenario-language tests share: parse or collect the located
//! errors, and compare with golden files.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};

/// Two hosts behind one switch (links `h1--s1` and `h2--s1`), lab `m`: the
/// smallest fabric a section's tests can lay over.
pub(crate) const TWO_HOSTS: &str = r#"[lab]
name = "m"
[topology]
kind = "custom"
nodes = [
  { name = "h1", role = "host" },
  { name = "s1", role = "switch" },
  { name = "h2", role = "host" },
]
links = [{ a = "h1", b = "s1" }, { a = "h2", b = "s1" }]
"#;

/// Parses a scenario that must be valid.
pub(crate) fn ok(text: &str) -> turbonet_topo::Lab {
    turbonet_topo::parse("t.toml", text).unwrap_or_else(|e| panic!("{}", e.render_plain(100)))
}

/// (line, column, message, help) of every error of a scenario that must be
/// invalid.
pub(crate) fn errors(text: &str) -> Vec<(usize, usize, String, String)> {
    match turbonet_topo::parse("t.toml", text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e
            .iter()
            .map(|x| {
                let (l, c) = x.line_col().unwrap_or((0, 0));
                (
                    l,
                    c,
                    x.message().to_owned(),
                    x.help().unwrap_or("").to_owned(),
                )
            })
            .collect(),
    }
}

/// Where golden files live.
pub(crate) fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Compares `actual` with the golden file `name`, or rewrites it when
/// `UPDATE_GOLDEN` is set.
pub(crate) fn check_golden(name: &str, actual: &str) {
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
            .zip(actual.lines())
            .enumerate()
            .find(|(_, (e, a))| e != a)
            .map_or((0, ("<length differs>", "")), |(i, p)| (i + 1, p));
        panic!(
            "{name} differs from the golden file at line {line}:\n  expected: {e}\n  actual:   {a}\n(run with UPDATE_GOLDEN=1 to accept)"
        );
    }
}
