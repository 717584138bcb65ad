//! The `p4.v1.P4Runtime` gRPC service over a [`Device`], and [`serve`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status, Streaming};
use turbonet_p4::google::rpc::{Code, Status as RpcStatus};
use turbonet_p4::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use turbonet_p4::p4::v1::{
    CapabilitiesRequest, CapabilitiesResponse, Error as P4RtError, ForwardingPipelineConfig,
    GetForwardingPipelineConfigRequest, GetForwardingPipelineConfigResponse, PacketOut,
    PacketOutError, ReadRequest, ReadResponse, SetForwardingPipelineConfigRequest,
    SetForwardingPipelineConfigResponse, StreamError, StreamMessageRequest, StreamMessageResponse,
    WriteRequest, WriteResponse, get_forwarding_pipeline_config_request::ResponseType,
    set_forwarding_pipeline_config_request::Action as PipelineAction, stream_error,
    stream_message_request, stream_message_response, write_request::Atomicity,
};

use crate::arbitration::{Outbox, StreamTx};
use crate::bytes::canonical_bytes;
use crate::device::{Device, Pipeline};
use crate::error::P4Error;
use crate::write::{apply_batch, read_entity, reconcile};
use turbonet_p4::Schema;

use crate::{DeviceConfig, Error};

/// The P4Runtime API version the server implements (Capabilities).
pub const API_VERSION: &str = "1.4.0";

/// Entities per ReadResponse message.
const READ_CHUNK: usize = 1000;

/// Messages queued per controller stream.
const STREAM_QUEUE: usize = 256;

/// The P4Runtime service of one [`Device`].
#[derive(Debug, Clone)]
pub struct SoftSwitchService {
    device: Device,
    /// Flips to true when the server shuts down: controller streams end.
    stop: watch::Receiver<bool>,
}

impl SoftSwitchService {
    /// Serves `device`.
    pub fn new(device: Device) -> Self {
        // A sender that is never used: the streams of a service built this
        // way end only when their controllers close them.
        let (_, stop) = watch::channel(false);
        Self { device, stop }
    }

    /// The tonic service, to add to a `tonic::transport::Server`. Message
    /// size limits are raised to 64 MiB: a P4Info plus device config, or a
    /// large read, exceeds tonic's 4 MiB default.
    pub fn into_server(self) -> P4RuntimeServer<Self> {
        P4RuntimeServer::new(self)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id != self.device.device_id() {
            return Err(Status::not_found(format!(
                "unknown device id {device_id} (this switch is device {})",
                self.device.device_id()
            )));
        }
        Ok(())
    }

    /// Write and SetForwardingPipelineConfig come from the role's primary
    /// only (section 5): the request's election id must be the primary's.
    fn check_primary(&self, role: &str, election_id: Option<u128>) -> Result<(), Status> {
        if self.device.arbitration().is_primary(role, election_id) {
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "not the primary controller of role {role:?}: election id {} (primary: {})",
            election_id.map_or("unset".to_owned(), |e| e.to_string()),
            self.device
                .primary_election_id(role)
                .map_or("none".to_owned(), |e| e.to_string()),
        )))
    }
}

/// Sends arbitration messages: to `own` (the stream that caused them) it
/// waits for room; another controller's stream gets them only if it has
/// room, so a controller that does not read its stream can never stall
/// this one (and with it the packets this one sends).
async fn send_all(own: &StreamTx, outbox: Outbox) {
    for (tx, msg) in outbox {
        if tx.same_channel(own) {
            let _ = tx.send(Ok(msg)).await;
        } else {
            let _ = tx.try_send(Ok(msg));
        }
    }
}

fn stream_error(code: Code, message: String, packet: Option<PacketOut>) -> StreamMessageResponse {
    StreamMessageResponse {
        update: Some(stream_message_response::Update::Error(StreamError {
            canonical_code: code as i32,
            message,
            space: String::new(),
            code: 0,
            details: packet.map(|p| {
                stream_error::Details::PacketOut(PacketOutError {
                    packet_out: Some(p),
                })
            }),
        })),
    }
}

