//! A lab over several machines, on the wire: worker 0 serves the
//! `turbonet.v1.Workers` service on the underlay and drives the
//! coordinator ([`turbonet_cluster::Coordinator`]) with what its workers
//! say; every worker attends it through one stream ([`Attendance`]),
//! worker 0's own in-process. Every call carries the lab's token.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use turbonet_api::proto::coordinator_says::Says as CoordinatorMessage;
use turbonet_api::proto::parts_client::PartsClient;
use turbonet_api::proto::parts_server::{Parts, PartsServer};
use turbonet_api::proto::worker_says::Says as WorkerMessage;
use turbonet_api::proto::workers_client::WorkersClient;
use turbonet_api::proto::workers_server::{Workers, WorkersServer};
use turbonet_api::proto::{
    self as wire, BuildPart, CoordinatorSays, Empty, PartCheckRequest, PeerCarrier, Repoint,
    WorkerHello, WorkerSays,
};
use turbonet_cluster::{Change, Conn, Coordinator, Hello, Input, Output, Phase, Settings};

use crate::error::{Error, Result};

/// What the coordinator tells a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// Build your part, with every machine's underlay address (by index)
    /// and the lab's UDP port.
    Build {
        /// Every machine's underlay address.
        underlays: Vec<IpAddr>,
        /// The lab's UDP port.
        port: u16,
    },
    /// Machine `peer` is now at `underlay`.
    Repoint {
        /// The machine.
        peer: usize,
        /// Its new address.
        underlay: IpAddr,
    },
    /// Take the cut links to machine `peer` down, or back up.
    Carrier {
        /// The machine.
        peer: usize,
        /// Up or down.
        up: bool,
    },
    /// A link or node was failed or restored at another machine: do the
    /// same here.
    Change(Change),
    /// The lab's phase.
    Phase(Phase),
    /// Refused, and why: the stream ends.
    Refused(String),
}

/// What a worker tells the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tell {
    /// It built its part.
    Built,
    /// It could not, and why.
    BuildFailed(String),
    /// It is alive.
    Heartbeat,
    /// A link or node was failed or restored here: the other machines
    /// are to follow.
    Change(Change),
}

/// A worker's stream to the coordinator: what it is told, and where it
/// tells. It ends (`told` yields `None`) when the coordinator goes.
#[derive(Debug)]
pub struct Attendance {
    /// What the coordinator tells it, in order.
    pub told: mpsc::Receiver<Told>,
    /// What it tells the coordinator.
    pub tell: mpsc::Sender<Tell>,
}

