//! The control API's server: the `turbonet.v1.Lab` service, run on a
//! thread of its own so that reads (status, links, events, BGP) are
//! answered while the actor is busy. Changes go to the actor's queue and
//! their answer comes back from it; reads come from what the actor
//! publishes after every command, the counters the data plane keeps, and
//! the BGP agents' own reports.

use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::command::{Command, Envelope, Source};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::events::Events;
use turbonet_api::Target;
use turbonet_api::proto::lab_server::{Lab as LabService, LabServer};
use turbonet_api::{self as api, proto};

/// The status of a failed call: its kind as a gRPC code, its words.
fn status(e: &Error) -> Status {
    Status::new(e.kind().code(), e.to_string())
}

impl Shared {
    /// Sends a change to the actor and waits for what it did.
    async fn change(&self, command: Command) -> Result<proto::Change, Status> {
        self.change_from(Source::Api, command).await
    }

    /// [`Service::change`], from `source`.
    async fn change_from(&self, source: Source, command: Command) -> Result<proto::Change, Status> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Envelope {
                source,
                command,
                reply: Some(reply),
            })
            .map_err(|_| Status::unavailable("the lab daemon is stopping"))?;
        let message = answer
            .await
            .map_err(|_| Status::unavailable("the lab daemon is stopping"))?
            .map_err(|e| status(&e))?;
        Ok(proto::Change { message })
    }

    fn link_name(&self, name: &str) -> Result<String, Status> {
        crate::lookup::link(&self.lab, name)
            .map(|l| l.name.clone())
            .map_err(|e| status(&e))
    }
}

/// Who a failure or restore comes from: a client, or another machine of a
/// lab over several (`mirrored`).
fn source_of(mirrored: bool) -> Source {
    if mirrored {
        Source::Machines
    } else {
        Source::Api
    }
}

