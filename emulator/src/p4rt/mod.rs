//! The P4 targets' control plane: what turbonet writes into a switch that
//! runs the turbonet pipeline (`p4/turbonet.p4`), and the P4Runtime client
//! that writes it.
//!
//! [`entries`] turns a lab, its mapping onto physical switches
//! ([`turbonet_topo::mapper`]) and its routes into P4Runtime entities for
//! one physical switch; [`client`] connects to a device, becomes primary,
//! sets the pipeline and writes them; [`session`] keeps a device in step
//! by writing differences, and [`control`] says what a lab's switch must
//! hold as its routes, links and failures change.
//!
//! The `soft` target: [`soft`] plans the lab onto one soft switch,
//! [`build`] creates its hosts and their ports, and [`driver`] is the soft
//! switch's packet I/O (`turbonet softswitch`).

pub mod build;
pub mod control;
pub mod cpu;
pub mod driver;
pub mod entries;
pub mod session;
pub mod soft;
pub mod switches;

/// `-i PORT@IFACE` values as a device config of interface ports.
fn interface_ports(values: &[String]) -> anyhow::Result<turbonet_softswitch::DeviceConfig> {
    use turbonet_softswitch::{Attach, DeviceConfig, PortConfig};
    let ports = values
        .iter()
        .map(|v| {
            let (port, iface) = v
                .split_once('@')
                .ok_or_else(|| anyhow::anyhow!("-i {v}: expected PORT@IFACE, e.g. 1@veth1"))?;
            let port: u32 = port
                .parse()
                .map_err(|_| anyhow::anyhow!("-i {v}: port `{port}` is not a number"))?;
            Ok(PortConfig {
                port,
                attach: Attach::Interface(iface.to_owned()),
                queues: Vec::new(),
                line_rate_bps: None,
                line_limit_bytes: None,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let config = DeviceConfig { ports, seed: 0 };
    config.validate().map_err(|e| anyhow::anyhow!("-i: {e}"))?;
    Ok(config)
}

/// `turbonet softswitch`: serves P4Runtime for one soft-switch device and
/// runs its data plane until Ctrl-C or SIGTERM. Its interface ports are
/// looked up in namespace `netns` (default: its own); the address it
/// listens on goes to stdout and, when given, to `address_file` (written
/// once it accepts connections).
pub fn softswitch(
    listen: std::net::SocketAddr,
    device_id: u64,
    netns: Option<&str>,
    address_file: Option<&std::path::Path>,
    interfaces: &[String],
) -> anyhow::Result<std::process::ExitCode> {
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use anyhow::Context;

    let base = interface_ports(interfaces)?;
    let ns = netns
        .map(|name| crate::netns::open(name).with_context(|| format!("opening namespace {name}")))
        .transpose()?;
    let device = turbonet_softswitch::Device::new(device_id);
    let stop = Arc::new(AtomicBool::new(false));
    let data_plane = {
        let (device, stop) = (device.clone(), stop.clone());
        std::thread::Builder::new()
            .name("data-plane".into())
            .spawn(move || driver::run(device, base, ns, &stop))?
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (addr, handle) = turbonet_softswitch::serve(listen, device)
            .await
            .map_err(|e| anyhow::anyhow!("serving P4Runtime on {listen}: {e}"))?;
        println!("turbonet soft switch: device {device_id}, P4Runtime at {addr}");
        std::io::stdout().flush()?;
        if let Some(path) = address_file {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, addr.to_string())
                .and_then(|()| std::fs::rename(&tmp, path))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let mut terminate = signal(SignalKind::terminate())?;
        let why = tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        };
        println!("turbonet soft switch: {why}, stopping");
        let _ = handle.shutdown().await;
        Ok::<_, anyhow::Error>(())
    });
    stop.store(true, Ordering::Relaxed);
    let ran = data_plane
        .join()
        .map_err(|_| anyhow::anyhow!("the data plane panicked"))?;
    served?;
    ran.context("data plane")?;
    Ok(std::process::ExitCode::SUCCESS)
}
