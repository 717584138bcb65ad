//! A soft switch programmed through its P4Runtime service over loopback,
//! with entries built as the lab's controller builds them (every name resolved
//! through the P4Info), and frames to feed its data plane.

#![allow(dead_code)] // each test binary uses a part

use std::net::Ipv4Addr;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use turbonet_p4::p4::config::v1::P4Info;
use turbonet_p4::p4::v1::p4_runtime_client::P4RuntimeClient;
use turbonet_p4::p4::v1::{
    Action, ActionProfileGroup, ActionProfileMember, Entity, FieldMatch, ForwardingPipelineConfig,
    MasterArbitrationUpdate, PacketIn, PacketOut, SetForwardingPipelineConfigRequest,
    StreamMessageRequest, StreamMessageResponse, TableAction, TableEntry, Uint128, Update,
    WriteRequest, action, action_profile_group, entity, field_match,
    set_forwarding_pipeline_config_request::Action as PipelineAction, stream_message_request,
    stream_message_response, table_action, update, write_request::Atomicity,
};
use turbonet_p4::{Schema, turbonet_p4info};
use turbonet_packetio::checksum::internet_checksum;
use turbonet_softswitch::{CounterValue, Device, DeviceConfig, ServerHandle, serve};

pub(crate) const DEVICE: u64 = 1;
pub(crate) const ELECTION: u128 = 1;

/// A virtual switch's MAC (as the lab numbers them).
pub(crate) fn smac(n: u8) -> [u8; 6] {
    [0x02, 0x74, 0x6e, 0, 0, n]
}

/// A host's MAC.
pub(crate) fn hmac(n: u8) -> [u8; 6] {
    [0x02, 0x74, 0x68, 0, 0, n]
}

pub(crate) fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// Builds entities by name against a P4Info.
pub(crate) struct Entities {
    pub schema: Schema,
}

fn bytes(value: u64) -> Vec<u8> {
    let be = value.to_be_bytes();
    let first = be.iter().position(|&b| b != 0).unwrap_or(7);
    be[first..].to_vec()
}

fn mac_value(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0, |v, &b| v << 8 | u64::from(b))
}

impl Entities {
    pub(crate) fn new(p4info: &P4Info) -> Self {
        Self {
            schema: Schema::new(p4info).unwrap(),
        }
    }

    fn table(&self, name: &str) -> u32 {
        self.schema
            .table_by_name(&format!("TurbonetIngress.{name}"))
            .unwrap()
            .id
    }

    fn field(&self, table: &str, field: &str) -> u32 {
        let t = self
            .schema
            .table_by_name(&format!("TurbonetIngress.{table}"))
            .unwrap();
        t.match_fields
            .values()
            .find(|f| f.name == field)
            .unwrap()
            .id
    }

    pub(crate) fn action(&self, name: &str, params: &[(&str, u64)]) -> Action {
        let info = self
            .schema
            .action_by_name(&format!("TurbonetIngress.{name}"))
            .unwrap_or_else(|| panic!("action {name}"));
        Action {
            action_id: info.id,
            params: params
                .iter()
                .map(|(p, v)| action::Param {
                    param_id: info.params.values().find(|i| i.name == *p).unwrap().id,
                    value: bytes(*v),
                })
                .collect(),
        }
    }

    pub(crate) fn counter(&self, name: &str) -> u32 {
        self.schema
            .counter_by_name(&format!("TurbonetIngress.{name}"))
            .unwrap()
            .id
    }

    fn profile(&self) -> u32 {
        self.schema
            .table_by_name("TurbonetIngress.ipv4_lpm")
            .unwrap()
            .implementation_id
            .unwrap()
    }

