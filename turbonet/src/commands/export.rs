//! `turbonet export`: a scenario's fabric as JSON or Graphviz, without
//! building it.

use anyhow::Result;
use turbonet_lab::up;

use crate::cli::{ExportArgs, ExportFormat};

/// `turbonet export FILE`: to `--output`, or standard output.
pub(crate) fn run(args: ExportArgs) -> Result<()> {
    let ExportArgs {
        file,
        format,
        output,
    } = args;
    let valid = up::validate(&file)?;
    let text = match format {
        ExportFormat::Json => {
            let mut t =
                serde_json::to_string_pretty(&turbonet_lab::topology::topology(&valid.lab, None))?;
            t.push('\n');
            t
        }
        ExportFormat::Dot => turbonet_lab::topology::dot(&valid.lab),
    };
    match output {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}