/// One controller stream: arbitration, then packets.
async fn run_stream(
    device: Device,
    stream: u64,
    mut inbound: Streaming<StreamMessageRequest>,
    tx: StreamTx,
    mut stop: watch::Receiver<bool>,
) {
    let device_id = device.device_id();
    loop {
        let next = tokio::select! {
            next = inbound.message() => next,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let Ok(Some(msg)) = next else { break };
        match msg.update {
            Some(stream_message_request::Update::Arbitration(a)) => {
                if a.device_id != device_id {
                    let _ = tx
                        .send(Err(Status::not_found(format!(
                            "unknown device id {} (this switch is device {device_id})",
                            a.device_id
                        ))))
                        .await;
                    break;
                }
                let result = device.arbitration().update(device_id, stream, &a, &tx);
                match result {
                    Ok(outbox) => send_all(&tx, outbox).await,
                    Err(status) => {
                        let _ = tx.send(Err(status)).await;
                        break;
                    }
                }
            }
            Some(stream_message_request::Update::Packet(p)) => {
                if let Err((code, message)) = packet_out(&device, stream, &p) {
                    let _ = tx.send(Ok(stream_error(code, message, Some(p)))).await;
                }
            }
            Some(_) => {
                let reply = stream_error(
                    Code::Unimplemented,
                    "digests and extensions are not supported".into(),
                    None,
                );
                let _ = tx.send(Ok(reply)).await;
            }
            None => {
                let reply =
                    stream_error(Code::InvalidArgument, "empty stream message".into(), None);
                let _ = tx.send(Ok(reply)).await;
            }
        }
    }
    let outbox = device.arbitration().remove(device_id, stream);
    send_all(&tx, outbox).await;
}

/// Checks a PacketOut (primary, pipeline, metadata against the P4Info's
/// `packet_out` header) and hands it to the data plane.
fn packet_out(device: &Device, stream: u64, p: &PacketOut) -> Result<(), (Code, String)> {
    {
        let arb = device.arbitration();
        if !arb.is_registered(stream) {
            return Err((
                Code::FailedPrecondition,
                "send a MasterArbitrationUpdate first".into(),
            ));
        }
        if !arb.is_stream_primary(stream) {
            return Err((
                Code::PermissionDenied,
                "only the primary controller sends packets".into(),
            ));
        }
    }
    let schema = device
        .read_state()
        .pipeline()
        .map(|p| p.schema.clone())
        .ok_or((
            Code::FailedPrecondition,
            "no forwarding pipeline is set".to_owned(),
        ))?;
    let mut packet = p.clone();
    for m in &mut packet.metadata {
        let width = schema.packet_out.get(&m.metadata_id).ok_or((
            Code::InvalidArgument,
            format!("unknown packet_out metadata id {}", m.metadata_id),
        ))?;
        m.value = canonical_bytes(
            &m.value,
            *width,
            &format!("packet_out metadata {}", m.metadata_id),
        )
        .map_err(|e| (e.code, e.message))?;
    }
    device
        .packet_out_sender()
        .try_send(packet)
        .map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => (
                Code::ResourceExhausted,
                "the data plane queue is full".into(),
            ),
            mpsc::error::TrySendError::Closed(_) => {
                (Code::Unavailable, "no data plane is attached".into())
            }
        })
}

/// The Write error (section 12.3 "Error reporting"): UNKNOWN, with one
/// `p4.v1.Error` per update, in order, packed in `google.rpc.Status`
/// details (OK for the updates that succeeded).
fn batch_error(results: &[Result<(), P4Error>]) -> Status {
    let failed = results.iter().filter(|r| r.is_err()).count();
    let message = format!("{failed} of {} updates failed", results.len());
    let details = results
        .iter()
        .map(|r| {
            let (code, message) = match r {
                Ok(()) => (Code::Ok, String::new()),
                Err(e) => (e.code, e.message.clone()),
            };
            let err = P4RtError {
                canonical_code: code as i32,
                message,
                ..Default::default()
            };
            prost_types::Any {
                type_url: "type.googleapis.com/p4.v1.Error".into(),
                value: err.encode_to_vec(),
            }
        })
        .collect();
    let status = RpcStatus {
        code: Code::Unknown as i32,
        message: message.clone(),
        details,
    };
    Status::with_details(tonic::Code::Unknown, message, status.encode_to_vec().into())
}

