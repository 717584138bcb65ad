//! A built-in agent's sessions: sockets created in the switch's namespace,
//! one task per neighbour running the session driver over its connection.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::Duration;

use crate::error::{Context, Result};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch};
use turbonet_routing::bgp::PORT;
use turbonet_routing::bgp::driver::run_session;
use turbonet_routing::bgp::plan::{Neighbour, Speaker};
use turbonet_routing::bgp::session::{Session, SessionConfig};
use turbonet_topo::{BgpTimers, Lab};

use super::AgentEvent;
use super::fib::{AnyFib, NetlinkFib, PipelineFib, PipelineRoutes};
use crate::system::namespaces;

/// What a built-in agent needs of its switch's namespace: a handle on it,
/// the BGP listener and the FIB, all created inside it.
pub(super) struct SwitchSockets {
    pub(super) ns: Rc<OwnedFd>,
    pub(super) listener: TcpListener,
    pub(super) fib: AnyFib,
}

impl SwitchSockets {
    /// The sockets in the switch's namespace, and its FIB: the
    /// namespace's kernel table, or its share of `pipeline`.
    pub(super) fn open(
        lab: &Lab,
        speaker: &Speaker,
        pipeline: Option<&Rc<PipelineRoutes>>,
    ) -> Result<SwitchSockets> {
        let ns_name = crate::names::node_namespace(&lab.name, &speaker.name);
        let ns = Rc::new(namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?);
        let listener = namespaces::in_namespace(&*ns, || {
            let socket = socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::STREAM,
                Some(socket2::Protocol::TCP),
            )?;
            socket.set_reuse_address(true)?;
            socket.set_nonblocking(true)?;
            socket.bind(&SocketAddr::from(([0, 0, 0, 0], PORT)).into())?;
            socket.listen(1024)?;
            Ok(std::net::TcpListener::from(socket))
        })
        .with_context(|| format!("{}: listening on port {PORT}", speaker.name))?;
        let fib = match pipeline {
            Some(table) => {
                AnyFib::Pipeline(PipelineFib::new(speaker.node.0 as usize, table.clone()))
            }
            None => AnyFib::Netlink(NetlinkFib::new(
                crate::kernel::connect(namespaces::in_namespace(&*ns, namespaces::route_socket)?)?,
                lab.fabric
                    .ports(speaker.node)
                    .enumerate()
                    .map(|(port, (_, local, _))| {
                        (local.ifname.clone(), crate::names::port_ifindex(port))
                    })
                    .collect(),
            )),
        };
        Ok(SwitchSockets {
            ns,
            listener: TcpListener::from_std(listener)?,
            fib,
        })
    }
}

/// Starts one task per session of `speaker` and the task that hands each
/// accepted connection to its session; returns the port-state senders of
/// the sessions, by interface.
pub(super) fn spawn_sessions(
    speaker: &Speaker,
    ns: Rc<OwnedFd>,
    listener: TcpListener,
    timers: &BgpTimers,
    events: &mpsc::UnboundedSender<AgentEvent>,
) -> HashMap<String, Vec<watch::Sender<bool>>> {
    let mut accepted = Vec::new();
    let mut ports: HashMap<String, Vec<watch::Sender<bool>>> = HashMap::new();
    for (n, neighbour) in speaker.neighbours.iter().enumerate() {
        let (accept_tx, accept_rx) = mpsc::unbounded_channel();
        accepted.push((neighbour.peer_addr, accept_tx));
        let (port_tx, port_rx) = watch::channel(true);
        ports
            .entry(neighbour.ifname.clone())
            .or_default()
            .push(port_tx);
        tokio::task::spawn_local(run_neighbour(
            ns.clone(),
            n,
            session_config(speaker, neighbour, timers),
            neighbour.clone(),
            Duration::from_secs(timers.connect_retry.into()),
            events.clone(),
            accept_rx,
            port_rx,
        ));
    }
    tokio::task::spawn_local(accept(listener, accepted));
    ports
}

/// The session configuration of one neighbour, with the lab's timers.
fn session_config(speaker: &Speaker, neighbour: &Neighbour, timers: &BgpTimers) -> SessionConfig {
    let mut config = SessionConfig::new(speaker.asn, speaker.router_id);
    config.peer_as = Some(neighbour.peer_asn);
    config.hold_time = timers.hold_time;
    config.keepalive = Some(timers.keepalive);
    config.connect_retry = Duration::from_secs(timers.connect_retry.into());
    config.passive = neighbour.passive;
    config.idle_hold = Duration::from_millis(100);
    config
}

/// Hands each accepted connection to the session of the neighbour it
/// comes from; connections from anyone else are closed.
async fn accept(
    listener: TcpListener,
    neighbours: Vec<(Ipv4Addr, mpsc::UnboundedSender<TcpStream>)>,
) {
    loop {
        let Ok((stream, from)) = listener.accept().await else {
            continue;
        };
        let SocketAddr::V4(from) = from else { continue };
        if let Some((_, tx)) = neighbours.iter().find(|(addr, _)| addr == from.ip()) {
            let _ = tx.send(stream);
        }
    }
}

/// One neighbour's connections, one after the other: wait until the port
/// is up, connect (the active end) or take the connection the peer opened
/// (the passive end), run the session until it ends, start again.
#[allow(clippy::too_many_arguments)]
async fn run_neighbour(
    ns: Rc<OwnedFd>,
    n: usize,
    config: SessionConfig,
    neighbour: Neighbour,
    retry: Duration,
    events: mpsc::UnboundedSender<AgentEvent>,
    mut accepted: mpsc::UnboundedReceiver<TcpStream>,
    mut port: watch::Receiver<bool>,
) {
    let peer = SocketAddrV4::new(neighbour.peer_addr, PORT);
    loop {
        while !*port.borrow_and_update() {
            if port.changed().await.is_err() {
                return;
            }
        }
        // Connections that arrived while the port was down are stale.
        while accepted.try_recv().is_ok() {}
        let stream = if neighbour.passive {
            tokio::select! {
                s = accepted.recv() => match s { Some(s) => s, None => return },
                _ = port.changed() => continue,
            }
        } else {
            // Active, but a router outside the fabric may connect first.
            tokio::select! {
                s = accepted.recv() => match s { Some(s) => s, None => return },
                c = connect(&ns, neighbour.local_addr, peer, retry) => match c {
                    Ok(s) => s,
                    Err(_) => {
                        tokio::time::sleep(retry).await;
                        continue;
                    }
                },
            }
        };
        let _ = stream.set_nodelay(true);
        let (tx, rx) = mpsc::unbounded_channel();
        if events.send(AgentEvent::Connected(n, tx)).is_err() {
            return;
        }
        let reports = events.clone();
        run_session(
            Session::new(config.clone()),
            stream,
            move |e| drop(reports.send(AgentEvent::Driver(n, e))),
            rx,
        )
        .await;
        tokio::time::sleep(config.idle_hold).await;
    }
}

/// Opens a connection from `local` (inside the switch's namespace) to
/// `peer`, giving up after `timeout`.
async fn connect(
    ns: &OwnedFd,
    local: Ipv4Addr,
    peer: SocketAddrV4,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let socket = namespaces::in_namespace(ns, || {
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_nonblocking(true)?;
        socket.bind(&SocketAddr::from(SocketAddrV4::new(local, 0)).into())?;
        Ok(std::net::TcpStream::from(socket))
    })?;
    let socket = TcpSocket::from_std_stream(socket);
    tokio::time::timeout(timeout, socket.connect(peer.into()))
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}
