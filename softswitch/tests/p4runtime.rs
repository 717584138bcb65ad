//! The soft switch's P4Runtime server driven by the generated tonic client
//! over loopback.

use std::time::Duration;

use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use turbonet_p4::google::rpc::{Code, Status as RpcStatus};
use turbonet_p4::p4::v1::p4_runtime_client::P4RuntimeClient;
use turbonet_p4::p4::v1::{
    Action, ActionProfileGroup, ActionProfileMember, CapabilitiesRequest, CounterData,
    CounterEntry, Entity, Error as P4RtError, FieldMatch, ForwardingPipelineConfig,
    GetForwardingPipelineConfigRequest, Index, MasterArbitrationUpdate, PacketIn, PacketMetadata,
    PacketOut, ReadRequest, SetForwardingPipelineConfigRequest, StreamMessageRequest,
    StreamMessageResponse, TableAction, TableEntry, Uint128, Update, WriteRequest, action,
    action_profile_group, entity, field_match, forwarding_pipeline_config,
    get_forwarding_pipeline_config_request::ResponseType,
    set_forwarding_pipeline_config_request::Action as PipelineAction, stream_message_request,
    stream_message_response, table_action, update, write_request::Atomicity,
};
use turbonet_p4::turbonet_p4info;
use turbonet_softswitch::{Device, ServerHandle, serve};

const DEVICE: u64 = 1;
/// A device config: one interface port and a loopback cable.
const DEVICE_CONFIG: &[u8] =
    br#"{"ports":[{"port":1,"interface":"p1"},{"port":3,"cable":4},{"port":4,"cable":3}]}"#;
// p4c's ids in turbonet's P4Info (p4/build/turbonet.p4info.txtpb).
const PORT_MAPPER: u32 = 48185095;
const LOCAL: u32 = 45752960;
const IPV4_LPM: u32 = 48351130;
const DROP: u32 = 31005897;
const SET_VPORT: u32 = 19051355;
const TO_CPU: u32 = 18695779;
const SET_NEXT_HOP: u32 = 20715752;
const ECMP: u32 = 301826970;
const VPORT_RX: u32 = 304518519;
const VPORT_LOST: u32 = 309194266;

type Client = P4RuntimeClient<Channel>;

struct Switch {
    device: Device,
    handle: ServerHandle,
    client: Client,
}

async fn start() -> Switch {
    let device = Device::new(DEVICE);
    let (addr, handle) = serve("127.0.0.1:0".parse().unwrap(), device.clone())
        .await
        .unwrap();
    assert_ne!(addr.port(), 0);
    let client = P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Switch {
        device,
        handle,
        client,
    }
}

/// A controller stream.
struct Controller {
    tx: mpsc::Sender<StreamMessageRequest>,
    rx: tonic::Streaming<StreamMessageResponse>,
}

impl Controller {
    async fn open(client: &mut Client) -> Self {
        let (tx, rx) = mpsc::channel(16);
        let inbound = client
            .stream_channel(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        Self { tx, rx: inbound }
    }

    async fn arbitrate(&mut self, device_id: u64, election_id: u128) {
        let update = MasterArbitrationUpdate {
            device_id,
            election_id: Some(Uint128::from(election_id)),
            ..Default::default()
        };
        let msg = StreamMessageRequest {
            update: Some(stream_message_request::Update::Arbitration(update)),
        };
        self.tx.send(msg).await.unwrap();
    }

    async fn next(&mut self) -> Result<StreamMessageResponse, tonic::Status> {
        tokio::time::timeout(Duration::from_secs(5), self.rx.next())
            .await
            .expect("a stream message within 5 s")
            .expect("the stream is open")
    }

    /// The next arbitration answer: (status code, election id in it).
    async fn arbitration(&mut self) -> (Code, u128) {
        match self.next().await.unwrap().update {
            Some(stream_message_response::Update::Arbitration(a)) => (
                Code::try_from(a.status.unwrap().code).unwrap(),
                a.election_id.map_or(0, u128::from),
            ),
            other => panic!("expected arbitration, got {other:?}"),
        }
    }
}

async fn primary(client: &mut Client, election_id: u128) -> Controller {
    let mut c = Controller::open(client).await;
    c.arbitrate(DEVICE, election_id).await;
    assert_eq!(c.arbitration().await, (Code::Ok, election_id));
    c
}

fn pipeline_request(
    action: PipelineAction,
    election_id: u128,
    cookie: u64,
) -> SetForwardingPipelineConfigRequest {
    SetForwardingPipelineConfigRequest {
        device_id: DEVICE,
        election_id: Some(Uint128::from(election_id)),
        action: action as i32,
        config: Some(ForwardingPipelineConfig {
            p4info: Some(turbonet_p4info()),
            p4_device_config: DEVICE_CONFIG.to_vec(),
            cookie: Some(forwarding_pipeline_config::Cookie { cookie }),
        }),
        ..Default::default()
    }
}

async fn set_pipeline(client: &mut Client, election_id: u128) {
    client
        .set_forwarding_pipeline_config(pipeline_request(
            PipelineAction::VerifyAndCommit,
            election_id,
            7,
        ))
        .await
        .unwrap();
}

fn exact(field_id: u32, value: &[u8]) -> FieldMatch {
    FieldMatch {
        field_id,
        field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
            value: value.to_vec(),
        })),
    }
}

