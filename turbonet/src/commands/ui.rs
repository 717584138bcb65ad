//! `turbonet ui`: a live web page of a running lab.

use anyhow::Result;
use turbonet_lab::inspect;

use crate::cli::UiArgs;
use crate::students;

/// `turbonet ui`: serves until Ctrl-C.
pub(crate) fn run(args: UiArgs) -> Result<()> {
    let UiArgs { lab, listen } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let name = running.lab.name.clone();
    let token = students::page_token()?;
    turbonet_ui::serve(running, listen, token.as_deref(), |url| {
        println!("serving lab {name} at {url} (Ctrl-C to stop)");
    })?;
    Ok(())
}
