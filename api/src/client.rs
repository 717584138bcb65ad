//! A client of a lab's control API, for the command line: each call
//! blocks until the daemon answers. Scripts in other languages use the
//! `.proto` directly (`docs/api.md` shows Python).

use std::path::Path;
use std::time::Duration;

use tokio::runtime::Runtime;
use tonic::transport::{Channel, Endpoint};
use turbonet_topo::LinkParams;

use crate::bgp::BgpReport;
use crate::counters::{Counted, LinkCounters};
use crate::error::{Error, Result};
use crate::events::LoggedEvent;
use crate::proto::lab_client::LabClient;
use crate::{Target, bgp_from_proto, counters_from_proto, params_to_proto, proto, socket_path};

/// How long a change (which may re-route a large fabric) may take.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a read may take: the daemon answers reads at once.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn target_to_proto(target: &Target) -> proto::Target {
    proto::Target {
        target: Some(match target {
            Target::Link(l) => proto::target::Target::Link(l.clone()),
            Target::Node(n) => proto::target::Target::Node(n.clone()),
        }),
    }
}

/// The bearer token a call to another machine's worker carries (none to
/// the daemon's own socket).
#[derive(Debug, Clone, Default)]
pub struct Bearer(Option<tonic::metadata::AsciiMetadataValue>);

impl tonic::service::Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        Ok(request)
    }
}

/// The generated client as [`Client`] holds it.
type Rpc = LabClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

/// A connection to one lab's daemon: on this machine, or another
/// machine's through its worker ([`Client::remote`]).
#[derive(Debug)]
pub struct Client {
    runtime: Runtime,
    rpc: Rpc,
}

/// The daemon's socket as a tonic connector (a daemon that dies mid-call
/// is an error, never SIGPIPE).
fn connector(
    dir: impl AsRef<Path>,
) -> impl tower::Service<
    tonic::transport::Uri,
    Response = hyper_util::rt::TokioIo<turbonet_host::stream::QuietStream>,
    Error = std::io::Error,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let path = socket_path(dir);
    tower::service_fn(move |_: tonic::transport::Uri| {
        let path = path.clone();
        async move {
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                turbonet_host::stream::QuietStream::connect(path).await?,
            ))
        }
    })
}

/// How a client reaches the daemon of the lab in `dir`: its socket, dialled
/// when first used (and again after the daemon restarts).
pub fn channel(dir: impl AsRef<Path>) -> Channel {
    Endpoint::from_static("http://turbonet.lab")
        .connect_timeout(READ_TIMEOUT)
        .connect_with_connector_lazy(connector(dir))
}

/// The daemon of the lab in `dir`, dialled now.
async fn dial(dir: impl AsRef<Path>) -> Result<Channel> {
    let path = socket_path(&dir);
    Endpoint::from_static("http://turbonet.lab")
        .connect_timeout(READ_TIMEOUT)
        .connect_with_connector(connector(dir))
        .await
        .map_err(|e| {
            Error::Refused(format!(
                "cannot reach the lab daemon at {} ({e}; is the lab up? `turbonet status`)",
                path.display()
            ))
        })
}

/// Connects to the daemon of the lab in `dir`, for async callers: the
/// generated client itself.
pub async fn connect(dir: impl AsRef<Path>) -> Result<LabClient<Channel>> {
    Ok(LabClient::new(dial(dir).await?).max_decoding_message_size(256 << 20))
}