fn target(t: Option<proto::Target>) -> Result<Target, Status> {
    match t.and_then(|t| t.target) {
        Some(proto::target::Target::Link(l)) => Ok(Target::Link(l)),
        Some(proto::target::Target::Node(n)) => Ok(Target::Node(n)),
        None => Err(Status::invalid_argument("give a link or a node")),
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<proto::Event, Status>> + Send>>;
type CaptureStream = Pin<Box<dyn Stream<Item = Result<proto::CapturedFrame, Status>> + Send>>;

/// Frames a capture holds for its reader before it misses some: a second
/// of a busy link.
const CAPTURE_QUEUE: usize = 65_536;

#[tonic::async_trait]
impl LabService for Shared {
    async fn status(
        &self,
        _: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::LabStatus>, Status> {
        let published = self.published.borrow().clone();
        let fabric = &self.lab.fabric;
        let mut failed_links: Vec<String> = published
            .failures
            .links
            .iter()
            .map(|&l| fabric.link(l).name.clone())
            .collect();
        failed_links.sort();
        let mut failed_nodes: Vec<String> = published
            .failures
            .nodes
            .iter()
            .map(|&n| fabric.node(n).name.clone())
            .collect();
        failed_nodes.sort();
        Ok(Response::new(proto::LabStatus {
            lab: self.lab.name.clone(),
            target: self.lab.target.to_string(),
            routing: self.lab.routing.mode.to_string(),
            nodes: fabric.nodes.len() as u32,
            links: fabric.links.len() as u32,
            daemon_pid: self.pid,
            restarts: self.restarts,
            up_for: Some(api::duration(Duration::from_secs_f64(
                self.events.now().max(0.0),
            ))),
            failed_links,
            failed_nodes,
            changed_links: fabric
                .links
                .iter()
                .filter(|l| published.params.get(l.id.0 as usize) != Some(&l.params))
                .map(|l| l.name.clone())
                .collect(),
        }))
    }

    async fn list_nodes(
        &self,
        _: Request<proto::ListNodesRequest>,
    ) -> Result<Response<proto::ListNodesResponse>, Status> {
        let lab = &self.lab;
        let nodes = lab
            .fabric
            .nodes
            .iter()
            .map(|n| {
                let (namespace, control_plane_only) =
                    crate::dataplane::namespace_of(lab, n).unwrap_or_default();
                proto::Node {
                    name: n.name.clone(),
                    role: n.role.to_string(),
                    namespace,
                    control_plane_only,
                    asn: n.asn.map(|a| a.0),
                    loopback: n.loopback.map(|l| l.to_string()).unwrap_or_default(),
                    ports: lab
                        .fabric
                        .ports(n.id)
                        .map(|(link, local, remote)| proto::Port {
                            ifname: local.ifname.clone(),
                            address: local.addr.to_string(),
                            link: link.name.clone(),
                            peer: lab.fabric.node(remote.node).name.clone(),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(proto::ListNodesResponse { nodes }))
    }

    async fn list_links(
        &self,
        request: Request<proto::ListLinksRequest>,
    ) -> Result<Response<proto::ListLinksResponse>, Status> {
        let only = request.into_inner().link;
        let only = if only.is_empty() {
            None
        } else {
            Some(self.link_name(&only)?)
        };
        let published = self.published.borrow().clone();
        let filters = self.filters.lock().map(|f| f.clone()).unwrap_or_default();
        let counted = self.counters.read().await;
        let counted_unix = counted.at_unix;
        let counted = counted.links;
        let fabric = &self.lab.fabric;
        let links = fabric
            .links
            .iter()
            .filter(|l| only.as_deref().is_none_or(|o| o == l.name))
            .map(|l| {
                let carrier = &self.carriers[l.id.0 as usize];
                let names = [
                    fabric.node(l.ends[0].node).name.clone(),
                    fabric.node(l.ends[1].node).name.clone(),
                ];
                let directions = counted
                    .iter()
                    .find(|c| c.link == l.name)
                    .map(|c| {
                        (0..2)
                            .map(|d| proto::LinkDirection {
                                from: names[d].clone(),
                                to: names[1 - d].clone(),
                                counters: Some(api::counters_to_proto(
                                    &c.directions[d],
                                    &c.shortfall[d],
                                )),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                proto::Link {
                    name: l.name.clone(),
                    class: l.class.to_string(),
                    a: names[0].clone(),
                    b: names[1].clone(),
                    params: Some(api::params_to_proto(
                        published.params.get(l.id.0 as usize).unwrap_or(&l.params),
                    )),
                    scenario: Some(api::params_to_proto(&l.params)),
                    down: published.failures.blocks(l),
                    engine: carrier.name().to_owned(),
                    engine_reason: carrier.why().to_owned(),
                    directions,
                    filters: filters
                        .iter()
                        .filter(|f| f.link == l.name)
                        .map(|f| proto::FilterStatus {
                            name: f.name.clone(),
                            node: f.node.clone(),
                            port: f.port.clone(),
                            hook: f.hook.clone(),
                            kind: f.kind.clone(),
                            seen: f.seen,
                            dropped: f.dropped,
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(proto::ListLinksResponse {
            links,
            counted_unix,
        }))
    }

    async fn set_link(
        &self,
        request: Request<proto::SetLinkRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let request = request.into_inner();
        let patch = api::params_from_proto(&request.params.unwrap_or_default())
            .map_err(|e| status(&e.into()))?;
        if patch.mtu.is_some() {
            return Err(Status::invalid_argument(
                "mtu cannot change at run time; set it in the scenario",
            ));
        }
        if patch.is_empty() {
            return Err(Status::invalid_argument(
                "nothing to set; give at least one parameter, e.g. a delay",
            ));
        }
        let link = self.link_name(&request.link)?;
        self.change(Command::SetLink {
            link,
            params: patch,
        })
        .await
        .map(Response::new)
    }

    async fn reset_link(
        &self,
        request: Request<proto::ResetLinkRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let link = self.link_name(&request.into_inner().link)?;
        self.change(Command::ResetLink { link })
            .await
            .map(Response::new)
    }

    async fn fail(
        &self,
        request: Request<proto::FailRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let request = request.into_inner();
        let source = source_of(request.mirrored);
        let target = target(request.target)?;
        self.change_from(source, Command::Fail { target })
            .await
            .map(Response::new)
    }

    async fn start_workload(
        &self,
        request: Request<proto::StartWorkloadRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let r = request.into_inner();
        let name = (!r.name.is_empty()).then_some(r.name);
        if name.is_none() && r.text.trim().is_empty() {
            return Err(Status::invalid_argument(
                "name a scenario workload or give `[[workload]]` tables",
            ));
        }
        self.change(Command::StartWorkload {
            name,
            text: r.text,
            origin: r.origin,
        })
        .await
        .map(Response::new)
    }

    async fn stop_workload(
        &self,
        request: Request<proto::StopWorkloadRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let name = request.into_inner().name;
        self.change(Command::StopWorkload { name })
            .await
            .map(Response::new)
    }

    async fn list_workloads(
        &self,
        _: Request<proto::ListWorkloadsRequest>,
    ) -> Result<Response<proto::ListWorkloadsResponse>, Status> {
        let workloads = self
            .workloads
            .reports()
            .into_iter()
            .map(|r| {
                let json = serde_json::to_string(&r).map_err(|e| status(&e.into()))?;
                Ok(proto::WorkloadReport {
                    name: r.name,
                    kind: r.kind,
                    state: r.state.name().to_owned(),
                    message: r.message.unwrap_or_default(),
                    json,
                })
            })
            .collect::<Result<_, Status>>()?;
        Ok(Response::new(proto::ListWorkloadsResponse { workloads }))
    }

    async fn restore(
        &self,
        request: Request<proto::RestoreRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let request = request.into_inner();
        let source = source_of(request.mirrored);
        let target = target(request.target)?;
        self.change_from(source, Command::Restore { target })
            .await
            .map(Response::new)
    }

    async fn flap(
        &self,
        request: Request<proto::FlapRequest>,
    ) -> Result<Response<proto::Change>, Status> {
        let request = request.into_inner();
        let period = request.period.as_ref().map_or(0.0, api::seconds);
        if period <= 0.0 || request.count == 0 {
            return Err(Status::invalid_argument(
                "a flap needs a period above 0 and at least one cycle",
            ));
        }
        let link = self.link_name(&request.link)?;
        self.change(Command::Flap {
            link,
            period_ns: (period * 1e9) as u64,
            count: request.count,
        })
        .await
        .map(Response::new)
    }

    async fn show_bgp(
        &self,
        request: Request<proto::ShowBgpRequest>,
    ) -> Result<Response<proto::BgpReport>, Status> {
        let Some(bgp) = &self.bgp else {
            return Err(Status::failed_precondition(format!(
                "lab {} runs routing mode \"{}\", not BGP",
                self.lab.name, self.lab.routing.mode
            )));
        };
        let proto::ShowBgpRequest {
            node: name,
            summary,
        } = request.into_inner();
        let node = if name.is_empty() {
            None
        } else {
            let node = crate::lookup::node(&self.lab, &name).map_err(|e| status(&e))?;
            if !node.role.is_switch() {
                return Err(Status::invalid_argument(format!(
                    "{name} is a host: hosts run no BGP"
                )));
            }
            Some(node.id)
        };
        let report = bgp.report(node, summary).await;
        Ok(Response::new(api::bgp_to_proto(&report)))
    }

    async fn snapshot(
        &self,
        _: Request<proto::SnapshotRequest>,
    ) -> Result<Response<proto::SnapshotResponse>, Status> {
        let snapshot = super::snapshot::take(self).await.map_err(|e| status(&e))?;
        let json = serde_json::to_string_pretty(&snapshot).map_err(|e| status(&e.into()))?;
        Ok(Response::new(proto::SnapshotResponse {
            json,
            files: snapshot
                .files
                .into_iter()
                .map(|(path, text)| proto::SnapshotFile { path, text })
                .collect(),
        }))
    }

    type CaptureStream = CaptureStream;

    async fn capture(
        &self,
        request: Request<proto::CaptureRequest>,
    ) -> Result<Response<Self::CaptureStream>, Status> {
        let r = request.into_inner();
        let Some(tapper) = self.tapper.clone() else {
            return Err(Status::failed_precondition(format!(
                "lab {} runs on target {}: captures and mirrors need the netns target",
                self.lab.name, self.lab.target
            )));
        };
        let link = crate::lookup::link(&self.lab, &r.link).map_err(|e| status(&e))?;
        let directions =
            crate::dataplane::taps::directions(&r.direction, link).map_err(|e| status(&e))?;
        let snaplen = match r.snaplen {
            0 => 65_535,
            n => n as usize,
        };
        let (tx, mut rx) = mpsc::channel(CAPTURE_QUEUE);
        let missed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let id = tapper
            .start(
                link,
                directions,
                crate::dataplane::taps::Sink::Capture {
                    tx,
                    snaplen,
                    missed: missed.clone(),
                },
            )
            .map_err(|e| status(&e))?;
        let (out, stream) = mpsc::channel::<Result<proto::CapturedFrame, Status>>(1024);
        let count = r.count;
        tokio::spawn(async move {
            let mut sent = 0u64;
            loop {
                // A client that hangs up ends the tap even on an idle link.
                let c = tokio::select! {
                    c = rx.recv() => match c {
                        Some(c) => c,
                        None => break,
                    },
                    () = out.closed() => break,
                };
                let frame = proto::CapturedFrame {
                    unix_ns: i64::try_from(c.unix_ns).unwrap_or(i64::MAX),
                    direction: u32::from(c.direction),
                    data: c.data,
                    original_len: c.original_len,
                    dropped: c.dropped.map(|d| d.name().to_owned()).unwrap_or_default(),
                    corrupted: c.marks.corrupted,
                    ecn_marked: c.marks.ecn_marked,
                    duplicate: c.marks.duplicate,
                    missed: missed.load(std::sync::atomic::Ordering::Relaxed),
                };
                if out.send(Ok(frame)).await.is_err() {
                    break;
                }
                sent += 1;
                if count > 0 && sent >= count {
                    break;
                }
            }
            tapper.stop(id);
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(stream),
        )))
    }

    type EventsStream = EventStream;

    async fn events(
        &self,
        request: Request<proto::EventsRequest>,
    ) -> Result<Response<Self::EventsStream>, Status> {
        let follow = request.into_inner().follow;
        let (count, mut live) = self.events.subscribe();
        let events = self.events.clone();
        let (tx, rx) = mpsc::channel::<Result<proto::Event, Status>>(256);
        tokio::spawn(async move {
            // The next event this follower is owed: each goes out once, in
            // order, whether it comes from the log or from the bus.
            let mut next = 0;
            if !send_logged(&events, &tx, &mut next, count).await || !follow {
                return;
            }
            loop {
                let newest = match live.recv().await {
                    Ok(one) => Some(one),
                    // A follower too slow for a burst: the bus dropped some,
                    // the log has them all.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => None,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let upto = newest.as_ref().map_or(u64::MAX, |(seq, _)| *seq);
                if !send_logged(&events, &tx, &mut next, upto).await {
                    return;
                }
                if let Some((seq, e)) = newest
                    && seq >= next
                {
                    next = seq + 1;
                    if tx.send(Ok(api::event_to_proto(seq, &e))).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// Sends the logged events from `next` up to `upto` (or the last), read
/// back a batch at a time; false once the follower has gone.
async fn send_logged(
    events: &Events,
    tx: &mpsc::Sender<Result<proto::Event, Status>>,
    next: &mut u64,
    upto: u64,
) -> bool {
    while *next < upto {
        let batch = events.range(*next, upto);
        if batch.is_empty() {
            break;
        }
        for (seq, e) in batch {
            *next = seq + 1;
            if tx.send(Ok(api::event_to_proto(seq, &e))).await.is_err() {
                return false;
            }
        }
    }
    true
}

/// Serves the API on the Unix socket `path` (made root-only), and the
/// metrics on `metrics` (bound already), until `stop` fires, on a runtime
/// of this thread's own.
pub fn serve(
    shared: Shared,
    path: &Path,
    metrics: Vec<std::net::TcpListener>,
    stop: oneshot::Receiver<()>,
) -> Result<()> {
    use futures::FutureExt;
    use std::os::unix::fs::PermissionsExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let stop = stop.map(drop).shared();
    runtime.block_on(async {
        for listener in metrics {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let (shared, stop) = (shared.clone(), stop.clone());
            tokio::spawn(async move {
                if let Err(e) = super::metrics::serve(shared, listener, stop).await {
                    tracing::error!("the metrics endpoint stopped: {e}");
                }
            });
        }
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path)
            .map_err(|e| Error::Failed(format!("binding {}: {e}", path.display())))?;
        // Root only, whatever the umask: the API changes the fabric.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        tonic::transport::Server::builder()
            .add_service(LabServer::new(shared))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                stop,
            )
            .await?;
        Ok(())
    })
}