    fn exact(&self, table: &str, field: &str, v: u64) -> FieldMatch {
        FieldMatch {
            field_id: self.field(table, field),
            field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                value: bytes(v),
            })),
        }
    }

    fn entry(&self, table: &str, m: Vec<FieldMatch>, a: table_action::Type) -> Entity {
        Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry {
                table_id: self.table(table),
                r#match: m,
                action: Some(TableAction { r#type: Some(a) }),
                ..Default::default()
            })),
        }
    }

    /// port_mapper: (port, tag) -> set_vport(vswitch, vport), no inbound
    /// delay or loss.
    pub(crate) fn port_map(&self, port: u32, tag: u16, vswitch: u16, vport: u16) -> Entity {
        self.port_map_in(port, tag, vswitch, vport, 0, 0)
    }

    /// port_mapper: (port, tagged, tag) -> set_vport(vswitch, vport, delay,
    /// loss_threshold), tag 0 untagged; a P4Info whose set_vport lacks the
    /// last two gets the first two only.
    pub(crate) fn port_map_in(
        &self,
        port: u32,
        tag: u16,
        vswitch: u16,
        vport: u16,
        delay_ns: u64,
        loss: u32,
    ) -> Entity {
        let info = self
            .schema
            .action_by_name("TurbonetIngress.set_vport")
            .unwrap();
        let has = |name: &str| info.params.values().any(|p| p.name == name);
        let mut params = vec![("vswitch", u64::from(vswitch)), ("vport", vport.into())];
        if has("delay") {
            params.extend([("delay", delay_ns), ("loss_threshold", loss.into())]);
        }
        self.entry(
            "port_mapper",
            vec![
                self.exact("port_mapper", "standard_metadata.ingress_port", port.into()),
                self.exact("port_mapper", "hdr.vlan.$valid$", u64::from(tag != 0)),
                self.exact("port_mapper", "meta.vid", tag.into()),
            ],
            table_action::Type::Action(self.action("set_vport", &params)),
        )
    }

    /// queue_mapper: vport -> set_egress.
    pub(crate) fn egress(
        &self,
        vport: u16,
        port: u32,
        tag: u16,
        queue: u32,
        delay_ns: u64,
        loss: u32,
    ) -> Entity {
        self.entry(
            "queue_mapper",
            vec![self.exact("queue_mapper", "meta.vport_out", vport.into())],
            table_action::Type::Action(self.action(
                "set_egress",
                &[
                    ("port", port.into()),
                    ("tag", tag.into()),
                    ("queue", queue.into()),
                    ("delay", delay_ns),
                    ("loss_threshold", loss.into()),
                ],
            )),
        )
    }

    /// queue_mapper: vport -> drop (a cut link).
    pub(crate) fn egress_drop(&self, vport: u16) -> Entity {
        self.entry(
            "queue_mapper",
            vec![self.exact("queue_mapper", "meta.vport_out", vport.into())],
            table_action::Type::Action(self.action("drop", &[])),
        )
    }

    pub(crate) fn arp(&self, vswitch: u16, addr: Ipv4Addr, mac: [u8; 6]) -> Entity {
        self.entry(
            "arp_responder",
            vec![
                self.exact("arp_responder", "meta.vswitch", vswitch.into()),
                self.exact("arp_responder", "hdr.arp.tpa", u32::from(addr).into()),
            ],
            table_action::Type::Action(self.action("arp_reply", &[("mac", mac_value(mac))])),
        )
    }

    pub(crate) fn local(&self, vswitch: u16, addr: Ipv4Addr) -> Entity {
        self.entry(
            "local",
            vec![
                self.exact("local", "meta.vswitch", vswitch.into()),
                self.exact("local", "hdr.ipv4.dst", u32::from(addr).into()),
            ],
            table_action::Type::Action(self.action("to_cpu", &[])),
        )
    }

    /// A selector member: set_next_hop(vport, dmac, smac).
    pub(crate) fn member(&self, id: u32, vport: u16, dmac: [u8; 6], smac: [u8; 6]) -> Entity {
        self.member_action(
            id,
            self.action(
                "set_next_hop",
                &[
                    ("vport", vport.into()),
                    ("dmac", mac_value(dmac)),
                    ("smac", mac_value(smac)),
                ],
            ),
        )
    }

    /// A selector member with any action of ipv4_lpm ("to_cpu", "drop").
    pub(crate) fn member_action(&self, id: u32, action: Action) -> Entity {
        Entity {
            entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: self.profile(),
                member_id: id,
                action: Some(action),
            })),
        }
    }

    pub(crate) fn group(&self, id: u32, members: &[(u32, i32)]) -> Entity {
        Entity {
            entity: Some(entity::Entity::ActionProfileGroup(ActionProfileGroup {
                action_profile_id: self.profile(),
                group_id: id,
                members: members
                    .iter()
                    .map(|&(member_id, weight)| action_profile_group::Member {
                        member_id,
                        weight,
                        ..Default::default()
                    })
                    .collect(),
                max_size: 0,
            })),
        }
    }

    fn route(&self, vswitch: u16, prefix: Ipv4Addr, len: u8, a: table_action::Type) -> Entity {
        let mut m = vec![self.exact("ipv4_lpm", "meta.vswitch", vswitch.into())];
        if len > 0 {
            m.push(FieldMatch {
                field_id: self.field("ipv4_lpm", "hdr.ipv4.dst"),
                field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                    value: bytes(u32::from(prefix).into()),
                    prefix_len: len.into(),
                })),
            });
        }
        self.entry("ipv4_lpm", m, a)
    }

    /// ipv4_lpm: (vswitch, prefix/len) -> member (len 0: the field is
    /// left out, a wildcard).
    pub(crate) fn route_member(&self, vswitch: u16, prefix: &str, len: u8, member: u32) -> Entity {
        self.route(
            vswitch,
            ip(prefix),
            len,
            table_action::Type::ActionProfileMemberId(member),
        )
    }

    pub(crate) fn route_group(&self, vswitch: u16, prefix: &str, len: u8, group: u32) -> Entity {
        self.route(
            vswitch,
            ip(prefix),
            len,
            table_action::Type::ActionProfileGroupId(group),
        )
    }

    /// The default action of ipv4_lpm.
    pub(crate) fn lpm_default(&self, action: Action) -> Entity {
        Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry {
                table_id: self.table("ipv4_lpm"),
                action: Some(TableAction {
                    r#type: Some(table_action::Type::Action(action)),
                }),
                is_default_action: true,
                ..Default::default()
            })),
        }
    }
}

