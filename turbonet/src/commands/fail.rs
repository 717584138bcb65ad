//! `turbonet fail`, `restore` and `flap`: take links and nodes down and
//! bring them back.

use anyhow::Result;
use turbonet_api::Target;

use crate::cli::{FlapArgs, TargetArgs, TargetKind};

/// `turbonet fail link|node NAME`.
pub(crate) fn run(args: TargetArgs) -> Result<()> {
    let TargetArgs { kind, name, lab } = args;
    println!("{}", lab.client()?.fail(&target(kind, name))?);
    Ok(())
}

/// `turbonet restore link|node NAME`.
pub(crate) fn restore(args: TargetArgs) -> Result<()> {
    let TargetArgs { kind, name, lab } = args;
    println!("{}", lab.client()?.restore(&target(kind, name))?);
    Ok(())
}

/// `turbonet flap LINK --period P [--count N]`.
pub(crate) fn flap(args: FlapArgs) -> Result<()> {
    let FlapArgs {
        link,
        period,
        count,
        lab,
    } = args;
    let period = period
        .parse::<turbonet_topo::units::Delay>()
        .map_err(|e| turbonet_lab::Error::Invalid(format!("--period {period}: {e}")))?;
    println!(
        "{}",
        lab.client()?.flap(&link, period.as_duration(), count)?
    );
    Ok(())
}

/// What `fail` and `restore` act on, as the control API names it.
fn target(kind: TargetKind, name: String) -> Target {
    match kind {
        TargetKind::Link => Target::Link(name),
        TargetKind::Node => Target::Node(name),
    }
}
