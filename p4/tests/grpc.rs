//! The generated tonic server and client talk to each other over loopback.

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Request, Response, Status};
use turbonet_p4::p4::v1::p4_runtime_client::P4RuntimeClient;
use turbonet_p4::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use turbonet_p4::p4::v1::{
    CapabilitiesRequest, CapabilitiesResponse, GetForwardingPipelineConfigRequest,
};

/// Implements Capabilities only; the other RPCs keep their default
/// UNIMPLEMENTED answers.
#[derive(Debug)]
struct CapabilitiesOnly;

#[tonic::async_trait]
impl P4Runtime for CapabilitiesOnly {
    async fn capabilities(
        &self,
        _request: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        Ok(Response::new(CapabilitiesResponse {
            p4runtime_api_version: "1.3.0".into(),
        }))
    }
}

#[tokio::test]
async fn capabilities_over_loopback() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(P4RuntimeServer::new(CapabilitiesOnly))
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stop_rx.await;
            }),
    );

    let mut client = P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let caps = client
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.p4runtime_api_version, "1.3.0");

    let err = client
        .get_forwarding_pipeline_config(GetForwardingPipelineConfigRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);

    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}
