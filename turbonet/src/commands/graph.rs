//! `turbonet graph`: the fabric drawn by tiers, planned or running.

use anyhow::Result;
use turbonet_lab::{inspect, up};

use crate::cli::{self, GraphArgs};

/// `turbonet graph [FILE|LAB]`.
pub(crate) fn run(args: GraphArgs) -> Result<()> {
    let GraphArgs {
        what,
        output,
        format,
        pod,
        segment,
        plane,
        max_per_tier,
    } = args;
    graph(
        what.as_deref(),
        output.as_deref(),
        format,
        turbonet_graph::Filter {
            pod,
            segment,
            plane,
        },
        max_per_tier,
    )
}

/// `turbonet graph`: a scenario file drawn as planned, or a running lab
/// with what is down and each link's load.
fn graph(
    what: Option<&str>,
    output: Option<&std::path::Path>,
    format: cli::GraphFormat,
    filter: turbonet_graph::Filter,
    max_per_tier: usize,
) -> anyhow::Result<()> {
    let is_file = what.is_some_and(|w| w.ends_with(".toml") || std::path::Path::new(w).is_file());
    let (lab, state, title) = match what {
        Some(file) if is_file => {
            let valid = up::validate(std::path::Path::new(file))?;
            let title = format!("{} (planned)", valid.lab.name);
            (valid.lab, turbonet_graph::State::default(), title)
        }
        name => {
            let running = inspect::running(name)?;
            let state = turbonet_lab::graph::state(&running)?;
            let title = format!("{} (running)", running.lab.name);
            (running.lab.clone(), state, title)
        }
    };
    let picture = turbonet_graph::layout(&lab.fabric, &filter, max_per_tier);
    if picture.shown == 0 {
        anyhow::bail!(
            "nothing to draw: no node of lab {} matches the filter",
            lab.name
        );
    }
    let text = match format {
        cli::GraphFormat::Svg => turbonet_graph::svg(&picture, &lab.fabric, &state, &title),
        cli::GraphFormat::Dot => turbonet_graph::dot(&picture, &lab.fabric, &state, &title),
    };
    match output {
        Some(path) => {
            std::fs::write(path, text)
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            eprintln!(
                "{}: {} of {} nodes, {} of {} links{}",
                path.display(),
                picture.shown,
                lab.fabric.nodes.len(),
                picture.links,
                lab.fabric.links.len(),
                if picture.summarised {
                    " (wide tiers grouped: --pod, --segment, --plane draw a part node by node)"
                } else {
                    ""
                }
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}
