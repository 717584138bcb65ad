//! The soft switch as a process (`turbonet softswitch`): its P4Runtime
//! server ([`crate::serve`]) and its packet I/O, raw packet
//! sockets on its interface ports feeding the sans-I/O [`Switch`] and
//! sending what it makes due. One data-plane thread, batched
//! `recvmmsg`/`sendmmsg`, sleeps on `ppoll` with high-resolution timeouts
//! and spins only for the last microseconds before a frame is due (as the
//! link engine does).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use std::{io, thread};

use turbonet_host::namespaces;
use turbonet_packetio::timing::{self, SPIN_NS};
use turbonet_packetio::{Clock, PacketSocket, RxBatch};

use crate::{Device, DeviceConfig, Error, Result, Switch};

/// Frames per `recvmmsg`.
const RX_BATCH: usize = 64;

/// Longest sleep: the controller's PacketOuts arrive on a channel with no
/// file descriptor to wake on.
const MAX_SLEEP: Duration = Duration::from_millis(2);

/// One attached interface port.
struct Port {
    port: u32,
    name: String,
    socket: PacketSocket,
    /// Frames due on it, gathered for one `sendmmsg`.
    due: Vec<Vec<u8>>,
}

/// Opens a packet socket on every interface of `wanted`, inside `ns` (the
/// switch's namespace) when given.
fn attach(ns: Option<&OwnedFd>, wanted: &[(u32, String)]) -> Vec<Port> {
    let open = || {
        wanted
            .iter()
            .filter_map(|(port, name)| {
                let socket = nix::net::if_::if_nametoindex(name.as_str())
                    .map_err(io::Error::from)
                    .and_then(PacketSocket::bind);
                match socket {
                    Ok(socket) => Some(Port {
                        port: *port,
                        name: name.clone(),
                        socket,
                        due: Vec::new(),
                    }),
                    Err(e) => {
                        tracing::warn!("port {port}: cannot attach interface {name}: {e}");
                        None
                    }
                }
            })
            .collect::<Vec<_>>()
    };
    match ns {
        Some(ns) => namespaces::in_namespace(ns, || Ok(open())).unwrap_or_else(|e| {
            tracing::warn!("cannot enter the switch's namespace: {e}");
            Vec::new()
        }),
        None => open(),
    }
}

