//! `turbonet serve`: serve labs to the members of a group, as root.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::ServeArgs;
use crate::students;

/// `turbonet serve`: runs each member's request as
/// [`students::admit`] allows; returns only in a request's own process,
/// with that request's exit code.
pub(crate) fn run(args: ServeArgs) -> Result<ExitCode> {
    let ServeArgs { socket, config } = args;
    if !turbonet_host::process::is_root() {
        anyhow::bail!("turbonet serve runs as root (it acts for the group's members)");
    }
    let policy = turbonet_lab::serve::Policy::load(&config)?;
    // Requests run from `/`: a relative labs folder is the one here.
    turbonet_course::fix_labs_dir();
    // Returns in a request's own process only.
    let (student, request, file) = turbonet_lab::serve::serve(&socket, &policy)?;
    Ok(students::run_for(&student, request, file))
}