/// A soft switch served on loopback, with a primary controller.
pub(crate) struct Bench {
    pub device: Device,
    pub handle: ServerHandle,
    pub client: P4RuntimeClient<Channel>,
    pub stream_tx: mpsc::Sender<StreamMessageRequest>,
    pub stream_rx: tonic::Streaming<StreamMessageResponse>,
    pub e: Entities,
    pub p4info: P4Info,
}

pub(crate) fn pipeline(
    p4info: &P4Info,
    config: &DeviceConfig,
    action: PipelineAction,
) -> SetForwardingPipelineConfigRequest {
    pipeline_raw(p4info, config.to_bytes(), action)
}

fn pipeline_raw(
    p4info: &P4Info,
    p4_device_config: Vec<u8>,
    action: PipelineAction,
) -> SetForwardingPipelineConfigRequest {
    SetForwardingPipelineConfigRequest {
        device_id: DEVICE,
        election_id: Some(Uint128::from(ELECTION)),
        action: action as i32,
        config: Some(ForwardingPipelineConfig {
            p4info: Some(p4info.clone()),
            p4_device_config,
            cookie: None,
        }),
        ..Default::default()
    }
}

impl Bench {
    /// A switch running the turbonet P4Info with `config`.
    pub(crate) async fn start(config: &DeviceConfig) -> Self {
        Self::start_with(turbonet_p4info(), config).await
    }

    pub(crate) async fn start_with(p4info: P4Info, config: &DeviceConfig) -> Self {
        Self::start_raw(p4info, config.to_bytes()).await
    }

