//! `turbonet softswitch`: run turbonet's soft switch, a P4Runtime device,
//! until Ctrl-C.

use anyhow::Result;

use crate::cli::SoftswitchArgs;

/// `turbonet softswitch`: says where it listens, and why it stops.
pub(crate) fn run(args: SoftswitchArgs) -> Result<()> {
    use std::io::Write;
    let SoftswitchArgs {
        listen,
        token_file,
        insecure,
        device_id,
        netns,
        interfaces,
    } = args;
    let listen = listen
        .secured(token_file.as_deref(), insecure)
        .map_err(turbonet_lab::Error::from)?;
    turbonet_softswitch::run(
        &listen,
        device_id,
        netns.as_deref(),
        &interfaces,
        |addr| {
            println!("turbonet soft switch: device {device_id}, P4Runtime at {addr}");
            let _ = std::io::stdout().flush();
        },
        |why| println!("turbonet soft switch: {why}, stopping"),
    )
    .map_err(turbonet_lab::Error::from)?;
    Ok(())
}