#[tonic::async_trait]
impl P4Runtime for SoftSwitchService {
    async fn capabilities(
        &self,
        _req: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        Ok(Response::new(CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
        }))
    }

    async fn stream_channel(
        &self,
        req: Request<Streaming<StreamMessageRequest>>,
    ) -> Result<Response<BoxStream<StreamMessageResponse>>, Status> {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let stream = self.device.arbitration().new_stream();
        tokio::spawn(run_stream(
            self.device.clone(),
            stream,
            req.into_inner(),
            tx,
            self.stop.clone(),
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        req: Request<SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<SetForwardingPipelineConfigResponse>, Status> {
        let req = req.into_inner();
        self.check_device(req.device_id)?;
        self.check_primary(&req.role, req.election_id.map(u128::from))?;
        let action = PipelineAction::try_from(req.action).unwrap_or(PipelineAction::Unspecified);
        let verify = |config: Option<ForwardingPipelineConfig>| -> Result<Pipeline, Status> {
            let config =
                config.ok_or_else(|| Status::invalid_argument("the request has no config"))?;
            let p4info = config
                .p4info
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("the config has no P4Info"))?;
            let schema =
                Schema::new(p4info).map_err(|e| Status::invalid_argument(e.to_string()))?;
            // The soft switch's own device config (ports, cables, queues):
            // refused here, not found broken later by the data plane.
            let device_config = DeviceConfig::from_bytes(&config.p4_device_config)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            Ok(Pipeline {
                config,
                schema: Arc::new(schema),
                device_config: Arc::new(device_config),
            })
        };
        let mut state = self.device.write_state();
        match action {
            PipelineAction::Unspecified => {
                return Err(Status::invalid_argument("the action is unspecified"));
            }
            PipelineAction::Verify => {
                verify(req.config)?;
            }
            PipelineAction::VerifyAndSave => state.saved = Some(verify(req.config)?),
            PipelineAction::VerifyAndCommit => {
                let pipeline = verify(req.config)?;
                state.saved = None;
                state.commit(pipeline, false);
                self.device.bump_generation();
            }
            PipelineAction::Commit => {
                let pipeline = state.saved.take().ok_or_else(|| {
                    Status::failed_precondition("COMMIT without a config saved by VERIFY_AND_SAVE")
                })?;
                state.commit(pipeline, false);
                self.device.bump_generation();
            }
            PipelineAction::ReconcileAndCommit => {
                let pipeline = verify(req.config)?;
                let fwd = reconcile(&state, &pipeline.schema)?;
                state.fwd = fwd;
                state.saved = None;
                state.commit(pipeline, true);
                self.device.bump_generation();
            }
        }
        Ok(Response::new(SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        req: Request<GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<GetForwardingPipelineConfigResponse>, Status> {
        let req = req.into_inner();
        self.check_device(req.device_id)?;
        let state = self.device.read_state();
        let mut config = state
            .pipeline()
            .ok_or_else(|| Status::failed_precondition("no forwarding pipeline is set"))?
            .config
            .clone();
        match ResponseType::try_from(req.response_type).unwrap_or(ResponseType::All) {
            ResponseType::All => {}
            ResponseType::CookieOnly => {
                config.p4info = None;
                config.p4_device_config.clear();
            }
            ResponseType::P4infoAndCookie => config.p4_device_config.clear(),
            ResponseType::DeviceConfigAndCookie => config.p4info = None,
        }
        Ok(Response::new(GetForwardingPipelineConfigResponse {
            config: Some(config),
        }))
    }

    async fn write(&self, req: Request<WriteRequest>) -> Result<Response<WriteResponse>, Status> {
        let req = req.into_inner();
        self.check_device(req.device_id)?;
        self.check_primary(&req.role, req.election_id.map(u128::from))?;
        let atomic = match Atomicity::try_from(req.atomicity) {
            Ok(Atomicity::ContinueOnError) => false,
            Ok(Atomicity::RollbackOnError | Atomicity::DataplaneAtomic) => true,
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "unknown atomicity {}",
                    req.atomicity
                )));
            }
        };
        let mut state = self.device.write_state();
        let schema = state
            .pipeline()
            .map(|p| p.schema.clone())
            .ok_or_else(|| Status::failed_precondition("no forwarding pipeline is set"))?;
        let results = apply_batch(&mut state, &schema, &req.updates, atomic);
        // Failed atomic batches changed nothing; anything else may have.
        if results.iter().any(Result::is_ok) && (!atomic || results.iter().all(Result::is_ok)) {
            self.device.bump_generation();
        }
        drop(state);
        if results.iter().all(Result::is_ok) {
            Ok(Response::new(WriteResponse {}))
        } else {
            Err(batch_error(&results))
        }
    }

    async fn read(
        &self,
        req: Request<ReadRequest>,
    ) -> Result<Response<BoxStream<ReadResponse>>, Status> {
        let req = req.into_inner();
        self.check_device(req.device_id)?;
        let mut out = Vec::new();
        {
            let state = self.device.read_state();
            let schema = state
                .pipeline()
                .map(|p| p.schema.clone())
                .ok_or_else(|| Status::failed_precondition("no forwarding pipeline is set"))?;
            for q in &req.entities {
                read_entity(&state, &schema, q, &mut out)?;
            }
        }
        let mut responses: Vec<Result<ReadResponse, Status>> = out
            .chunks(READ_CHUNK)
            .map(|c| {
                Ok(ReadResponse {
                    entities: c.to_vec(),
                })
            })
            .collect();
        if responses.is_empty() {
            responses.push(Ok(ReadResponse::default()));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(responses))))
    }
}