/// The coordinator, running: where it listens, and the lab's phase.
#[derive(Debug)]
pub struct Coordinating {
    /// The address it serves on.
    pub addr: SocketAddr,
    /// The lab's phase, as the coordinator last said.
    pub phase: watch::Receiver<Phase>,
    task: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Coordinating {
    fn drop(&mut self) {
        self.task.abort();
        self.server.abort();
    }
}

/// What reaches the coordinator's loop.
enum Event {
    /// A connection opened, to be told through `to`.
    Open { conn: Conn, to: mpsc::Sender<Told> },
    /// A connection said something.
    Said(Input),
}

/// Starts the coordinator of a lab over `own.of` machines on `listener`,
/// refusing calls without `token`; `own` is worker 0's hello, whose
/// attendance (in-process) comes back with it. `also` are services the
/// same server offers beside (a worker's [`parts`]).
pub fn coordinate(
    listener: tokio::net::TcpListener,
    token: String,
    own: Hello,
    settings: Settings,
    also: Option<tonic::service::Routes>,
) -> Result<(Coordinating, Attendance)> {
    let addr = listener.local_addr()?;
    let origin = Instant::now();
    let (coordinator, first) = Coordinator::new(own, settings, Duration::ZERO);
    let (events, mut heard) = mpsc::channel::<Event>(1024);
    let (phase_tx, phase) = watch::channel(coordinator.phase());

    // Worker 0's own attendance: channels into the loop.
    let (own_to, told) = mpsc::channel(WAITING);
    let (tell, mut told_by_own) = mpsc::channel::<Tell>(64);
    {
        let events = events.clone();
        tokio::spawn(async move {
            let conn = Coordinator::OWN;
            while let Some(t) = told_by_own.recv().await {
                if events.send(Event::Said(input(conn, t))).await.is_err() {
                    return;
                }
            }
            let _ = events.send(Event::Said(Input::Closed { conn })).await;
        });
    }

    let task = tokio::spawn(async move {
        let mut coordinator = coordinator;
        let mut conns: HashMap<Conn, mpsc::Sender<Told>> =
            HashMap::from([(Coordinator::OWN, own_to)]);
        let mut outputs = first;
        loop {
            // A worker that does not read what it is told is closed: the
            // coordinator never waits on one.
            let mut stalled = deliver(&coordinator, &mut conns, &phase_tx, outputs);
            while let Some(conn) = stalled.pop() {
                let more = coordinator.handle(origin.elapsed(), Input::Closed { conn });
                stalled.extend(deliver(&coordinator, &mut conns, &phase_tx, more));
            }
            outputs = Vec::new();
            let deadline = coordinator.next_deadline().map_or_else(
                || Instant::now() + Duration::from_secs(3600),
                |d| origin + d,
            );
            tokio::select! {
                event = heard.recv() => match event {
                    None => return,
                    Some(Event::Open { conn, to }) => {
                        conns.insert(conn, to);
                    }
                    Some(Event::Said(said)) => {
                        if let Input::Closed { conn } = &said {
                            conns.remove(conn);
                        }
                        outputs = coordinator.handle(origin.elapsed(), said);
                    }
                },
                () = tokio::time::sleep_until(deadline) => {
                    outputs = coordinator.tick(origin.elapsed());
                }
            }
        }
    });

    let service = Service {
        token: Arc::new(token),
        events,
        next: Arc::new(AtomicU64::new(Coordinator::OWN + 1)),
    };
    let routes = match also {
        Some(routes) => routes.add_service(WorkersServer::new(service)),
        None => tonic::service::Routes::new(WorkersServer::new(service)),
    };
    let server = tokio::spawn(serve(listener, routes));
    Ok((
        Coordinating {
            addr,
            phase,
            task,
            server,
        },
        Attendance { told, tell },
    ))
}

/// Serves `routes` on `listener` until aborted.
async fn serve(listener: tokio::net::TcpListener, routes: tonic::service::Routes) {
    let _ = tonic::transport::Server::builder()
        .add_routes(routes)
        .serve_with_incoming(TcpListenerStream::new(listener))
        .await;
}

/// The `Parts` service every worker offers the others (and the lab's
/// commands on any machine), `parts`, refusing calls without `token`.
pub fn parts<P: Parts>(parts: P, token: String) -> tonic::service::Routes {
    let token = Arc::new(token);
    tonic::service::Routes::new(PartsServer::with_interceptor(
        parts,
        move |request: Request<()>| {
            let authorized = (request.metadata().get(AUTHORIZATION))
                .is_some_and(|v| token_matches(v.as_bytes(), &token));
            if authorized {
                Ok(request)
            } else {
                Err(Status::unauthenticated(
                    "the call did not carry this lab's token (authorization: Bearer <token>)",
                ))
            }
        },
    ))
}

/// The lab's control API (`turbonet.v1.Lab`) of this machine's daemon,
/// served to the other machines beside [`parts`]: a call that carries the
/// lab's token is passed to the daemon's socket as it came (the token
/// taken off), so the lab's commands on any machine reach every part with
/// the API they use here ([`turbonet_api::Client::remote`]); any other is
/// refused `UNAUTHENTICATED`. Only reads and a link's parameters
/// ([`PROXIED`]) cross machines: failures reach the other parts through
/// the coordinator, and nothing else a caller elsewhere needs changes this
/// machine's part (a workload started here runs commands on it), so the
/// rest are refused `PERMISSION_DENIED`.
#[derive(Debug, Clone)]
pub struct LabProxy {
    daemon: tonic::transport::Channel,
    token: Arc<String>,
}

impl LabProxy {
    /// The proxy of the daemon of the lab in `dir`, for callers with
    /// `token`.
    pub fn new(dir: &crate::state::LabDir, token: String) -> Self {
        Self {
            daemon: turbonet_api::client::channel(dir.path()),
            token: Arc::new(token),
        }
    }
}

/// The methods of `turbonet.v1.Lab` a [`LabProxy`] passes on: the reads
/// (a capture among them), and a link's parameters (a link cut between
/// machines is shaped at both, or carried by its owner's engine).
pub const PROXIED: &[&str] = &[
    "Status",
    "ListNodes",
    "ListLinks",
    "ShowBgp",
    "Events",
    "ListWorkloads",
    "Snapshot",
    "Capture",
    "SetLink",
    "ResetLink",
];

impl tonic::server::NamedService for LabProxy {
    const NAME: &'static str = "turbonet.v1.Lab";
}

type HttpRequest = tonic::codegen::http::Request<tonic::body::Body>;
type HttpResponse = tonic::codegen::http::Response<tonic::body::Body>;

impl tower::Service<HttpRequest> for LabProxy {
    type Response = HttpResponse;
    type Error = std::convert::Infallible;
    type Future = Pin<
        Box<
            dyn std::future::Future<Output = std::result::Result<HttpResponse, Self::Error>> + Send,
        >,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::result::Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: HttpRequest) -> Self::Future {
        let authorized = (request.headers().get(AUTHORIZATION))
            .is_some_and(|v| token_matches(v.as_bytes(), &self.token));
        if !authorized {
            let refused = Status::unauthenticated(
                "the call did not carry this lab's token (authorization: Bearer <token>)",
            );
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        }
        let method = request.uri().path().rsplit('/').next().unwrap_or("");
        if !PROXIED.contains(&method) {
            let refused = Status::permission_denied(format!(
                "{method} is not served to other machines: only reads and link parameters \
                 cross machines ({})",
                PROXIED.join(", ")
            ));
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        }
        request.headers_mut().remove(AUTHORIZATION);
        let mut daemon = self.daemon.clone();
        Box::pin(async move {
            use tower::ServiceExt as _;
            Ok(match daemon.ready().await {
                Ok(daemon) => daemon.call(request).await.unwrap_or_else(|e| {
                    Status::unavailable(format!("this machine's lab daemon: {e}")).into_http()
                }),
                Err(e) => {
                    Status::unavailable(format!("this machine's lab daemon: {e}")).into_http()
                }
            })
        })
    }
}

