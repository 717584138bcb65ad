//! What decodes input from someone else never panics: `turbonet serve`'s
//! request decoder (a member's client, or one they wrote), and the
//! control API's messages as the daemon reads them (any gRPC client of
//! root's socket). Property tests over arbitrary bytes and over
//! structured values, bounded so that the suite runs them in seconds.

use proptest::prelude::*;
use prost::Message;
use turbonet_api::{self as api, proto};
use turbonet_lab::serve::decode_request;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A protobuf Duration with any fields, the nonsensical included.
fn duration() -> impl Strategy<Value = Option<prost_types::Duration>> {
    proptest::option::of(
        (any::<i64>(), any::<i32>())
            .prop_map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
    )
}

/// A probability with any value, NaN and infinities included.
fn probability() -> impl Strategy<Value = Option<proto::Probability>> {
    proptest::option::of(any::<f64>().prop_map(|value| proto::Probability { value }))
}

/// A queue limit with any fields.
fn queue() -> impl Strategy<Value = Option<proto::QueueLimit>> {
    proptest::option::of(
        any::<Vec<u8>>()
            .prop_map(|bytes| proto::QueueLimit::decode(bytes.as_slice()).unwrap_or_default()),
    )
}

/// Link parameters with any fields: what a client may send to SetLink.
fn params() -> impl Strategy<Value = proto::LinkParams> {
    (
        proptest::option::of(any::<Vec<u8>>()),
        duration(),
        duration(),
        any::<i32>(),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<Vec<u8>>()),
        probability(),
        probability(),
        queue(),
        queue(),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(
            |(rate, delay, jitter, dist, reorder, loss, corrupt, duplicate, queue, ecn, mtu)| {
                proto::LinkParams {
                    rate: rate.map(|b| proto::Rate::decode(b.as_slice()).unwrap_or_default()),
                    delay,
                    jitter,
                    jitter_distribution: dist,
                    reorder,
                    loss: loss.map(|b| proto::Loss::decode(b.as_slice()).unwrap_or_default()),
                    corrupt,
                    duplicate,
                    queue,
                    ecn,
                    mtu,
                }
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_served_request_of_any_bytes_is_decoded_or_refused(
        body in any::<Vec<u8>>(),
        descriptors in 0usize..32,
    ) {
        let _ = decode_request(&body, descriptors);
    }

    #[test]
    fn a_served_request_of_any_json_shape_is_decoded_or_refused(
        args in proptest::collection::vec(any::<String>(), 0..8),
        cwd in any::<String>(),
        file in any::<bool>(),
        descriptors in 0usize..8,
    ) {
        let body = serde_json::json!({ "args": args, "cwd": cwd, "file": file }).to_string();
        match decode_request(body.as_bytes(), descriptors) {
            Ok(r) => prop_assert_eq!(descriptors, 3 + usize::from(r.file)),
            Err(why) => prop_assert!(!why.is_empty()),
        }
    }

    #[test]
    fn link_parameters_of_any_value_convert_or_are_refused(p in params()) {
        let _ = api::params_from_proto(&p);
    }

    #[test]
    fn every_request_of_the_control_api_decodes_from_any_bytes_or_is_refused(
        bytes in any::<Vec<u8>>(),
    ) {
        if let Ok(r) = proto::SetLinkRequest::decode(bytes.as_slice()) {
            let _ = api::params_from_proto(&r.params.unwrap_or_default());
        }
        if let Ok(r) = proto::FlapRequest::decode(bytes.as_slice()) {
            let _ = r.period.as_ref().map(api::seconds);
        }
        let _ = proto::ResetLinkRequest::decode(bytes.as_slice());
        let _ = proto::FailRequest::decode(bytes.as_slice());
        let _ = proto::RestoreRequest::decode(bytes.as_slice());
        let _ = proto::ShowBgpRequest::decode(bytes.as_slice());
        let _ = proto::EventsRequest::decode(bytes.as_slice());
        let _ = proto::StartWorkloadRequest::decode(bytes.as_slice());
        let _ = proto::StopWorkloadRequest::decode(bytes.as_slice());
        let _ = proto::CaptureRequest::decode(bytes.as_slice());
        let _ = proto::ListLinksRequest::decode(bytes.as_slice());
    }
}