fn lpm(field_id: u32, value: &[u8], prefix_len: i32) -> FieldMatch {
    FieldMatch {
        field_id,
        field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
            value: value.to_vec(),
            prefix_len,
        })),
    }
}

fn act(action_id: u32, params: &[(u32, &[u8])]) -> Action {
    Action {
        action_id,
        params: params
            .iter()
            .map(|(id, v)| action::Param {
                param_id: *id,
                value: v.to_vec(),
            })
            .collect(),
    }
}

fn direct(a: Action) -> Option<TableAction> {
    Some(TableAction {
        r#type: Some(table_action::Type::Action(a)),
    })
}

/// A port_mapper entry: (port, tagged, vlan) -> set_vport(vswitch, vport,
/// no inbound delay, no inbound loss).
fn port_entry(port: &[u8], vlan: &[u8], vport: &[u8]) -> TableEntry {
    TableEntry {
        table_id: PORT_MAPPER,
        r#match: vec![exact(1, port), exact(2, &[1]), exact(3, vlan)],
        action: direct(act(
            SET_VPORT,
            &[(1, &[1]), (2, vport), (3, &[0]), (4, &[0])],
        )),
        ..Default::default()
    }
}

fn upd(ty: update::Type, e: entity::Entity) -> Update {
    Update {
        r#type: ty as i32,
        entity: Some(Entity { entity: Some(e) }),
    }
}

fn table(ty: update::Type, e: TableEntry) -> Update {
    upd(ty, entity::Entity::TableEntry(e))
}

async fn write(
    client: &mut Client,
    election_id: u128,
    updates: Vec<Update>,
) -> Result<(), tonic::Status> {
    write_atomic(client, election_id, updates, Atomicity::ContinueOnError).await
}

async fn write_atomic(
    client: &mut Client,
    election_id: u128,
    updates: Vec<Update>,
    atomicity: Atomicity,
) -> Result<(), tonic::Status> {
    let req = WriteRequest {
        device_id: DEVICE,
        election_id: Some(Uint128::from(election_id)),
        updates,
        atomicity: atomicity as i32,
        ..Default::default()
    };
    client.write(req).await.map(|_| ())
}

/// The per-update codes of a failed Write (section 12.3).
fn update_codes(status: &tonic::Status) -> Vec<(Code, String)> {
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");
    let rpc = RpcStatus::decode(status.details()).unwrap();
    assert_eq!(rpc.code, Code::Unknown as i32);
    rpc.details
        .iter()
        .map(|any| {
            assert_eq!(any.type_url, "type.googleapis.com/p4.v1.Error");
            let e = P4RtError::decode(any.value.as_slice()).unwrap();
            (Code::try_from(e.canonical_code).unwrap(), e.message)
        })
        .collect()
}

async fn read(
    client: &mut Client,
    entities: Vec<entity::Entity>,
) -> Result<Vec<entity::Entity>, tonic::Status> {
    let req = ReadRequest {
        device_id: DEVICE,
        entities: entities
            .into_iter()
            .map(|e| Entity { entity: Some(e) })
            .collect(),
        ..Default::default()
    };
    let mut stream = client.read(req).await?.into_inner();
    let mut out = Vec::new();
    while let Some(resp) = stream.next().await {
        out.extend(resp?.entities.into_iter().filter_map(|e| e.entity));
    }
    Ok(out)
}

fn all_tables() -> entity::Entity {
    entity::Entity::TableEntry(TableEntry::default())
}

fn whole_table(table_id: u32) -> entity::Entity {
    entity::Entity::TableEntry(TableEntry {
        table_id,
        ..Default::default()
    })
}