/// Serves `routes` (a worker's [`parts`]) on `listener`, for a worker
/// other than the coordinator; stops when the handle is dropped.
pub fn serve_parts(listener: tokio::net::TcpListener, routes: tonic::service::Routes) -> Serving {
    Serving(tokio::spawn(serve(listener, routes)))
}

/// A server running; stopped when dropped.
#[derive(Debug)]
pub struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How the lab's commands on a machine reach the other machines' workers:
/// the port every worker listens on (each on its own machine, at its
/// underlay address) and the lab's token. A worker records it in its lab's
/// directory (root's only) once its part is up.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reach {
    /// The port.
    pub port: u16,
    /// The lab's token.
    pub token: String,
}

impl Reach {
    /// Where it is kept.
    fn path(dir: &crate::state::LabDir) -> std::path::PathBuf {
        dir.path().join("workers.json")
    }

    /// Records it in `dir` (mode 0600).
    pub fn save(&self, dir: &crate::state::LabDir) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(Self::path(dir))?;
        file.write_all(&serde_json::to_vec(self).map_err(|e| Error::Failed(e.to_string()))?)?;
        Ok(())
    }

    /// What `dir` records, if a worker recorded it.
    pub fn load(dir: &crate::state::LabDir) -> Option<Reach> {
        serde_json::from_slice(&std::fs::read(Self::path(dir)).ok()?).ok()
    }
}