/// A running server; [`ServerHandle::shutdown`] stops it.
#[derive(Debug)]
pub struct ServerHandle {
    addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    streams: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl ServerHandle {
    /// The TCP address the server listens on (with the real port when
    /// port 0 was asked for); `None` on a Unix socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Stops accepting connections and waits (up to 5 s) for open ones to
    /// end; streams still open after that are cut.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.streams.send(true);
        match tokio::time::timeout(Duration::from_secs(5), &mut self.task).await {
            Ok(Ok(result)) => Ok(result?),
            Ok(Err(_)) => Ok(()), // the task panicked or was cancelled
            Err(_) => {
                self.task.abort();
                Ok(())
            }
        }
    }
}

/// Serves the P4Runtime service of `device` on `addr` (port 0 picks a free
/// port), to anyone who can reach it. Returns the bound address and the
/// handle that stops the server.
pub async fn serve(addr: SocketAddr, device: Device) -> Result<(SocketAddr, ServerHandle), Error> {
    serve_tcp(addr, device, None).await
}

/// Serves the P4Runtime service of `device` on TCP `addr`; with `token`,
/// only to clients that send it in every call's metadata, as
/// `authorization: Bearer TOKEN` (others get UNAUTHENTICATED).
pub async fn serve_tcp(
    addr: SocketAddr,
    device: Device,
    token: Option<String>,
) -> Result<(SocketAddr, ServerHandle), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    let handle = spawn(device, token, TcpListenerStream::new(listener), Some(bound));
    Ok((bound, handle))
}

/// Serves the P4Runtime service of `device` on the Unix socket `path`,
/// which only its owner (root) may use: mode 0600, set explicitly.
pub async fn serve_unix(path: &std::path::Path, device: Device) -> Result<ServerHandle, Error> {
    use std::os::unix::fs::PermissionsExt;
    let bind_error = |source| Error::BindUnix {
        path: path.to_owned(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).map_err(bind_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    Ok(spawn(
        device,
        None,
        tokio_stream::wrappers::UnixListenerStream::new(listener),
        None,
    ))
}

/// Compares secrets in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Runs the server on the connections `incoming` yields.
fn spawn<S, IO, E>(
    device: Device,
    token: Option<String>,
    incoming: S,
    addr: Option<SocketAddr>,
) -> ServerHandle
where
    S: tokio_stream::Stream<Item = Result<IO, E>> + Send + 'static,
    IO: tonic::transport::server::Connected
        + tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + Unpin
        + Send
        + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let (streams, streams_stop) = watch::channel(false);
    let service = SoftSwitchService {
        device,
        stop: streams_stop,
    }
    .into_server();
    let expected = token.map(|t| format!("Bearer {t}"));
    let authorize = move |request: tonic::Request<()>| -> Result<tonic::Request<()>, Status> {
        match &expected {
            None => Ok(request),
            Some(expected) => {
                let given = request
                    .metadata()
                    .get("authorization")
                    .map_or(&b""[..], |v| v.as_bytes());
                if constant_time_eq(given, expected.as_bytes()) {
                    Ok(request)
                } else if given.is_empty() {
                    Err(Status::unauthenticated(
                        "this soft switch requires its token: send `authorization: Bearer TOKEN` \
                         in every call's metadata",
                    ))
                } else {
                    Err(Status::unauthenticated(
                        "wrong token for this soft switch (see its --token-file)",
                    ))
                }
            }
        }
    };
    let task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(tonic::service::interceptor::InterceptedService::new(
                service, authorize,
            ))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            }),
    );
    ServerHandle {
        addr,
        stop: Some(stop),
        streams,
        task,
    }
}
