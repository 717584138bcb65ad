//! The P4 targets' control plane: what turbonet writes into a switch that
//! runs the turbonet pipeline (`p4/turbonet.p4`), and the P4Runtime client
//! that writes it.
//!
//! [`entries`] turns a lab, its mapping onto physical switches
//! ([`turbonet_topo::mapper`]) and its routes into P4Runtime entities for
//! one physical switch; [`client`] connects to a device, becomes primary,
//! sets the pipeline and writes them.

pub mod client;
pub mod entries;

/// `turbonet softswitch`: serves P4Runtime for one soft-switch device
/// until Ctrl-C or SIGTERM.
pub fn softswitch(
    listen: std::net::SocketAddr,
    device_id: u64,
) -> anyhow::Result<std::process::ExitCode> {
    use std::io::Write;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let device = turbonet_softswitch::Device::new(device_id);
        let (addr, handle) = turbonet_softswitch::serve(listen, device)
            .await
            .map_err(|e| anyhow::anyhow!("serving P4Runtime on {listen}: {e}"))?;
        println!("turbonet soft switch: device {device_id}, P4Runtime at {addr}");
        std::io::stdout().flush()?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        let _ = handle.shutdown().await;
        Ok(std::process::ExitCode::SUCCESS)
    })
}