/// The `Parts` service of the worker at `endpoint` (`http://host:port`),
/// and the lab's token as a call's metadata.
async fn parts_client(
    endpoint: &str,
    token: &str,
) -> Result<(
    PartsClient<tonic::transport::Channel>,
    tonic::metadata::AsciiMetadataValue,
)> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .map_err(|e| Error::Invalid(format!("worker address {endpoint}: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| Error::Failed(format!("reaching the worker at {endpoint}: {e}")))?;
    let bearer = format!("Bearer {token}")
        .parse()
        .map_err(|_| Error::Invalid("the token is not ASCII text".to_owned()))?;
    Ok((PartsClient::new(channel), bearer))
}

/// Asks the worker at `endpoint` for the routes of `node` (which its
/// machine runs), as `turbonet show routes NODE --json` prints them.
pub async fn part_routes(endpoint: &str, token: &str, lab: &str, node: &str) -> Result<String> {
    let (mut client, bearer) = parts_client(endpoint, token).await?;
    let mut request = Request::new(wire::PartRoutesRequest {
        lab: lab.to_owned(),
        node: node.to_owned(),
    });
    request.metadata_mut().insert(AUTHORIZATION, bearer);
    let report = client.routes(request).await.map_err(|s| {
        let said = format!("the worker at {endpoint}: {}", s.message());
        match s.code() {
            tonic::Code::InvalidArgument => Error::Invalid(said),
            tonic::Code::NotFound => Error::NotFound(said),
            _ => Error::Failed(said),
        }
    })?;
    Ok(report.into_inner().json)
}

/// Asks the worker at `endpoint` (`http://host:port`) for its machine's
/// check of lab `lab`: from its hosts to every host, as
/// `turbonet check --json` reports it.
pub async fn part_check(
    endpoint: &str,
    token: &str,
    lab: &str,
    timeout: f64,
    sample: Option<usize>,
) -> Result<String> {
    let (mut client, bearer) = parts_client(endpoint, token).await?;
    let mut request = Request::new(PartCheckRequest {
        lab: lab.to_owned(),
        timeout,
        sample: sample.map_or(0, |k| u32::try_from(k).unwrap_or(u32::MAX)),
    });
    request.metadata_mut().insert(AUTHORIZATION, bearer);
    let report = client
        .check(request)
        .await
        .map_err(|s| Error::Failed(format!("the worker at {endpoint}: {}", s.message())))?;
    Ok(report.into_inner().json)
}

/// How many messages a connection may have waiting before it counts as
/// stalled.
const WAITING: usize = 64;

/// Sends `outputs` to the connections they are for, and the lab's phase
/// to `phase` too; returns the connections that had [`WAITING`] messages
/// unread (they are dropped: their streams end).
fn deliver(
    coordinator: &Coordinator,
    conns: &mut HashMap<Conn, mpsc::Sender<Told>>,
    phase: &watch::Sender<Phase>,
    outputs: Vec<Output>,
) -> Vec<Conn> {
    let conn_of = |index: usize| coordinator.workers().get(index).and_then(|w| w.conn);
    let mut stalled = Vec::new();
    let mut send = |conns: &mut HashMap<Conn, mpsc::Sender<Told>>, conn: Conn, told: Told| {
        let full = conns
            .get(&conn)
            .is_some_and(|to| matches!(to.try_send(told), Err(mpsc::error::TrySendError::Full(_))));
        if full {
            conns.remove(&conn);
            stalled.push(conn);
        }
    };
    for output in outputs {
        let (conn, told) = match output {
            Output::Refuse { conn, reason } => {
                send(conns, conn, Told::Refused(reason));
                conns.remove(&conn);
                continue;
            }
            Output::Build {
                index,
                underlays,
                port,
            } => (conn_of(index), Told::Build { underlays, port }),
            Output::Repoint { to, peer, underlay } => {
                (conn_of(to), Told::Repoint { peer, underlay })
            }
            Output::Carrier { to, peer, up } => (conn_of(to), Told::Carrier { peer, up }),
            Output::Change { to, change } => (conn_of(to), Told::Change(change)),
            Output::Phase(now) => {
                phase.send_replace(now.clone());
                let all: Vec<Conn> = conns.keys().copied().collect();
                for conn in all {
                    send(conns, conn, Told::Phase(now.clone()));
                }
                continue;
            }
        };
        if let Some(conn) = conn {
            send(conns, conn, told);
        }
    }
    stalled
}

/// What a worker's message is to the coordinator.
fn input(conn: Conn, tell: Tell) -> Input {
    match tell {
        Tell::Built => Input::Built { conn },
        Tell::BuildFailed(error) => Input::BuildFailed { conn, error },
        Tell::Heartbeat => Input::Alive { conn },
        Tell::Change(change) => Input::Change { conn, change },
    }
}

/// The `Workers` service: each stream is a connection of the coordinator.
struct Service {
    token: Arc<String>,
    events: mpsc::Sender<Event>,
    next: Arc<AtomicU64>,
}

/// The metadata key of the lab's token.
const AUTHORIZATION: &str = "authorization";

/// True when `given` is `Bearer <token>`, compared in constant time.
fn token_matches(given: &[u8], token: &str) -> bool {
    let want = format!("Bearer {token}");
    given.len() == want.len()
        && given
            .iter()
            .zip(want.as_bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0
}

type Says = Pin<Box<dyn Stream<Item = std::result::Result<CoordinatorSays, Status>> + Send>>;

#[tonic::async_trait]
impl Workers for Service {
    type AttendStream = Says;

    async fn attend(
        &self,
        request: Request<Streaming<WorkerSays>>,
    ) -> std::result::Result<Response<Says>, Status> {
        let authorized = (request.metadata().get(AUTHORIZATION))
            .is_some_and(|v| token_matches(v.as_bytes(), &self.token));
        if !authorized {
            return Err(Status::unauthenticated(
                "the call did not carry this lab's token (authorization: Bearer <token>, the \
                 token of the worker's --token-file)",
            ));
        }
        let conn = self.next.fetch_add(1, Ordering::Relaxed);
        let (to, from) = mpsc::channel(WAITING);
        let refuse = to.clone();
        let events = self.events.clone();
        events
            .send(Event::Open { conn, to })
            .await
            .map_err(|_| Status::unavailable("the coordinator stopped"))?;
        let mut said = request.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(message)) = said.message().await {
                let input = match message.says {
                    Some(WorkerMessage::Hello(hello)) => match hello_from_wire(hello) {
                        Ok(hello) => Input::Hello { conn, hello },
                        Err(e) => {
                            let _ = refuse.send(Told::Refused(format!("its hello: {e}"))).await;
                            break;
                        }
                    },
                    Some(WorkerMessage::Built(Empty {})) => Input::Built { conn },
                    Some(WorkerMessage::BuildFailed(error)) => Input::BuildFailed { conn, error },
                    Some(WorkerMessage::Change(c)) => Input::Change {
                        conn,
                        change: change_from_wire(c),
                    },
                    Some(WorkerMessage::Heartbeat(Empty {})) | None => Input::Alive { conn },
                };
                if events.send(Event::Said(input)).await.is_err() {
                    return;
                }
            }
            let _ = events.send(Event::Said(Input::Closed { conn })).await;
        });
        let says = ReceiverStream::new(from).map(told_to_wire);
        Ok(Response::new(Box::pin(says)))
    }
}

