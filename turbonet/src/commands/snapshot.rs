//! `turbonet snapshot`: write the fabric as it stands, for verifiers.

use anyhow::Result;
use turbonet_lab::inspect;

use super::print_json;
use crate::cli::SnapshotArgs;
use crate::render::count;

/// `turbonet snapshot DIR`.
pub(crate) fn run(args: SnapshotArgs) -> Result<()> {
    let SnapshotArgs { dir, lab, json } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let written = turbonet_lab::parts::snapshot(&running, &dir)?;
    if json {
        print_json(&written)?;
    } else {
        println!("{}", snapshot_written(&written));
    }
    Ok(())
}

/// What `turbonet snapshot` says it wrote.
fn snapshot_written(w: &turbonet_lab::inspect::SnapshotWritten) -> String {
    let mut parts = vec![format!(
        "{} switches' forwarding tables ({} routes)",
        count(w.fibs),
        count(w.routes)
    )];
    if w.ribs > 0 {
        parts.push(format!(
            "{} agents' RIBs ({} routes received)",
            count(w.ribs),
            count(w.received)
        ));
    }
    if w.configs > 0 {
        parts.push(format!("{} configuration files", count(w.configs)));
    }
    parts.push(match w.down {
        0 => "nothing down".to_owned(),
        1 => "1 link or node down".to_owned(),
        n => format!("{} links or nodes down", count(n)),
    });
    format!(
        "snapshot written to {}: {}\n  {}",
        w.dir.display(),
        parts.join(", "),
        w.dir.join("snapshot.json").display()
    )
}
