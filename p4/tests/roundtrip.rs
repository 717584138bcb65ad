//! Encode/decode round trips of the messages turbonet sends most.

use prost::Message;
use turbonet_p4::p4::v1::{
    Action, Entity, FieldMatch, MasterArbitrationUpdate, Role, StreamMessageRequest, TableAction,
    TableEntry, Uint128, Update, WriteRequest, action, field_match, stream_message_request,
    table_action, update, write_request,
};

fn roundtrip<M: Message + Default + PartialEq + std::fmt::Debug>(msg: &M) {
    let bytes = msg.encode_to_vec();
    assert_eq!(bytes.len(), msg.encoded_len());
    let back = M::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(&back, msg);
}

/// ipv4_lpm: 10.1.0.0/16 -> set_nhop(port 3, dmac 00:00:0a:01:00:01).
fn lpm_entry() -> TableEntry {
    TableEntry {
        table_id: 0x0200_0001,
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                value: vec![10, 1, 0, 0],
                prefix_len: 16,
            })),
        }],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(Action {
                action_id: 0x0100_0002,
                params: vec![
                    action::Param {
                        param_id: 1,
                        value: vec![3],
                    },
                    action::Param {
                        param_id: 2,
                        value: vec![0x0a, 0x01, 0x00, 0x01],
                    },
                ],
            })),
        }),
        metadata: b"turbonet".to_vec(),
        ..Default::default()
    }
}

#[test]
fn table_entry_with_lpm_match_and_action() {
    let entry = lpm_entry();
    roundtrip(&entry);

    let back = TableEntry::decode(entry.encode_to_vec().as_slice()).unwrap();
    match &back.r#match[0].field_match_type {
        Some(field_match::FieldMatchType::Lpm(lpm)) => assert_eq!(lpm.prefix_len, 16),
        other => panic!("expected an LPM match, got {other:?}"),
    }
}

#[test]
fn write_request_with_election_id() {
    let req = WriteRequest {
        device_id: 1,
        election_id: Some(Uint128::from((7u128 << 64) | 42)),
        updates: vec![Update {
            r#type: update::Type::Insert as i32,
            entity: Some(Entity {
                entity: Some(turbonet_p4::p4::v1::entity::Entity::TableEntry(lpm_entry())),
            }),
        }],
        atomicity: write_request::Atomicity::ContinueOnError as i32,
        role: String::new(),
        ..Default::default()
    };
    roundtrip(&req);

    let back = WriteRequest::decode(req.encode_to_vec().as_slice()).unwrap();
    let election = back.election_id.unwrap();
    assert_eq!((election.high, election.low), (7, 42));
    assert_eq!(u128::from(election), (7u128 << 64) | 42);
    assert_eq!(back.updates[0].r#type(), update::Type::Insert);
}

#[test]
fn stream_message_request_arbitration() {
    let req = StreamMessageRequest {
        update: Some(stream_message_request::Update::Arbitration(
            MasterArbitrationUpdate {
                device_id: 1,
                role: Some(Role {
                    name: "turbonet".into(),
                    ..Default::default()
                }),
                election_id: Some(Uint128 { high: 0, low: 1 }),
                status: None,
            },
        )),
    };
    roundtrip(&req);
}