#[tokio::test]
async fn capabilities_report_the_api_version() {
    let mut s = start().await;
    let caps = s
        .client
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.p4runtime_api_version, "1.4.0");
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn arbitration_primary_backup_and_failover() {
    let mut s = start().await;
    let mut a = primary(&mut s.client, 10).await;

    // A lower election id is a backup: ALREADY_EXISTS with the primary's id.
    let mut b = Controller::open(&mut s.client).await;
    b.arbitrate(DEVICE, 5).await;
    assert_eq!(b.arbitration().await, (Code::AlreadyExists, 10));

    // A higher one takes over; the old primary is told.
    let mut c = Controller::open(&mut s.client).await;
    c.arbitrate(DEVICE, 20).await;
    assert_eq!(c.arbitration().await, (Code::Ok, 20));
    assert_eq!(a.arbitration().await, (Code::AlreadyExists, 20));
    assert_eq!(b.arbitration().await, (Code::AlreadyExists, 20));
    assert_eq!(s.device.primary_election_id(""), Some(20));

    // Only the primary's election id may write or set the pipeline.
    let err = s
        .client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::VerifyAndCommit, 10, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    set_pipeline(&mut s.client, 20).await;
    let err = write(&mut s.client, 10, vec![]).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    write(&mut s.client, 20, vec![]).await.unwrap();

    // The same election id twice in a role is refused.
    let mut dup = Controller::open(&mut s.client).await;
    dup.arbitrate(DEVICE, 5).await;
    assert_eq!(
        dup.next().await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );

    // A stream for another device gets NOT_FOUND.
    let mut wrong = Controller::open(&mut s.client).await;
    wrong.arbitrate(99, 50).await;
    assert_eq!(
        wrong.next().await.unwrap_err().code(),
        tonic::Code::NotFound
    );

    // The primary leaves: the next highest becomes primary and everyone is told.
    drop(c);
    assert_eq!(a.arbitration().await, (Code::Ok, 10));
    assert_eq!(b.arbitration().await, (Code::AlreadyExists, 10));
    write(&mut s.client, 10, vec![]).await.unwrap();
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn pipeline_set_get_and_actions() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;

    // No pipeline yet.
    let err = write(&mut s.client, 1, vec![]).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        read(&mut s.client, vec![all_tables()])
            .await
            .unwrap_err()
            .code(),
        tonic::Code::FailedPrecondition
    );
    let get = |rt: ResponseType| GetForwardingPipelineConfigRequest {
        device_id: DEVICE,
        response_type: rt as i32,
    };
    let err = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::All))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);

    // VERIFY changes nothing; a broken P4Info is INVALID_ARGUMENT.
    s.client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::Verify, 1, 1))
        .await
        .unwrap();
    assert!(
        s.client
            .get_forwarding_pipeline_config(get(ResponseType::All))
            .await
            .is_err()
    );
    let mut bad = pipeline_request(PipelineAction::VerifyAndCommit, 1, 1);
    bad.config.as_mut().unwrap().p4info.as_mut().unwrap().tables[0].action_refs[0].id = 42;
    let err = s
        .client
        .set_forwarding_pipeline_config(bad)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let err = s
        .client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::Commit, 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);

    // VERIFY_AND_COMMIT, then Get with each response type.
    set_pipeline(&mut s.client, 1).await;
    let all = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::All))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(all.p4info, Some(turbonet_p4info()));
    assert_eq!(all.p4_device_config, DEVICE_CONFIG);
    assert_eq!(all.cookie.unwrap().cookie, 7);
    let cookie = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::CookieOnly))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert!(cookie.p4info.is_none() && cookie.p4_device_config.is_empty());
    assert_eq!(cookie.cookie.unwrap().cookie, 7);
    let info = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::P4infoAndCookie))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert!(info.p4info.is_some() && info.p4_device_config.is_empty());
    let dev = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::DeviceConfigAndCookie))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert!(dev.p4info.is_none() && !dev.p4_device_config.is_empty());

    // RECONCILE_AND_COMMIT keeps entries; VERIFY_AND_SAVE + COMMIT clears them.
    write(
        &mut s.client,
        1,
        vec![table(update::Type::Insert, port_entry(&[1], &[10], &[1]))],
    )
    .await
    .unwrap();
    s.client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::ReconcileAndCommit, 1, 8))
        .await
        .unwrap();
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        1
    );
    s.client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::VerifyAndSave, 1, 9))
        .await
        .unwrap();
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        1,
        "SAVE does not realize"
    );
    let mut commit = pipeline_request(PipelineAction::Commit, 1, 0);
    commit.config = None;
    s.client
        .set_forwarding_pipeline_config(commit)
        .await
        .unwrap();
    assert!(
        read(&mut s.client, vec![all_tables()])
            .await
            .unwrap()
            .is_empty()
    );
    let cookie = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::CookieOnly))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cookie.config.unwrap().cookie.unwrap().cookie, 9);
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn table_entries_insert_modify_delete_read() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;

    // Leading zero bytes are accepted and stored canonical.
    let e1 = port_entry(&[0, 1], &[0, 10], &[0, 0, 5]);
    let e2 = port_entry(&[2], &[10], &[6]);
    let local = TableEntry {
        table_id: LOCAL,
        r#match: vec![exact(1, &[1]), exact(2, &[10, 0, 0, 1])],
        action: direct(act(TO_CPU, &[])),
        ..Default::default()
    };
    write(
        &mut s.client,
        1,
        vec![
            table(update::Type::Insert, e1.clone()),
            table(update::Type::Insert, e2.clone()),
            table(update::Type::Insert, local.clone()),
        ],
    )
    .await
    .unwrap();

    let err = write(
        &mut s.client,
        1,
        vec![table(update::Type::Insert, e2.clone())],
    )
    .await
    .unwrap_err();
    assert_eq!(update_codes(&err)[0].0, Code::AlreadyExists);

    // Wildcard reads: every table, one table, one entry.
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        3
    );
    let pm = read(&mut s.client, vec![whole_table(PORT_MAPPER)])
        .await
        .unwrap();
    assert_eq!(pm.len(), 2);
    let one = read(
        &mut s.client,
        vec![entity::Entity::TableEntry(TableEntry {
            table_id: PORT_MAPPER,
            r#match: vec![exact(1, &[1]), exact(2, &[1]), exact(3, &[10])],
            ..Default::default()
        })],
    )
    .await
    .unwrap();
    let entity::Entity::TableEntry(got) = &one[0] else {
        panic!("{one:?}")
    };
    assert_eq!(one.len(), 1);
    assert_eq!(
        got,
        &port_entry(&[1], &[10], &[5]),
        "canonical bytestrings in reads"
    );
    // A partial match filters.
    let by_port = read(
        &mut s.client,
        vec![entity::Entity::TableEntry(TableEntry {
            table_id: PORT_MAPPER,
            r#match: vec![exact(1, &[2])],
            ..Default::default()
        })],
    )
    .await
    .unwrap();
    assert_eq!(by_port.len(), 1);

    // MODIFY changes the action; MODIFY/DELETE of a missing entry is NOT_FOUND.
    write(
        &mut s.client,
        1,
        vec![table(update::Type::Modify, port_entry(&[1], &[10], &[9]))],
    )
    .await
    .unwrap();
    let snap = s.device.snapshot();
    let entry = snap.tables[&PORT_MAPPER].entries.values().next().unwrap();
    assert_eq!(entry.action, port_entry(&[1], &[10], &[9]).action);
    let missing = port_entry(&[3], &[10], &[1]);
    let err = write(
        &mut s.client,
        1,
        vec![
            table(update::Type::Modify, missing.clone()),
            table(update::Type::Delete, missing),
        ],
    )
    .await
    .unwrap_err();
    let codes: Vec<Code> = update_codes(&err).into_iter().map(|c| c.0).collect();
    assert_eq!(codes, vec![Code::NotFound, Code::NotFound]);

    // Default action: MODIFY with is_default_action, read back.
    let default = TableEntry {
        table_id: LOCAL,
        is_default_action: true,
        action: direct(act(TO_CPU, &[])),
        ..Default::default()
    };
    write(
        &mut s.client,
        1,
        vec![table(update::Type::Modify, default.clone())],
    )
    .await
    .unwrap();
    let got = read(
        &mut s.client,
        vec![entity::Entity::TableEntry(TableEntry {
            table_id: LOCAL,
            is_default_action: true,
            ..Default::default()
        })],
    )
    .await
    .unwrap();
    assert_eq!(got, vec![entity::Entity::TableEntry(default.clone())]);
    let err = write(&mut s.client, 1, vec![table(update::Type::Insert, default)])
        .await
        .unwrap_err();
    assert_eq!(update_codes(&err)[0].0, Code::InvalidArgument);

    // DELETE.
    write(
        &mut s.client,
        1,
        vec![
            table(update::Type::Delete, e2),
            table(update::Type::Delete, local),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        1
    );
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_entries_get_per_update_errors() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;

    let good = port_entry(&[1], &[1], &[1]);
    // set_vport's vport is bit<16>: three significant bytes do not fit.
    let wide_param = port_entry(&[1], &[2], &[1, 0, 0]);
    // port is bit<9>: 0x200 does not fit.
    let wide_key = port_entry(&[2, 0], &[2], &[1]);
    let unknown_table = TableEntry {
        table_id: 0x0200_0fff,
        ..port_entry(&[1], &[3], &[1])
    };
    let lpm_entry = |value: &[u8], len: i32| TableEntry {
        table_id: IPV4_LPM,
        r#match: vec![exact(1, &[1]), lpm(2, value, len)],
        action: Some(TableAction {
            r#type: Some(table_action::Type::ActionProfileMemberId(1)),
        }),
        ..Default::default()
    };
    let host_bits = lpm_entry(&[10, 0, 0, 1], 24);
    let long_prefix = lpm_entry(&[10, 0, 0, 0], 33);
    let missing_exact = TableEntry {
        r#match: vec![exact(1, &[1])],
        ..port_entry(&[1], &[4], &[1])
    };
    let wrong_kind = TableEntry {
        r#match: vec![exact(1, &[1]), lpm(2, &[5], 12)],
        ..port_entry(&[1], &[5], &[1])
    };
    let priority = TableEntry {
        priority: 10,
        ..port_entry(&[1], &[6], &[1])
    };
    let unknown_action = TableEntry {
        action: direct(act(TO_CPU, &[])),
        ..port_entry(&[1], &[7], &[1])
    };
    let missing_param = TableEntry {
        action: direct(act(SET_VPORT, &[(1, &[1])])),
        ..port_entry(&[1], &[8], &[1])
    };
    let unspecified = Update {
        r#type: 0,
        ..table(update::Type::Insert, port_entry(&[1], &[9], &[1]))
    };

    let err = write(
        &mut s.client,
        1,
        vec![
            table(update::Type::Insert, good),
            table(update::Type::Insert, wide_param),
            table(update::Type::Insert, wide_key),
            table(update::Type::Insert, unknown_table),
            table(update::Type::Insert, host_bits),
            table(update::Type::Insert, long_prefix),
            table(update::Type::Insert, missing_exact),
            table(update::Type::Insert, wrong_kind),
            table(update::Type::Insert, priority),
            table(update::Type::Insert, unknown_action),
            table(update::Type::Insert, missing_param),
            unspecified,
        ],
    )
    .await
    .unwrap_err();
    let codes = update_codes(&err);
    let only: Vec<Code> = codes.iter().map(|c| c.0).collect();
    assert_eq!(
        only,
        vec![
            Code::Ok,
            Code::OutOfRange,
            Code::OutOfRange,
            Code::NotFound,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
            Code::InvalidArgument,
        ],
        "{codes:#?}"
    );
    assert!(codes[4].1.contains("past the /24 prefix"), "{}", codes[4].1);
    // CONTINUE_ON_ERROR: the good update was applied.
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        1
    );

    // ROLLBACK_ON_ERROR: nothing is applied, the good update is ABORTED.
    let err = write_atomic(
        &mut s.client,
        1,
        vec![
            table(update::Type::Insert, port_entry(&[3], &[3], &[3])),
            table(update::Type::Insert, port_entry(&[1], &[1], &[1])),
        ],
        Atomicity::RollbackOnError,
    )
    .await
    .unwrap_err();
    let only: Vec<Code> = update_codes(&err).into_iter().map(|c| c.0).collect();
    assert_eq!(only, vec![Code::Aborted, Code::AlreadyExists]);
    assert_eq!(
        read(&mut s.client, vec![all_tables()]).await.unwrap().len(),
        1
    );
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn action_profile_members_groups_and_ecmp_entries() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;

    let member = |id: u32, vport: u8| {
        upd(
            update::Type::Insert,
            entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: ECMP,
                member_id: id,
                action: Some(act(
                    SET_NEXT_HOP,
                    &[
                        (1, &[vport]),
                        (2, &[2, 0, 0, 0, 0, vport]),
                        (3, &[2, 0, 0, 0, 0, 1]),
                    ],
                )),
            }),
        )
    };
    let group = |ty: update::Type, id: u32, members: &[u32]| {
        upd(
            ty,
            entity::Entity::ActionProfileGroup(ActionProfileGroup {
                action_profile_id: ECMP,
                group_id: id,
                members: members
                    .iter()
                    .map(|m| action_profile_group::Member {
                        member_id: *m,
                        weight: 1,
                        ..Default::default()
                    })
                    .collect(),
                max_size: 0,
            }),
        )
    };
    let route = |ty: update::Type, a: table_action::Type| {
        table(
            ty,
            TableEntry {
                table_id: IPV4_LPM,
                r#match: vec![exact(1, &[1]), lpm(2, &[10, 1, 0, 0], 16)],
                action: Some(TableAction { r#type: Some(a) }),
                ..Default::default()
            },
        )
    };
    write(
        &mut s.client,
        1,
        vec![
            member(1, 1),
            member(2, 2),
            group(update::Type::Insert, 100, &[1, 2]),
        ],
    )
    .await
    .unwrap();

    // The program's @max_group_size(16), in p4c's P4Info: 16 members fit,
    // 17 do not.
    write(
        &mut s.client,
        1,
        (10..=26).map(|id| member(id, id as u8)).collect(),
    )
    .await
    .unwrap();
    let sixteen: Vec<u32> = (10..26).collect();
    write(
        &mut s.client,
        1,
        vec![group(update::Type::Insert, 200, &sixteen)],
    )
    .await
    .unwrap();
    let seventeen: Vec<u32> = (10..=26).collect();
    let err = write(
        &mut s.client,
        1,
        vec![group(update::Type::Insert, 201, &seventeen)],
    )
    .await
    .unwrap_err();
    let why = update_codes(&err);
    assert_eq!(why[0].0, Code::ResourceExhausted, "{why:?}");
    let mut undo = vec![group(update::Type::Delete, 200, &[])];
    undo.extend((10..=26).map(|id| {
        upd(
            update::Type::Delete,
            entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: ECMP,
                member_id: id,
                action: None,
            }),
        )
    }));
    write(&mut s.client, 1, undo).await.unwrap();

    let drop_member = upd(
        update::Type::Insert,
        entity::Entity::ActionProfileMember(ActionProfileMember {
            action_profile_id: ECMP,
            member_id: 3,
            action: Some(act(DROP, &[])),
        }),
    );
    let err = write(
        &mut s.client,
        1,
        vec![
            group(update::Type::Insert, 101, &[1, 9]),
            route(
                update::Type::Insert,
                table_action::Type::Action(act(TO_CPU, &[])),
            ),
            route(
                update::Type::Insert,
                table_action::Type::ActionProfileMemberId(7),
            ),
            group(update::Type::Insert, 100, &[1]),
            drop_member,
        ],
    )
    .await
    .unwrap_err();
    let only: Vec<Code> = update_codes(&err).into_iter().map(|c| c.0).collect();
    assert_eq!(
        only,
        vec![
            Code::NotFound,
            Code::InvalidArgument,
            Code::NotFound,
            Code::AlreadyExists,
            Code::Ok
        ]
    );

    // An ECMP route through the group; members and group are then in use.
    write(
        &mut s.client,
        1,
        vec![route(
            update::Type::Insert,
            table_action::Type::ActionProfileGroupId(100),
        )],
    )
    .await
    .unwrap();
    let delete_member = upd(
        update::Type::Delete,
        entity::Entity::ActionProfileMember(ActionProfileMember {
            action_profile_id: ECMP,
            member_id: 1,
            action: None,
        }),
    );
    let err = write(
        &mut s.client,
        1,
        vec![delete_member.clone(), group(update::Type::Delete, 100, &[])],
    )
    .await
    .unwrap_err();
    let only: Vec<Code> = update_codes(&err).into_iter().map(|c| c.0).collect();
    assert_eq!(
        only,
        vec![Code::FailedPrecondition, Code::FailedPrecondition]
    );

    // Reads: every member, every group.
    let members = read(
        &mut s.client,
        vec![entity::Entity::ActionProfileMember(ActionProfileMember {
            action_profile_id: ECMP,
            ..Default::default()
        })],
    )
    .await
    .unwrap();
    assert_eq!(members.len(), 3);
    let groups = read(
        &mut s.client,
        vec![entity::Entity::ActionProfileGroup(
            ActionProfileGroup::default(),
        )],
    )
    .await
    .unwrap();
    assert_eq!(groups.len(), 1);
    let snap = s.device.snapshot();
    assert_eq!(snap.profiles[&ECMP].groups[&100].members.len(), 2);

    // MODIFY the group down to one member, then tear everything down in order.
    write(
        &mut s.client,
        1,
        vec![group(update::Type::Modify, 100, &[2])],
    )
    .await
    .unwrap();
    write(
        &mut s.client,
        1,
        vec![
            delete_member,
            route(
                update::Type::Delete,
                table_action::Type::ActionProfileGroupId(100),
            ),
            group(update::Type::Delete, 100, &[]),
        ],
    )
    .await
    .unwrap();
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn counters_count_read_and_reset() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;

    s.device.count(VPORT_RX, 3, 100).unwrap();
    s.device.count(VPORT_RX, 3, 60).unwrap();
    s.device.count(VPORT_LOST, 3, 60).unwrap();
    assert!(s.device.count(VPORT_RX, 1 << 20, 1).is_err());

    let cell = |counter_id: u32, index: Option<i64>| {
        entity::Entity::CounterEntry(CounterEntry {
            counter_id,
            index: index.map(|index| Index { index }),
            data: None,
        })
    };
    let got = read(&mut s.client, vec![cell(VPORT_RX, Some(3))])
        .await
        .unwrap();
    let entity::Entity::CounterEntry(c) = &got[0] else {
        panic!()
    };
    assert_eq!(
        c.data,
        Some(CounterData {
            packet_count: 2,
            byte_count: 160
        })
    );
    // PACKETS-only counters report no bytes.
    let got = read(&mut s.client, vec![cell(VPORT_LOST, Some(3))])
        .await
        .unwrap();
    let entity::Entity::CounterEntry(c) = &got[0] else {
        panic!()
    };
    assert_eq!(
        c.data,
        Some(CounterData {
            packet_count: 1,
            byte_count: 0
        })
    );
    // Wildcards: every index of one counter, every counter.
    assert_eq!(
        read(&mut s.client, vec![cell(VPORT_RX, None)])
            .await
            .unwrap()
            .len(),
        16384
    );
    assert_eq!(
        read(&mut s.client, vec![cell(0, None)])
            .await
            .unwrap()
            .len(),
        4 * 16384,
        "vport_rx, vport_tx, vport_lost, vport_rx_lost"
    );
    assert_eq!(
        read(&mut s.client, vec![cell(VPORT_RX, Some(16384))])
            .await
            .unwrap_err()
            .code(),
        tonic::Code::OutOfRange
    );

    // MODIFY resets; INSERT is refused.
    let reset = upd(
        update::Type::Modify,
        entity::Entity::CounterEntry(CounterEntry {
            counter_id: VPORT_RX,
            index: Some(Index { index: 3 }),
            data: Some(CounterData::default()),
        }),
    );
    write(&mut s.client, 1, vec![reset]).await.unwrap();
    assert_eq!(s.device.snapshot().counters[&VPORT_RX][3].packets, 0);
    let insert = upd(
        update::Type::Insert,
        entity::Entity::CounterEntry(CounterEntry {
            counter_id: VPORT_RX,
            index: Some(Index { index: 1 }),
            data: None,
        }),
    );
    let err = write(&mut s.client, 1, vec![insert]).await.unwrap_err();
    assert_eq!(update_codes(&err)[0].0, Code::InvalidArgument);
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn packet_out_reaches_the_data_plane_and_packet_in_the_primary() {
    let mut s = start().await;
    let mut data_plane = s.device.take_packet_out_receiver().unwrap();
    assert!(s.device.take_packet_out_receiver().is_none());
    let mut p = primary(&mut s.client, 2).await;
    let mut b = Controller::open(&mut s.client).await;
    b.arbitrate(DEVICE, 1).await;
    assert_eq!(b.arbitration().await.0, Code::AlreadyExists);
    set_pipeline(&mut s.client, 2).await;

    let packet = PacketOut {
        payload: b"frame".to_vec(),
        metadata: vec![
            PacketMetadata {
                metadata_id: 1,
                value: vec![0, 1],
            },
            PacketMetadata {
                metadata_id: 2,
                value: vec![3],
            },
        ],
    };
    let out = |p: PacketOut| StreamMessageRequest {
        update: Some(stream_message_request::Update::Packet(p)),
    };
    p.tx.send(out(packet.clone())).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), data_plane.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.payload, b"frame");
    assert_eq!(got.metadata[0].value, vec![1], "canonical metadata");

    // A backup's packet is refused with a stream error.
    b.tx.send(out(packet)).await.unwrap();
    match b.next().await.unwrap().update {
        Some(stream_message_response::Update::Error(e)) => {
            assert_eq!(e.canonical_code, Code::PermissionDenied as i32);
        }
        other => panic!("expected a stream error, got {other:?}"),
    }

    // PacketIn goes to the primary only.
    let sent = s.device.packet_in(PacketIn {
        payload: b"punt".to_vec(),
        metadata: vec![],
    });
    assert_eq!(sent, 1);
    match p.next().await.unwrap().update {
        Some(stream_message_response::Update::Packet(pi)) => assert_eq!(pi.payload, b"punt"),
        other => panic!("expected a packet, got {other:?}"),
    }
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn device_configs_that_do_not_validate_are_invalid_argument() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;
    let generation = s.device.generation();
    for (bytes, what) in [
        (
            &br#"{"ports":[{"port":3,"cable":4}]}"#[..],
            "port 3: its cable goes to port 4, which is not configured",
        ),
        (b"soft", "device config: expected value"),
        (
            br#"{"ports":[{"port":1,"interface":"p1","queues":[{"queue":0,"rate_bps":0}]}]}"#,
            "rate_bps must be positive",
        ),
    ] {
        for action in [
            PipelineAction::Verify,
            PipelineAction::VerifyAndSave,
            PipelineAction::VerifyAndCommit,
            PipelineAction::ReconcileAndCommit,
        ] {
            let mut req = pipeline_request(action, 1, 9);
            req.config.as_mut().unwrap().p4_device_config = bytes.to_vec();
            let err = s
                .client
                .set_forwarding_pipeline_config(req)
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{action:?}");
            assert!(
                err.message().contains(what),
                "{action:?}: {}",
                err.message()
            );
        }
    }
    // Nothing was committed, and the committed config is the old one.
    assert_eq!(s.device.generation(), generation);
    let snapshot = s.device.snapshot();
    let pipeline = snapshot.pipeline.unwrap();
    assert_eq!(pipeline.config.p4_device_config, DEVICE_CONFIG);
    assert_eq!(pipeline.device_config.ports.len(), 3);
    // COMMIT has nothing saved.
    let err = s
        .client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::Commit, 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn generation_moves_with_commits_and_write_batches() {
    let mut s = start().await;
    let _c = primary(&mut s.client, 1).await;
    let g0 = s.device.generation();
    set_pipeline(&mut s.client, 1).await;
    let g1 = s.device.generation();
    assert!(g1 > g0);
    write(
        &mut s.client,
        1,
        vec![table(update::Type::Insert, port_entry(&[1], &[10], &[1]))],
    )
    .await
    .unwrap();
    let g2 = s.device.generation();
    assert!(g2 > g1);
    // A batch that fails as a whole changes nothing and keeps the generation.
    let err = write_atomic(
        &mut s.client,
        1,
        vec![
            table(update::Type::Insert, port_entry(&[1], &[11], &[2])),
            table(update::Type::Insert, port_entry(&[1], &[10], &[1])),
        ],
        Atomicity::RollbackOnError,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(s.device.generation(), g2);
    s.client
        .set_forwarding_pipeline_config(pipeline_request(PipelineAction::ReconcileAndCommit, 1, 8))
        .await
        .unwrap();
    assert!(s.device.generation() > g2);
    s.handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_controller_that_does_not_read_its_stream_never_stalls_another() {
    let mut s = start().await;
    let mut data_plane = s.device.take_packet_out_receiver().unwrap();
    // The first primary sets the pipeline, then stops reading its stream
    // while PacketIns fill it.
    let idle = primary(&mut s.client, 1).await;
    set_pipeline(&mut s.client, 1).await;
    // More than its queue, the HTTP/2 windows and the buffers between hold.
    for i in 0..20_000 {
        s.device.packet_in(PacketIn {
            payload: vec![0; 4000],
            metadata: vec![],
        });
        if i % 64 == 0 {
            // Let the server move what it can towards the client.
            tokio::task::yield_now().await;
        }
    }
    // A new primary takes over: the old one is told (if it has room), and
    // the new one's packets flow.
    let p = primary(&mut s.client, 2).await;
    p.tx.send(StreamMessageRequest {
        update: Some(stream_message_request::Update::Packet(PacketOut {
            payload: b"frame".to_vec(),
            metadata: vec![
                PacketMetadata {
                    metadata_id: 1,
                    value: vec![1],
                },
                PacketMetadata {
                    metadata_id: 2,
                    value: vec![3],
                },
            ],
        })),
    })
    .await
    .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), data_plane.recv())
        .await
        .expect("the new primary's packet reaches the data plane")
        .unwrap();
    assert_eq!(got.payload, b"frame");
    drop(idle);
    s.handle.shutdown().await.unwrap();
}
