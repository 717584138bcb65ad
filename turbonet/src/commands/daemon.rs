//! `turbonet daemon`: the per-lab daemon `up` starts, its supervisor and
//! its BGP shards.

use anyhow::Result;
use turbonet_lab::daemon;

use crate::cli::DaemonArgs;

/// `turbonet daemon LAB`: the supervisor, `--worker` the daemon itself,
/// `--bgp-shard` a shard of its BGP speakers.
pub(crate) fn run(args: DaemonArgs) -> Result<()> {
    let DaemonArgs {
        lab,
        worker,
        restarts,
        bgp_shard,
        epoch_ns,
    } = args;
    if let Some((index, count)) = bgp_shard {
        daemon::bgp_shard(&lab, index, count, epoch_ns, restarts > 0)?;
    } else if worker {
        daemon::work(&lab, restarts)?;
    } else {
        daemon::supervise(&lab)?;
    }
    Ok(())
}
