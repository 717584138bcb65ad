//! `turbonet up`: build a scenario's fabric and wait until it is routed.

use anyhow::Result;
use turbonet_lab::state::LabState;
use turbonet_lab::up;
use turbonet_topo::Lab;

use crate::cli::UpArgs;
use crate::progress::Terminal;
use crate::render::table;

/// `turbonet up`: progress on stderr, then the phases and what to do next.
pub(crate) fn run(args: UpArgs) -> Result<()> {
    let options = up::Options {
        file: args.file,
        threads: args.threads,
        captures_in: None,
        owner: None,
        placement: None,
    };
    let lab = up::up(&options, &Terminal::new(args.quiet))?;
    if !args.quiet {
        println!("{}", up_summary(&lab.lab, &lab.state));
    }
    Ok(())
}

/// The table `up` prints when the fabric is ready.
fn up_summary(lab: &Lab, state: &LabState) -> String {
    let mut out = format!("lab {} is up and routed\n", lab.name);
    out.push_str(&table(
        &["phase", "seconds", "result"],
        state.timings.iter().map(|t| {
            vec![
                t.phase.clone(),
                format!("{:.2}", t.seconds),
                t.detail.clone(),
            ]
        }),
        &[1],
    ));
    let host = lab.fabric.hosts().next().map(|h| h.name.clone());
    out.push_str("\nnext:\n");
    out.push_str("  turbonet status | show nodes | show links | show routes NODE\n");
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        out.push_str("  turbonet show bgp [SWITCH]   # sessions, routes, convergence\n");
    }
    if let Some(host) = host {
        out.push_str(&format!("  turbonet exec {host} -- ip route\n"));
    }
    out.push_str("  turbonet watch          # every link's rates, live\n");
    out.push_str(&format!(
        "  turbonet check          # every host pings every host\n  turbonet down {}\n",
        lab.name
    ));
    if let Some(m) = lab.metrics {
        out.push_str(&format!(
            "metrics: http://{}:{}/metrics{}\n",
            m.address,
            m.port,
            if lab.mgmt.is_some() {
                format!(" (from the nodes: http://mgmt:{}/metrics)", m.port)
            } else {
                String::new()
            }
        ));
    }
    out
}