/// Attends the coordinator at `endpoint` (`http://host:port`) with the
/// lab's `token`, saying `hello` first. An error is [`Error::Failed`] when
/// the coordinator could not be reached (worth trying again), and
/// [`Error::Refused`] when it answered no.
pub async fn attend(endpoint: &str, token: &str, hello: &Hello) -> Result<Attendance> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .map_err(|e| Error::Invalid(format!("coordinator address {endpoint}: {e}")))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| Error::Failed(format!("reaching the coordinator at {endpoint}: {e}")))?;
    let (tell, telling) = mpsc::channel::<Tell>(64);
    let first = WorkerSays {
        says: Some(WorkerMessage::Hello(hello_to_wire(hello))),
    };
    let outbound = tokio_stream::once(first).chain(ReceiverStream::new(telling).map(tell_to_wire));
    let mut request = Request::new(outbound);
    let bearer = format!("Bearer {token}")
        .parse()
        .map_err(|_| Error::Invalid("the token is not ASCII text".to_owned()))?;
    request.metadata_mut().insert(AUTHORIZATION, bearer);
    let mut inbound = WorkersClient::new(channel)
        .attend(request)
        .await
        .map_err(|s| {
            let said = format!("the coordinator at {endpoint}: {}", s.message());
            // Unreachable is worth trying again; anything it says is final.
            if s.code() == tonic::Code::Unavailable {
                Error::Failed(said)
            } else {
                Error::Refused(said)
            }
        })?
        .into_inner();
    let (told_tx, told) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let told = match inbound.message().await {
                Ok(Some(says)) => match told_from_wire(says) {
                    Some(t) => t,
                    None => continue,
                },
                Ok(None) => return,
                // A refusal ends the stream with a status of its own; any
                // other error is the connection's: the stream just ends.
                Err(status) if refusal(status.code()) => Told::Refused(status.message().to_owned()),
                Err(_) => return,
            };
            let last = matches!(told, Told::Refused(_));
            if told_tx.send(told).await.is_err() || last {
                return;
            }
        }
    });
    Ok(Attendance { told, tell })
}

/// A status the coordinator ends a stream with when it refuses a worker
/// (not one of a broken connection).
fn refusal(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::FailedPrecondition
            | tonic::Code::Unauthenticated
            | tonic::Code::PermissionDenied
            | tonic::Code::InvalidArgument
    )
}

/// What a worker's message is on the wire.
fn tell_to_wire(tell: Tell) -> WorkerSays {
    WorkerSays {
        says: Some(match tell {
            Tell::Built => WorkerMessage::Built(Empty {}),
            Tell::BuildFailed(error) => WorkerMessage::BuildFailed(error),
            Tell::Heartbeat => WorkerMessage::Heartbeat(Empty {}),
            Tell::Change(c) => WorkerMessage::Change(change_to_wire(c)),
        }),
    }
}

