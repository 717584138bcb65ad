//! What a built-in speaker needs of its switch's namespace: the BGP
//! listener, the connections it opens and the FIB, all created inside the
//! namespace; the speaker itself ([`turbonet_routing::bgp::speaker`]) and
//! its driver know nothing of namespaces.

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::rc::Rc;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use turbonet_routing::bgp::PORT;
use turbonet_routing::bgp::plan::Speaker;
use turbonet_routing::bgp::speaker_driver::Connector;
use turbonet_topo::Lab;

use super::fib::{AnyFib, NetlinkFib, PipelineFib};
use crate::dataplane::agent_routes::PipelineRoutes;
use crate::error::{Context, Result};
use turbonet_host::kernel::nexthop::{NexthopSocket, Protocol};
use turbonet_host::namespaces;

/// A switch's namespace, its BGP listener and its FIB.
pub(super) struct SwitchSockets {
    /// The namespace (for connections).
    pub(super) ns: Rc<OwnedFd>,
    /// Port 179, listening (on the connections' runtime).
    pub(super) listener: TcpListener,
    /// The FIB: the namespace's kernel table, or its share of a pipeline.
    pub(super) fib: AnyFib,
}

impl SwitchSockets {
    /// Opens them for `speaker`: the FIB is its namespace's kernel table,
    /// or with `pipeline` its share of the pipeline's routes. The listener
    /// belongs to `connections`, the runtime of the speaker's connections,
    /// and the kernel table's writes to `fib`.
    pub(super) fn open(
        lab: &Lab,
        speaker: &Speaker,
        pipeline: Option<&Rc<PipelineRoutes>>,
        connections: &tokio::runtime::Handle,
        fib: &tokio::runtime::Handle,
    ) -> Result<SwitchSockets> {
        let ns_name = crate::names::node_namespace(&lab.name, &speaker.name);
        let ns = Rc::new(namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?);
        let listener = namespaces::here_in_namespace(&*ns, || {
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
                {
                    let socket = namespaces::here_in_namespace(&*ns, namespaces::route_socket)?;
                    let _entered = fib.enter();
                    turbonet_host::kernel::connect(socket)?
                },
                namespaces::here_in_namespace(&*ns, || NexthopSocket::new(Protocol::Bgp))?,
                lab.fabric
                    .ports(speaker.node)
                    .enumerate()
                    .map(|(port, (_, local, _))| {
                        (local.ifname.clone(), crate::names::port_ifindex(port))
                    })
                    .collect(),
                fib.clone(),
                !lab.routing
                    .spells_out_next_hops(lab.fabric.switches().count()),
            )),
        };
        let listener = {
            let _entered = connections.enter();
            TcpListener::from_std(listener)?
        };
        Ok(SwitchSockets { ns, listener, fib })
    }
}

/// Opens a speaker's connections from inside its switch's namespace: the
/// socket is created and bound there, synchronously; the handshake is the
/// future (the driver abandons it when the session's ConnectRetry fires).
pub(super) struct NamespaceConnector(pub(super) Rc<OwnedFd>);

impl Connector for NamespaceConnector {
    fn connect(
        &mut self,
        local: Ipv4Addr,
        remote: SocketAddrV4,
    ) -> impl Future<Output = io::Result<TcpStream>> + Send + 'static {
        let socket = namespaces::here_in_namespace(&*self.0, || {
            let socket = socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::STREAM,
                Some(socket2::Protocol::TCP),
            )?;
            socket.set_nonblocking(true)?;
            socket.bind(&SocketAddr::from(SocketAddrV4::new(local, 0)).into())?;
            Ok(std::net::TcpStream::from(socket))
        });
        async move {
            let stream = TcpSocket::from_std_stream(socket?)
                .connect(remote.into())
                .await?;
            stream.set_nodelay(true)?;
            Ok(stream)
        }
    }
}
