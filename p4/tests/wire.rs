//! Wire-format fixtures: bytes built by hand from the P4Runtime
//! specification's field numbers, checked in both directions (message ->
//! bytes and bytes -> message). A wrong field number or type in the
//! `.proto` files fails here.

use prost::Message;
use turbonet_p4::google::rpc::{Code, Status};
use turbonet_p4::p4::config::v1::{P4Info, P4TypeInfo};
use turbonet_p4::p4::v1::{
    CapabilitiesResponse, FieldMatch, MasterArbitrationUpdate, StreamMessageRequest, TableEntry,
    Uint128, Update, field_match, stream_message_request, update,
};

/// Asserts `msg` encodes to exactly `bytes` and `bytes` decodes to `msg`.
fn fixture<M: Message + Default + PartialEq + std::fmt::Debug>(msg: M, bytes: &[u8]) {
    assert_eq!(msg.encode_to_vec(), bytes, "encoding of {msg:?}");
    assert_eq!(M::decode(bytes).expect("decodes"), msg);
}

#[test]
fn capabilities_response() {
    // field 1 (p4runtime_api_version), wire type 2: tag 0x0a, length 5.
    fixture(
        CapabilitiesResponse {
            p4runtime_api_version: "1.3.0".into(),
        },
        &[0x0a, 0x05, b'1', b'.', b'3', b'.', b'0'],
    );
}

#[test]
fn uint128() {
    // high = 0 is not encoded; field 2 (low), varint: tag 0x10.
    fixture(Uint128 { high: 0, low: 1 }, &[0x10, 0x01]);
    // field 1 (high), varint: tag 0x08.
    fixture(Uint128 { high: 2, low: 0 }, &[0x08, 0x02]);
}

#[test]
fn arbitration_request() {
    // StreamMessageRequest.arbitration = 1 -> MasterArbitrationUpdate
    // { device_id = 1: 1, election_id = 3: Uint128 { low = 2: 1 } }.
    fixture(
        StreamMessageRequest {
            update: Some(stream_message_request::Update::Arbitration(
                MasterArbitrationUpdate {
                    device_id: 1,
                    election_id: Some(Uint128 { high: 0, low: 1 }),
                    ..Default::default()
                },
            )),
        },
        &[0x0a, 0x06, 0x08, 0x01, 0x1a, 0x02, 0x10, 0x01],
    );
}

#[test]
fn lpm_field_match() {
    // FieldMatch { field_id = 1: 1, lpm = 4: { value = 1: 10.0.0.0,
    // prefix_len = 2: 8 } }.
    fixture(
        FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                value: vec![10, 0, 0, 0],
                prefix_len: 8,
            })),
        },
        &[0x08, 0x01, 0x22, 0x08, 0x0a, 0x04, 10, 0, 0, 0, 0x10, 0x08],
    );
}

#[test]
fn table_entry_flags() {
    // is_default_action = 8 (tag 0x40), const = 13 (tag 0x68).
    fixture(
        TableEntry {
            is_default_action: true,
            is_const: true,
            ..Default::default()
        },
        &[0x40, 0x01, 0x68, 0x01],
    );
}

#[test]
fn update_type_delete() {
    // Update.type = 1, DELETE = 3.
    fixture(
        Update {
            r#type: update::Type::Delete as i32,
            entity: None,
        },
        &[0x08, 0x03],
    );
}

#[test]
fn p4info_type_info_is_field_200() {
    // (200 << 3) | 2 = 1602 = varint c2 0c; empty P4TypeInfo.
    fixture(
        P4Info {
            type_info: Some(P4TypeInfo::default()),
            ..Default::default()
        },
        &[0xc2, 0x0c, 0x00],
    );
}

#[test]
fn rpc_status() {
    // Status { code = 1: NOT_FOUND (5), message = 2: "x" }.
    fixture(
        Status {
            code: Code::NotFound as i32,
            message: "x".into(),
            details: vec![],
        },
        &[0x08, 0x05, 0x12, 0x01, b'x'],
    );
    assert_eq!(Code::Unauthenticated as i32, 16);
}
