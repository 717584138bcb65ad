//! `turbonet worker`: this machine's part of a lab over several.

use std::time::Duration;

use anyhow::Result;
use turbonet_lab::worker;

use crate::cli::WorkerArgs;
use crate::progress::Terminal;

/// `turbonet worker`: runs until SIGTERM or Ctrl-C (its part taken down),
/// saying on stderr what happens to the lab.
pub(crate) fn run(args: WorkerArgs) -> Result<()> {
    let options = worker::Options {
        file: args.file,
        index: args.index,
        of: args.of,
        coordinator: args.coordinator,
        listen: args.listen,
        token_file: args.token_file,
        underlay: args.underlay,
        threads: args.threads,
        rendezvous: Duration::from_secs(args.rendezvous),
    };
    worker::work(&options, &Terminal::new(args.quiet))?;
    Ok(())
}
