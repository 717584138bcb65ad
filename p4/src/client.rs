//! A P4Runtime client for one device: connect, become primary, set the
//! pipeline, write and read (P4Runtime specification §5-§12).

use crate::Error;
use crate::google::rpc;
use crate::p4::config::v1::P4Info;
use crate::p4::v1::p4_runtime_client::P4RuntimeClient;
use crate::p4::v1::{
    Entity, ForwardingPipelineConfig, MasterArbitrationUpdate, ReadRequest,
    SetForwardingPipelineConfigRequest, StreamMessageRequest, StreamMessageResponse, Uint128,
    Update, WriteRequest, set_forwarding_pipeline_config_request::Action as PipelineAction,
    stream_message_request, stream_message_response, update,
};
use prost::Message;
use tokio::sync::mpsc;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

type Result<T> = std::result::Result<T, Error>;

/// Adds `authorization: Bearer TOKEN` to every call when a token is set
/// (turbonet's soft switch on TCP requires it).
#[derive(Debug, Clone, Default)]
pub struct Token(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl Token {
    /// No token.
    pub fn none() -> Token {
        Token(None)
    }

    /// `token`, sent as a bearer token; fails if it is not printable ASCII.
    pub fn bearer(token: &str) -> Result<Token> {
        format!("Bearer {}", token.trim())
            .parse()
            .map(|v| Token(Some(v)))
            .map_err(|_| Error::BadToken)
    }
}

impl tonic::service::Interceptor for Token {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Updates per WriteRequest.
const BATCH: usize = 1000;

/// A session with one device as its primary controller.
#[derive(Debug)]
pub struct Client {
    rpc: P4RuntimeClient<InterceptedService<Channel, Token>>,
    device_id: u64,
    election_id: Uint128,
    /// The stream: open as long as its sender lives (and with it the
    /// primary role); [`Client::packet_io`] hands both ends out.
    stream: Option<(
        mpsc::Sender<StreamMessageRequest>,
        tonic::Streaming<StreamMessageResponse>,
    )>,
}

/// The controller's ends of a device's stream (§16): PacketOut goes in,
/// PacketIn (and the device's other messages) come out.
pub type PacketIo = (
    mpsc::Sender<StreamMessageRequest>,
    tonic::Streaming<StreamMessageResponse>,
);

impl Client {
    /// Connects to `addr` (`host:port`) and becomes primary for
    /// `device_id` with `election_id` (§5): fails if another controller
    /// holds a higher election id.
    pub async fn connect(addr: &str, device_id: u64, election_id: u128) -> Result<Client> {
        Self::connect_with(addr, device_id, election_id, Token::none()).await
    }

    /// [`Client::connect`], presenting `token` with every call.
    pub async fn connect_with(
        addr: &str,
        device_id: u64,
        election_id: u128,
        token: Token,
    ) -> Result<Client> {
        let connect_error = |source| Error::Connect {
            addr: addr.to_owned(),
            source,
        };
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(connect_error)?
            .connect()
            .await
            .map_err(connect_error)?;
        Self::arbitrate(channel, token, addr, device_id, election_id).await
    }

    /// Becomes primary for `device_id` with `election_id` over `channel`
    /// (a connection the caller made, e.g. inside a network namespace or
    /// over a Unix socket); `addr` names the server in messages.
    pub async fn over(
        channel: Channel,
        addr: &str,
        device_id: u64,
        election_id: u128,
    ) -> Result<Client> {
        Self::arbitrate(channel, Token::none(), addr, device_id, election_id).await
    }

    /// Opens the stream on `channel` and becomes primary (§5).
    async fn arbitrate(
        channel: Channel,
        token: Token,
        addr: &str,
        device_id: u64,
        election_id: u128,
    ) -> Result<Client> {
        let mut rpc = P4RuntimeClient::with_interceptor(channel, token)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        let (tx, rx) = mpsc::channel(16);
        let closed = |when| Error::StreamClosed {
            device_id,
            addr: addr.to_owned(),
            when,
        };
        tx.send(StreamMessageRequest {
            update: Some(stream_message_request::Update::Arbitration(
                MasterArbitrationUpdate {
                    device_id,
                    election_id: Some(election_id.into()),
                    ..Default::default()
                },
            )),
        })
        .await
        .map_err(|_| closed("before arbitration"))?;
        let mut responses = rpc
            .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .map_err(|s| Error::rpc("opening the P4Runtime stream", &s))?
            .into_inner();
        loop {
            let response = responses
                .message()
                .await
                .map_err(|s| Error::rpc("arbitration", &s))?
                .ok_or_else(|| closed("during arbitration"))?;
            if let Some(stream_message_response::Update::Arbitration(a)) = response.update {
                let code = a.status.as_ref().map_or(0, |s| s.code);
                if code != rpc::Code::Ok as i32 {
                    return Err(Error::NotPrimary {
                        device_id,
                        addr: addr.to_owned(),
                        election_id,
                        message: a.status.map(|s| s.message).unwrap_or_default(),
                    });
                }
                break;
            }
        }
        Ok(Client {
            rpc,
            device_id,
            election_id: election_id.into(),
            stream: Some((tx, responses)),
        })
    }

    /// The stream's ends, for packet I/O through the CPU port; the session
    /// stays primary while the sender lives. Only the first call gets them.
    pub fn packet_io(&mut self) -> Option<PacketIo> {
        self.stream.take()
    }

    /// Installs the pipeline: its P4Info and the target's artifact (BMv2
    /// JSON, Tofino binary, the soft switch's port configuration). The
    /// device starts with empty tables.
    pub async fn set_pipeline(&mut self, p4info: P4Info, device_config: Vec<u8>) -> Result<()> {
        self.pipeline(PipelineAction::VerifyAndCommit, p4info, device_config)
            .await
    }

    /// Changes the device config of the running pipeline, keeping its
    /// tables (RECONCILE_AND_COMMIT, §7.2).
    pub async fn reconcile_pipeline(
        &mut self,
        p4info: P4Info,
        device_config: Vec<u8>,
    ) -> Result<()> {
        self.pipeline(PipelineAction::ReconcileAndCommit, p4info, device_config)
            .await
    }

    async fn pipeline(
        &mut self,
        action: PipelineAction,
        p4info: P4Info,
        device_config: Vec<u8>,
    ) -> Result<()> {
        self.rpc
            .set_forwarding_pipeline_config(SetForwardingPipelineConfigRequest {
                device_id: self.device_id,
                election_id: Some(self.election_id),
                action: action as i32,
                config: Some(ForwardingPipelineConfig {
                    p4info: Some(p4info),
                    p4_device_config: device_config,
                    cookie: None,
                }),
                ..Default::default()
            })
            .await
            .map_err(|s| Error::rpc("setting the pipeline", &s))?;
        Ok(())
    }

    /// Writes `entities` (`kind` INSERT, MODIFY or DELETE) in batches, in
    /// order; the first failed batch fails with the device's reasons for
    /// its first failed updates.
    pub async fn write(&mut self, kind: update::Type, entities: Vec<Entity>) -> Result<()> {
        self.write_updates(
            entities
                .into_iter()
                .map(|entity| Update {
                    r#type: kind as i32,
                    entity: Some(entity),
                })
                .collect(),
        )
        .await
    }

    /// Writes `updates` in batches. Updates of one batch may be applied in
    /// any order (§12.2): give dependent updates separate calls.
    pub async fn write_updates(&mut self, updates: Vec<Update>) -> Result<()> {
        let mut updates = updates.into_iter().peekable();
        while updates.peek().is_some() {
            let updates: Vec<Update> = updates.by_ref().take(BATCH).collect();
            let request = WriteRequest {
                device_id: self.device_id,
                election_id: Some(self.election_id),
                updates,
                ..Default::default()
            };
            if let Err(status) = self.rpc.write(request).await {
                return Err(Error::Rpc {
                    what: format!("writing to device {}", self.device_id),
                    code: status.code(),
                    message: describe(&status),
                });
            }
        }
        Ok(())
    }

    /// Reads what matches `filter` (wildcards as §11 allows).
    pub async fn read(&mut self, filter: Entity) -> Result<Vec<Entity>> {
        self.read_all(vec![filter]).await
    }

    /// Reads what matches any of `filters`, in one request.
    pub async fn read_all(&mut self, filters: Vec<Entity>) -> Result<Vec<Entity>> {
        let mut stream = self
            .rpc
            .read(ReadRequest {
                device_id: self.device_id,
                entities: filters,
                ..Default::default()
            })
            .await
            .map_err(|s| Error::rpc("reading", &s))?
            .into_inner();
        let mut out = Vec::new();
        while let Some(response) = stream
            .message()
            .await
            .map_err(|s| Error::rpc("reading", &s))?
        {
            out.extend(response.entities);
        }
        Ok(out)
    }
}

/// A failed Write's status with the first per-update errors (§12.3).
fn describe(status: &tonic::Status) -> String {
    let mut text = status.message().to_owned();
    if let Ok(details) = rpc::Status::decode(status.details()) {
        let errors: Vec<String> = details
            .details
            .iter()
            .filter_map(|any| crate::p4::v1::Error::decode(any.value.as_slice()).ok())
            .enumerate()
            .filter(|(_, e)| e.canonical_code != rpc::Code::Ok as i32)
            .take(3)
            .map(|(i, e)| format!("update {i}: {}", e.message))
            .collect();
        if !errors.is_empty() {
            text.push_str(": ");
            text.push_str(&errors.join("; "));
        }
    }
    text
}