impl Client {
    /// Connects to the daemon of the lab in `dir`.
    pub fn connect(dir: impl AsRef<Path>) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let channel = runtime.block_on(dial(dir))?;
        Ok(Client {
            runtime,
            rpc: LabClient::with_interceptor(channel, Bearer::default())
                .max_decoding_message_size(256 << 20),
        })
    }

    /// Connects to the daemon of another machine's part of a lab, through
    /// its worker at `endpoint` (`http://host:port`), with the lab's
    /// `token`.
    pub fn remote(endpoint: &str, token: &str) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| Error::Invalid("the lab's token is not ASCII text".to_owned()))?;
        let channel = runtime
            .block_on(
                Endpoint::from_shared(endpoint.to_owned())
                    .map_err(|e| Error::Invalid(format!("worker address {endpoint}: {e}")))?
                    .connect_timeout(Duration::from_secs(5))
                    .connect(),
            )
            .map_err(|e| Error::Refused(format!("reaching the worker at {endpoint}: {e}")))?;
        Ok(Client {
            runtime,
            rpc: LabClient::with_interceptor(channel, Bearer(Some(bearer)))
                .max_decoding_message_size(256 << 20),
        })
    }

    /// Runs one call with a deadline.
    fn call<T, F>(&mut self, timeout: Duration, f: impl FnOnce(Rpc) -> F) -> Result<T>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let rpc = self.rpc.clone();
        self.runtime.block_on(async move {
            match tokio::time::timeout(timeout, f(rpc)).await {
                Ok(Ok(response)) => Ok(response.into_inner()),
                Ok(Err(status)) => Err(Error::from(status)),
                Err(_) => Err(Error::Failed(format!(
                    "the lab daemon did not answer within {timeout:?}"
                ))),
            }
        })
    }

    /// The lab's status.
    pub fn status(&mut self) -> Result<proto::LabStatus> {
        self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.status(proto::StatusRequest {}).await
        })
    }

    /// Its nodes.
    pub fn nodes(&mut self) -> Result<Vec<proto::Node>> {
        self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.list_nodes(proto::ListNodesRequest {}).await
        })
        .map(|r| r.nodes)
    }

    /// Its links (or `only` that one), with the parameters in force.
    pub fn links(&mut self, only: Option<&str>) -> Result<Vec<proto::Link>> {
        let link = only.unwrap_or_default().to_owned();
        self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.list_links(proto::ListLinksRequest { link }).await
        })
        .map(|r| r.links)
    }

    /// Every link (or `only` one), with when the daemon read their
    /// counters.
    pub fn list_links(&mut self, only: Option<&str>) -> Result<proto::ListLinksResponse> {
        let link = only.unwrap_or_default().to_owned();
        self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.list_links(proto::ListLinksRequest { link }).await
        })
    }

    /// A snapshot of the lab (the daemon reads every switch's tables and
    /// agents: seconds on a large fabric).
    pub fn snapshot(&mut self) -> Result<proto::SnapshotResponse> {
        self.call(Duration::from_secs(120), |mut rpc| async move {
            rpc.snapshot(proto::SnapshotRequest {}).await
        })
    }

    /// Captures a link: hands `each` every frame the daemon streams until
    /// it says stop (`false`), `until` passes, the stream ends (its count
    /// reached), or Ctrl-C. True when it ended on Ctrl-C. `each` fails with
    /// its caller's error type, which the API's converts into.
    pub fn capture<E: From<Error>>(
        &mut self,
        request: proto::CaptureRequest,
        until: Option<std::time::Instant>,
        each: impl FnMut(proto::CapturedFrame) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let mut rpc = self.rpc.clone();
        self.runtime.block_on(async move {
            let stream = rpc.capture(request).await.map_err(Error::from)?;
            drain(stream.into_inner(), until, true, each).await
        })
    }

    /// Every link's counters, as the daemon last read them.
    pub fn counters(&mut self) -> Result<Counted> {
        let response = self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.list_links(proto::ListLinksRequest::default()).await
        })?;
        let links = response
            .links
            .into_iter()
            .filter(|l| l.directions.len() == 2)
            .map(|l| {
                let [a, b] = [0, 1]
                    .map(|d| counters_from_proto(&l.directions[d].counters.unwrap_or_default()));
                LinkCounters {
                    link: l.name,
                    directions: [a.0, b.0],
                    shortfall: [a.1, b.1],
                }
            })
            .collect();
        Ok(Counted {
            at_unix: response.counted_unix,
            links,
        })
    }

    /// Changes some parameters of `link`.
    pub fn set_link(&mut self, link: &str, patch: &LinkParams) -> Result<String> {
        let request = proto::SetLinkRequest {
            link: link.to_owned(),
            params: Some(params_to_proto(patch)),
        };
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.set_link(request).await
        })
        .map(|c| c.message)
    }

    /// Puts `link` back to the scenario's parameters.
    pub fn reset_link(&mut self, link: &str) -> Result<String> {
        let link = link.to_owned();
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.reset_link(proto::ResetLinkRequest { link }).await
        })
        .map(|c| c.message)
    }

    /// Takes `target` down.
    pub fn fail(&mut self, target: &Target) -> Result<String> {
        self.fail_as(target, false)
    }

    /// Takes `target` down, `mirrored` from another machine of a lab over
    /// several (its event's source is `machines`).
    pub fn fail_as(&mut self, target: &Target, mirrored: bool) -> Result<String> {
        let target = Some(target_to_proto(target));
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.fail(proto::FailRequest { target, mirrored }).await
        })
        .map(|c| c.message)
    }

    /// Starts the scenario's workload `name` again, or the workloads of
    /// `text` (read from `origin`); says what started.
    pub fn start_workload(
        &mut self,
        name: Option<&str>,
        text: &str,
        origin: &str,
    ) -> Result<String> {
        let request = proto::StartWorkloadRequest {
            name: name.unwrap_or_default().to_owned(),
            text: text.to_owned(),
            origin: origin.to_owned(),
        };
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.start_workload(request).await
        })
        .map(|c| c.message)
    }

    /// Stops the workload `name`.
    pub fn stop_workload(&mut self, name: &str) -> Result<String> {
        let name = name.to_owned();
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.stop_workload(proto::StopWorkloadRequest { name }).await
        })
        .map(|c| c.message)
    }

    /// Every workload started, with what it did so far.
    pub fn workloads(&mut self) -> Result<Vec<crate::workload::Report>> {
        let list = self.call(READ_TIMEOUT, |mut rpc| async move {
            rpc.list_workloads(proto::ListWorkloadsRequest {}).await
        })?;
        list.workloads
            .iter()
            .map(|w| serde_json::from_str(&w.json).map_err(Into::into))
            .collect()
    }

    /// Brings `target` back.
    pub fn restore(&mut self, target: &Target) -> Result<String> {
        self.restore_as(target, false)
    }

    /// Brings `target` back, `mirrored` as in [`Client::fail_as`].
    pub fn restore_as(&mut self, target: &Target, mirrored: bool) -> Result<String> {
        let target = Some(target_to_proto(target));
        self.call(CHANGE_TIMEOUT, |mut rpc| async move {
            rpc.restore(proto::RestoreRequest { target, mirrored })
                .await
        })
        .map(|c| c.message)
    }

    /// Flaps `link` `count` times with `period`.
    pub fn flap(&mut self, link: &str, period: Duration, count: u32) -> Result<String> {
        let request = proto::FlapRequest {
            link: link.to_owned(),
            period: Some(crate::duration(period)),
            count,
        };
        self.call(
            CHANGE_TIMEOUT,
            |mut rpc| async move { rpc.flap(request).await },
        )
        .map(|c| c.message)
    }

    /// The BGP agents' state, of every switch or of `node`.
    pub fn bgp(&mut self, node: Option<&str>) -> Result<BgpReport> {
        let request = proto::ShowBgpRequest {
            node: node.unwrap_or_default().to_owned(),
            summary: false,
        };
        self.show_bgp(request, READ_TIMEOUT)
    }

    /// Every switch's convergence, its sessions counted but not listed
    /// (see [`BgpReport::sessions`]), waiting at most `timeout`.
    pub fn bgp_summary(&mut self, timeout: Duration) -> Result<BgpReport> {
        let request = proto::ShowBgpRequest {
            node: String::new(),
            summary: true,
        };
        self.show_bgp(request, timeout)
    }

    fn show_bgp(&mut self, request: proto::ShowBgpRequest, timeout: Duration) -> Result<BgpReport> {
        self.call(
            timeout,
            |mut rpc| async move { rpc.show_bgp(request).await },
        )
        .map(|r| bgp_from_proto(&r))
    }

    /// Every event so far, handed to `each` in order; with `follow`, then
    /// every new one as it happens, until `each` says stop (`false`) or
    /// the daemon goes away.
    pub fn events(&mut self, follow: bool, each: impl FnMut(LoggedEvent) -> bool) -> Result<()> {
        self.events_until(follow, None, each)
    }

    /// [`Client::events`], stopping at `until` too.
    pub fn events_until(
        &mut self,
        follow: bool,
        until: Option<std::time::Instant>,
        mut each: impl FnMut(LoggedEvent) -> bool,
    ) -> Result<()> {
        let mut rpc = self.rpc.clone();
        self.runtime.block_on(async move {
            let stream = rpc
                .events(proto::EventsRequest { follow })
                .await?
                .into_inner();
            drain(stream, until, false, |e| {
                Ok::<_, Error>(each(crate::event_from_proto(e)))
            })
            .await
            .map(drop)
        })
    }
}

/// Hands every message of `stream` to `each` until it says stop (`false`),
/// the stream ends, `until` passes, or (if `interruptible`) Ctrl-C; true
/// when it ended on Ctrl-C.
async fn drain<T, E: From<Error>>(
    mut stream: tonic::Streaming<T>,
    until: Option<std::time::Instant>,
    interruptible: bool,
    mut each: impl FnMut(T) -> Result<bool, E>,
) -> Result<bool, E> {
    let deadline = async {
        match until {
            Some(t) => tokio::time::sleep_until(t.into()).await,
            None => std::future::pending().await,
        }
    };
    let interrupted = async {
        if interruptible {
            let _ = tokio::signal::ctrl_c().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(deadline, interrupted);
    loop {
        tokio::select! {
            message = stream.message() => match message.map_err(Error::from)? {
                Some(m) => {
                    if !each(m)? {
                        return Ok(false);
                    }
                }
                None => return Ok(false),
            },
            () = &mut deadline => return Ok(false),
            () = &mut interrupted => return Ok(true),
        }
    }
}