    /// A switch running `p4info` with `device_config` as given (p4c's
    /// BMv2 JSON: the soft switch then stands in for BMv2).
    pub(crate) async fn start_raw(p4info: P4Info, device_config: Vec<u8>) -> Self {
        let device = Device::new(DEVICE);
        let (addr, handle) = serve("127.0.0.1:0".parse().unwrap(), device.clone())
            .await
            .unwrap();
        let mut client = P4RuntimeClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let (stream_tx, rx) = mpsc::channel(64);
        let mut stream_rx = client
            .stream_channel(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        stream_tx
            .send(StreamMessageRequest {
                update: Some(stream_message_request::Update::Arbitration(
                    MasterArbitrationUpdate {
                        device_id: DEVICE,
                        election_id: Some(Uint128::from(ELECTION)),
                        ..Default::default()
                    },
                )),
            })
            .await
            .unwrap();
        match stream_rx.next().await.unwrap().unwrap().update {
            Some(stream_message_response::Update::Arbitration(_)) => {}
            other => panic!("expected arbitration, got {other:?}"),
        }
        client
            .set_forwarding_pipeline_config(pipeline_raw(
                &p4info,
                device_config,
                PipelineAction::VerifyAndCommit,
            ))
            .await
            .unwrap();
        Self {
            device,
            handle,
            client,
            stream_tx,
            stream_rx,
            e: Entities::new(&p4info),
            p4info,
        }
    }

    pub(crate) async fn write(&mut self, ty: update::Type, entities: Vec<Entity>) {
        let req = WriteRequest {
            device_id: DEVICE,
            election_id: Some(Uint128::from(ELECTION)),
            updates: entities
                .into_iter()
                .map(|entity| Update {
                    r#type: ty as i32,
                    entity: Some(entity),
                })
                .collect(),
            atomicity: Atomicity::RollbackOnError as i32,
            ..Default::default()
        };
        self.client.write(req).await.unwrap();
    }

    pub(crate) async fn insert(&mut self, entities: Vec<Entity>) {
        self.write(update::Type::Insert, entities).await;
    }

    pub(crate) async fn modify(&mut self, entities: Vec<Entity>) {
        self.write(update::Type::Modify, entities).await;
    }

    /// Commits another device config, keeping the tables.
    pub(crate) async fn reconcile(&mut self, config: &DeviceConfig) {
        self.client
            .set_forwarding_pipeline_config(pipeline(
                &self.p4info,
                config,
                PipelineAction::ReconcileAndCommit,
            ))
            .await
            .unwrap();
    }

    /// The next PacketIn on the primary's stream.
    pub(crate) async fn packet_in(&mut self) -> PacketIn {
        let msg = tokio::time::timeout(Duration::from_secs(5), self.stream_rx.next())
            .await
            .expect("a PacketIn within 5 s")
            .unwrap()
            .unwrap();
        match msg.update {
            Some(stream_message_response::Update::Packet(p)) => p,
            other => panic!("expected a PacketIn, got {other:?}"),
        }
    }

    /// Sends a PacketOut on the primary's stream.
    pub(crate) async fn send_packet_out(&mut self, packet: PacketOut) {
        self.stream_tx
            .send(StreamMessageRequest {
                update: Some(stream_message_request::Update::Packet(packet)),
            })
            .await
            .unwrap();
    }

    /// A counter cell, read back through the device.
    pub(crate) fn counter(&self, name: &str, index: usize) -> CounterValue {
        let id = self.e.counter(name);
        self.device.with_state(|s| s.counter(id, index)).unwrap()
    }

    pub(crate) async fn stop(self) {
        drop(self.stream_tx);
        self.handle.shutdown().await.unwrap();
    }
}

// ------------------------------------------------------------------ frames

/// An ARP request from (sha, spa) for tpa, broadcast.
pub(crate) fn arp_request(sha: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa.octets());
    f.resize(60, 0); // Ethernet minimum, padding
    f
}

/// The Ethernet and IPv4 headers of a test packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ip {
    pub dmac: [u8; 6],
    pub smac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
}

impl Ip {
    pub(crate) fn new(dmac: [u8; 6], smac: [u8; 6], src: &str, dst: &str, ttl: u8) -> Self {
        Self {
            dmac,
            smac,
            src: ip(src),
            dst: ip(dst),
            ttl,
        }
    }

    /// An IPv4 packet with `options` bytes of options (a multiple of 4),
    /// protocol `proto` and `payload`, checksum set.
    pub(crate) fn packet(&self, proto: u8, options: usize, payload: &[u8]) -> Vec<u8> {
        let ihl = 20 + options;
        let mut f = Vec::new();
        f.extend_from_slice(&self.dmac);
        f.extend_from_slice(&self.smac);
        f.extend_from_slice(&[0x08, 0x00]);
        let total = (ihl + payload.len()) as u16;
        f.push(0x40 | (ihl / 4) as u8);
        f.push(0);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0x12, 0x34, 0x40, 0x00]); // id, DF
        f.push(self.ttl);
        f.push(proto);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&self.src.octets());
        f.extend_from_slice(&self.dst.octets());
        // Options: NOPs then an end-of-options.
        f.extend(std::iter::repeat_n(1u8, options));
        if options > 0 {
            f[14 + ihl - 1] = 0;
        }
        let c = internet_checksum(&f[14..14 + ihl]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A UDP datagram of `len` payload bytes.
    pub(crate) fn udp(&self, sport: u16, dport: u16, len: usize) -> Vec<u8> {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&sport.to_be_bytes());
        l4.extend_from_slice(&dport.to_be_bytes());
        l4.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
        l4.extend((0..len).map(|i| i as u8));
        self.packet(17, 0, &l4)
    }

    /// An ICMP echo request (a ping).
    pub(crate) fn ping(&self) -> Vec<u8> {
        let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1];
        icmp.extend_from_slice(b"turbonet ping payload");
        let c = internet_checksum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        self.packet(1, 0, &icmp)
    }
}

/// `frame` with an 802.1Q tag `vid` pushed.
pub(crate) fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// The TTL of an untagged IPv4 frame.
pub(crate) fn ttl(frame: &[u8]) -> u8 {
    frame[22]
}

/// True when the IPv4 header of an untagged frame has a correct checksum
/// (recomputed in full).
pub(crate) fn checksum_ok(frame: &[u8]) -> bool {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    internet_checksum(&frame[14..14 + ihl]) == 0
}