/// Runs the data plane of `device` until `stop` is set; `base` has the
/// ports used while the pipeline's device config names none.
pub(crate) fn data_plane(
    device: Device,
    base: DeviceConfig,
    ns: Option<OwnedFd>,
    stop: &AtomicBool,
) -> io::Result<()> {
    timing::lower_timer_slack();
    timing::request_realtime();
    let mut packet_out = device.take_packet_out_receiver();
    let mut switch = Switch::with_ports(device, base);
    let clock = Clock::new();
    let mut ports: Vec<Port> = Vec::new();
    let mut generation = None;
    let mut rx = RxBatch::new(RX_BATCH, 65_536);
    let mut out: Vec<(u32, Vec<u8>)> = Vec::with_capacity(RX_BATCH);
    let mut fds: Vec<libc::pollfd> = Vec::new();
    // Port number -> position in `ports`.
    let mut slot: Vec<Option<usize>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        switch.refresh();
        if generation != Some(switch.generation()) {
            generation = Some(switch.generation());
            let wanted = switch.interfaces();
            let attached: Vec<(u32, String)> =
                ports.iter().map(|p| (p.port, p.name.clone())).collect();
            if wanted != attached {
                ports = attach(ns.as_ref(), &wanted);
                slot = vec![None; ports.iter().map(|p| p.port as usize + 1).max().unwrap_or(0)];
                for (i, p) in ports.iter().enumerate() {
                    slot[p.port as usize] = Some(i);
                }
                fds = ports
                    .iter()
                    .map(|p| libc::pollfd {
                        fd: p.socket.as_fd().as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .collect();
            }
        }
        let now = clock.now();
        if let Some(channel) = &mut packet_out {
            while let Ok(packet) = channel.try_recv() {
                switch.packet_out(now, packet);
            }
        }
        for p in &ports {
            loop {
                let n = p.socket.recv_batch(&mut rx)?;
                for f in 0..n {
                    let arrival = clock.arrival(rx.received[f].1, now);
                    switch.receive(arrival, p.port, rx.frame(f));
                }
                if n < RX_BATCH {
                    break;
                }
            }
        }
        let now = clock.now();
        switch.poll_transmit(now, &mut out);
        for (port, frame) in out.drain(..) {
            if let Some(&Some(i)) = slot.get(port as usize) {
                ports[i].due.push(frame);
            }
        }
        for p in &mut ports {
            if !p.due.is_empty() {
                // Frames the kernel refuses (a port going down) are lost
                // on the wire, as they would be.
                let _ = p.socket.send_batch(&p.due);
                p.due.clear();
            }
        }
        let now = clock.now();
        let wait = match switch.next_wakeup() {
            Some(due) if due <= now + SPIN_NS => {
                thread::yield_now();
                continue;
            }
            Some(due) => Duration::from_nanos(due - now - SPIN_NS).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        timing::wait_readable(&mut fds, wait)?;
    }
    Ok(())
}

/// `-i PORT@IFACE` values as a device config of interface ports.
fn interface_ports(values: &[String]) -> Result<crate::DeviceConfig> {
    use crate::{Attach, DeviceConfig, PortConfig};
    let ports = values
        .iter()
        .map(|v| {
            let (port, iface) = v.split_once('@').ok_or_else(|| {
                Error::Usage(format!("-i {v}: expected PORT@IFACE, e.g. 1@veth1"))
            })?;
            let port: u32 = port
                .parse()
                .map_err(|_| Error::Usage(format!("-i {v}: port `{port}` is not a number")))?;
            Ok(PortConfig {
                port,
                attach: Attach::Interface(iface.to_owned()),
                queues: Vec::new(),
                line_rate_bps: None,
                line_limit_bytes: None,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let config = DeviceConfig { ports, seed: 0 };
    config
        .validate()
        .map_err(|e| Error::Usage(format!("-i: {e}")))?;
    Ok(config)
}

/// Where the soft switch serves P4Runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket, root's only (mode 0600): how a lab's own soft switch
    /// serves its daemon.
    Unix(std::path::PathBuf),
    /// TCP, for controllers elsewhere: each call must carry `token` (as
    /// `authorization: Bearer TOKEN`); `None` only when asked for
    /// explicitly (`--insecure`), for a switch no one else can reach.
    Tcp {
        /// The address (port 0: any free port).
        addr: std::net::SocketAddr,
        /// The token clients must present.
        token: Option<String>,
    },
}

impl std::str::FromStr for Listen {
    type Err = String;

    /// `unix:PATH` or `HOST:PORT` (a TCP listen without its token yet).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            return Ok(Listen::Unix(path.into()));
        }
        s.parse()
            .map(|addr| Listen::Tcp { addr, token: None })
            .map_err(|_| format!("`{s}`: give unix:PATH or HOST:PORT, e.g. 127.0.0.1:9559"))
    }
}

impl Listen {
    /// Completes a TCP listen with its token: read from (or created at)
    /// `token_file`, or none when `insecure`. A TCP listen needs one or the
    /// other; a Unix socket (root's only) needs neither.
    pub fn secured(self, token_file: Option<&std::path::Path>, insecure: bool) -> Result<Listen> {
        match (self, token_file) {
            (Listen::Unix(path), None) => Ok(Listen::Unix(path)),
            (Listen::Unix(_), Some(_)) => Err(Error::Usage(
                "--token-file applies to a TCP --listen; a unix: socket is root's only".into(),
            )),
            (Listen::Tcp { addr, .. }, Some(file)) => Ok(Listen::Tcp {
                addr,
                token: Some(token_from(file)?),
            }),
            (Listen::Tcp { addr, .. }, None) if insecure => Ok(Listen::Tcp { addr, token: None }),
            (Listen::Tcp { addr, .. }, None) => Err(Error::Usage(format!(
                "serving P4Runtime on {addr} lets anyone who reaches it reprogram the switch: \
                 give --token-file FILE (clients present its token), --insecure, \
                 or --listen unix:PATH"
            ))),
        }
    }
}

/// A bearer token from `path`, or, when the file does not exist, a new
/// random one written there (mode 0600, root's).
pub fn token_from(path: &std::path::Path) -> Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use turbonet_host::error::Context;
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_owned()),
        Ok(_) => {
            return Err(Error::Usage(format!("{} is empty", path.display())));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Ok(Err(e).with_context(|| format!("reading {}", path.display()))?);
        }
        Err(_) => {}
    }
    let token = turbonet_host::random_hex(24)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    writeln!(file, "{token}").with_context(|| format!("writing {}", path.display()))?;
    Ok(token)
}

/// `turbonet softswitch`: serves P4Runtime for one soft-switch device on
/// `listen` and runs its data plane until Ctrl-C or SIGTERM. Its interface
/// ports are looked up in namespace `netns` (default: its own); `serving`
/// hears where it listens, once it accepts connections; `stopping` hears
/// which signal stops it.
pub fn run(
    listen: &Listen,
    device_id: u64,
    netns: Option<&str>,
    interfaces: &[String],
    serving: impl FnOnce(&str),
    stopping: impl FnOnce(&str),
) -> Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use turbonet_host::error::Context;

    turbonet_host::process::name_self();
    let base = interface_ports(interfaces)?;
    let ns = netns
        .map(|name| {
            turbonet_host::namespaces::open(name)
                .with_context(|| format!("opening namespace {name}"))
        })
        .transpose()?;
    let device = crate::Device::new(device_id);
    let stop = Arc::new(AtomicBool::new(false));
    let data_plane = {
        let (device, stop) = (device.clone(), stop.clone());
        std::thread::Builder::new()
            .name("data-plane".into())
            .spawn(move || data_plane(device, base, ns, &stop))?
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let handle = match listen {
            Listen::Unix(path) => {
                let handle = crate::serve_unix(path, device).await?;
                serving(&format!("unix:{}", path.display()));
                handle
            }
            Listen::Tcp { addr, token } => {
                let (bound, handle) = crate::serve_tcp(*addr, device, token.clone()).await?;
                serving(&bound.to_string());
                handle
            }
        };
        let mut terminate = signal(SignalKind::terminate())?;
        let why = tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        };
        stopping(why);
        let _ = handle.shutdown().await;
        Ok::<_, Error>(())
    });
    stop.store(true, Ordering::Relaxed);
    let ran = data_plane
        .join()
        .map_err(|_| Error::Failed("the data plane panicked".into()))?;
    served?;
    ran.context("data plane")?;
    Ok(())
}