fn change_to_wire(c: Change) -> wire::TargetChange {
    wire::TargetChange {
        node: c.node,
        name: c.name,
        up: c.up,
    }
}

fn change_from_wire(c: wire::TargetChange) -> Change {
    Change {
        node: c.node,
        name: c.name,
        up: c.up,
    }
}

fn hello_to_wire(h: &Hello) -> WorkerHello {
    WorkerHello {
        lab: h.lab.clone(),
        index: h.index as u32,
        of: h.of as u32,
        version: h.version.clone(),
        partition: h.partition,
        underlay: h.underlay.to_string(),
        busy_ports: h.busy_ports.iter().map(|p| u32::from(*p)).collect(),
    }
}

fn hello_from_wire(h: WorkerHello) -> std::result::Result<Hello, String> {
    Ok(Hello {
        lab: h.lab,
        index: h.index as usize,
        of: h.of as usize,
        version: h.version,
        partition: h.partition,
        underlay: h.underlay.parse().map_err(|e| format!("underlay: {e}"))?,
        busy_ports: (h.busy_ports.iter())
            .filter_map(|p| u16::try_from(*p).ok())
            .collect(),
    })
}

/// What the coordinator's message is on the wire: a refusal is a status
/// that ends the stream.
fn told_to_wire(t: Told) -> std::result::Result<CoordinatorSays, Status> {
    let says = match t {
        Told::Build { underlays, port } => CoordinatorMessage::Build(BuildPart {
            underlays: underlays.iter().map(ToString::to_string).collect(),
            port: u32::from(port),
        }),
        Told::Repoint { peer, underlay } => CoordinatorMessage::Repoint(Repoint {
            peer: peer as u32,
            underlay: underlay.to_string(),
        }),
        Told::Carrier { peer, up } => CoordinatorMessage::Carrier(PeerCarrier {
            peer: peer as u32,
            up,
        }),
        Told::Change(c) => CoordinatorMessage::Change(change_to_wire(c)),
        Told::Phase(phase) => {
            CoordinatorMessage::Phase(serde_json::to_string(&phase).unwrap_or_default())
        }
        Told::Refused(reason) => return Err(Status::failed_precondition(reason)),
    };
    Ok(CoordinatorSays { says: Some(says) })
}

fn told_from_wire(says: CoordinatorSays) -> Option<Told> {
    Some(match says.says? {
        CoordinatorMessage::Build(b) => Told::Build {
            // Every address or none: an index must not shift.
            underlays: (b.underlays.iter())
                .map(|u| u.parse().ok())
                .collect::<Option<_>>()?,
            port: u16::try_from(b.port).ok()?,
        },
        CoordinatorMessage::Repoint(r) => Told::Repoint {
            peer: r.peer as usize,
            underlay: r.underlay.parse().ok()?,
        },
        CoordinatorMessage::Carrier(c) => Told::Carrier {
            peer: c.peer as usize,
            up: c.up,
        },
        CoordinatorMessage::Change(c) => Told::Change(change_from_wire(c)),
        CoordinatorMessage::Phase(p) => Told::Phase(serde_json::from_str(&p).ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_reads_nothing_is_dropped_not_waited_on() {
        let own = Hello {
            lab: "wire".to_owned(),
            index: 0,
            of: 2,
            version: "turbonet test".to_owned(),
            partition: 1,
            underlay: "198.18.0.1".parse().unwrap(),
            busy_ports: Vec::new(),
        };
        let (coordinator, _) = Coordinator::new(own, Settings::default(), Duration::ZERO);
        // Connection 7 has left a message unread and has room for no more.
        let (slow, _unread) = mpsc::channel(1);
        slow.try_send(Told::Phase(Phase::Running)).unwrap();
        let (reading, mut read) = mpsc::channel(8);
        let mut conns = HashMap::from([(7, slow), (8, reading)]);
        let (phase, watched) = watch::channel(coordinator.phase());
        let stalled = deliver(
            &coordinator,
            &mut conns,
            &phase,
            vec![Output::Phase(Phase::Running)],
        );
        assert_eq!(stalled, vec![7]);
        assert!(!conns.contains_key(&7) && conns.contains_key(&8));
        assert_eq!(read.try_recv().unwrap(), Told::Phase(Phase::Running));
        assert_eq!(*watched.borrow(), Phase::Running);
    }
}
