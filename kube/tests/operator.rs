//! The `Lab` operator's reconcile against a mocked API server: each
//! request it makes is read here in turn, checked, and answered as
//! Kubernetes would answer it.

use std::sync::Arc;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use turbonet_kube::crd::{Lab, LabSpec, LabStatus, Phase};
use turbonet_kube::operator::{self, Context};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Send = tower_test::mock::SendResponse<Response<Body>>;

const K4: &str = include_str!("../../scenarios/fat-tree-k4.toml");
const UID: &str = "6f1b7c1e-2d1a-4a53-9a5e-3c4f0e2b8d11";

fn lab(scenario: &str, machines: u32) -> Lab {
    let mut lab = Lab::new(
        "lab4",
        LabSpec {
            scenario: scenario.to_owned(),
            machines,
            image: "registry.example/turbonet:0.1".to_owned(),
            port: None,
        },
    );
    lab.metadata.namespace = Some("labs".to_owned());
    lab.metadata.uid = Some(UID.to_owned());
    lab.metadata.generation = Some(3);
    lab
}

/// The partition's hash of the k=4 fat-tree, named `lab4`, over `machines`.
fn partition(machines: u32) -> String {
    let text = turbonet_topo::with_lab_name(K4, "lab4").unwrap();
    let parsed = turbonet_topo::parse("k4", &text).unwrap();
    turbonet_topo::machines::plan(&parsed, machines)
        .unwrap()
        .hash
}

/// A mocked client, and the handle that answers its requests.
fn cluster() -> (Arc<Context>, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    (Arc::new(Context { client }), handle)
}

/// The next request: method, path and query, body as JSON (null if none).
async fn next(handle: &mut Handle) -> (Method, String, Value, Send) {
    let (request, send) = handle
        .next_request()
        .await
        .expect("the operator made another request");
    let method = request.method().clone();
    let uri = request.uri().to_string();
    let body = request.into_body().collect_bytes().await.unwrap();
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap()
    };
    (method, uri, body, send)
}

fn answer(send: Send, code: u16, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

fn not_found(send: Send, what: &str) {
    answer(
        send,
        404,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("{what} not found"), "reason": "NotFound", "code": 404}),
    );
}

/// Reads a server-side apply of `path`, checks it is the operator's, and
/// answers with the object (plus `status`, if any).
async fn applied(handle: &mut Handle, path: &str, status: Option<Value>) -> Value {
    let (method, uri, mut body, send) = next(handle).await;
    assert_eq!(method, Method::PATCH, "{uri}");
    assert!(uri.starts_with(path), "{uri} is not {path}");
    assert!(
        uri.contains("fieldManager=turbonet-operator") && uri.contains("force=true"),
        "{uri}"
    );
    let sent = body.clone();
    if let Some(status) = status {
        body["status"] = status;
    }
    // A status applied is answered with the whole object.
    if body["kind"] == "Lab" {
        let mut whole = serde_json::to_value(lab(K4, 2)).unwrap();
        whole["status"] = body["status"].clone();
        body = whole;
    }
    answer(send, 200, &body);
    sent
}

#[tokio::test]
async fn a_new_lab_gets_its_objects_owned_by_it_and_a_status_from_its_workers() {
    let (context, mut handle) = cluster();
    let reconciling = tokio::spawn(operator::reconcile(Arc::new(lab(K4, 2)), context));

    // No token yet: the lab gets a new one.
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, Method::GET);
    assert_eq!(uri, "/api/v1/namespaces/labs/secrets/turbonet-lab4-token");
    not_found(send, "secrets \"turbonet-lab4-token\"");

    let base = "/api/v1/namespaces/labs";
    let config_map = applied(
        &mut handle,
        &format!("{base}/configmaps/turbonet-lab4-scenario"),
        None,
    )
    .await;
    // The scenario, its lab renamed after the object.
    let scenario = config_map["data"]["scenario.toml"].as_str().unwrap();
    assert!(scenario.contains("name = \"lab4\"") && !scenario.contains("name = \"k4\""));
    // Owned by the Lab, so deleting it deletes them; in its namespace.
    let owner = &config_map["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "Lab");
    assert_eq!(owner["apiVersion"], "turbonet.dev/v1alpha1");
    assert_eq!(owner["name"], "lab4");
    assert_eq!(owner["uid"], UID);
    assert_eq!(owner["controller"], true);
    assert_eq!(config_map["metadata"]["namespace"], "labs");

    let secret = applied(
        &mut handle,
        &format!("{base}/secrets/turbonet-lab4-token"),
        None,
    )
    .await;
    let token = secret["stringData"]["token"].as_str().unwrap();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));

    applied(&mut handle, &format!("{base}/services/turbonet-lab4"), None).await;
    let set = applied(
        &mut handle,
        "/apis/apps/v1/namespaces/labs/statefulsets/turbonet-lab4",
        Some(json!({"replicas": 2, "readyReplicas": 1})),
    )
    .await;
    assert_eq!(set["spec"]["replicas"], 2);
    assert_eq!(set["metadata"]["ownerReferences"][0]["uid"], UID);
    applied(
        &mut handle,
        "/apis/policy/v1/namespaces/labs/poddisruptionbudgets/turbonet-lab4",
        None,
    )
    .await;

    // One worker of two ready: Pending, with the partition's hash.
    let status = applied(
        &mut handle,
        "/apis/turbonet.dev/v1alpha1/namespaces/labs/labs/lab4/status",
        None,
    )
    .await;
    assert_eq!(status["kind"], "Lab");
    let status: LabStatus = serde_json::from_value(status["status"].clone()).unwrap();
    assert_eq!(
        status,
        LabStatus {
            phase: Some(Phase::Pending),
            message: Some("1 of 2 workers ready".to_owned()),
            partition: Some(partition(2)),
            ready_workers: 1,
            observed_generation: Some(3),
        }
    );
    let action = reconciling.await.unwrap().expect("reconciled");
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(300)));
}

#[tokio::test]
async fn a_running_lab_keeps_its_token_and_its_unchanged_status_is_not_written_again() {
    let (context, mut handle) = cluster();
    let mut running = lab(K4, 2);
    running.status = Some(LabStatus {
        phase: Some(Phase::Running),
        message: None,
        partition: Some(partition(2)),
        ready_workers: 2,
        observed_generation: Some(3),
    });
    let reconciling = tokio::spawn(operator::reconcile(Arc::new(running), context));

    let kept = "0123456789abcdef0123456789abcdef";
    let (method, _, _, send) = next(&mut handle).await;
    assert_eq!(method, Method::GET);
    answer(
        send,
        200,
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "turbonet-lab4-token", "namespace": "labs"},
                // base64 of the token, as the API server gives `data`.
                "data": {"token": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}}),
    );
    let base = "/api/v1/namespaces/labs";
    applied(&mut handle, &format!("{base}/configmaps/"), None).await;
    let secret = applied(&mut handle, &format!("{base}/secrets/"), None).await;
    assert_eq!(secret["stringData"]["token"], kept);
    applied(&mut handle, &format!("{base}/services/"), None).await;
    applied(
        &mut handle,
        "/apis/apps/v1/namespaces/labs/statefulsets/",
        Some(json!({"replicas": 2, "readyReplicas": 2})),
    )
    .await;
    applied(&mut handle, "/apis/policy/v1/", None).await;

    let action = reconciling.await.unwrap().expect("reconciled");
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(300)));
    // Every client is gone with the reconcile: no status was written.
    assert!(handle.next_request().await.is_none());
}

#[tokio::test]
async fn an_invalid_lab_makes_nothing_and_says_why_with_the_scenario_line() {
    let (context, mut handle) = cluster();
    let broken = K4.replace("k = 4", "k = \"four\"");
    let reconciling = tokio::spawn(operator::reconcile(Arc::new(lab(&broken, 2)), context));

    let (_, _, _, send) = next(&mut handle).await;
    not_found(send, "secrets \"turbonet-lab4-token\"");
    // No object is applied: the next request is the status.
    let status = applied(
        &mut handle,
        "/apis/turbonet.dev/v1alpha1/namespaces/labs/labs/lab4/status",
        None,
    )
    .await;
    let status: LabStatus = serde_json::from_value(status["status"].clone()).unwrap();
    assert_eq!(status.phase, Some(Phase::Invalid));
    let line = K4.lines().position(|l| l == "k = 4").unwrap() + 1;
    let message = status.message.unwrap();
    assert!(
        message.starts_with(&format!("scenario line {line}: ")),
        "{message}"
    );
    assert_eq!(status.partition, None);
    // Only a new spec changes an invalid lab.
    assert_eq!(
        reconciling.await.unwrap().expect("reconciled"),
        Action::await_change()
    );
}

#[test]
fn what_a_lab_becomes_is_said_without_a_cluster() {
    // More machines than the fabric has atoms.
    let why = operator::desired(&lab(K4, 21), "0123456789abcdef").unwrap_err();
    assert!(why.contains("use at most 20 machines"), "{why}");
    // A scenario without a lab name cannot take the Lab's.
    let nameless = K4.replace("name = \"k4\"", "");
    let why = operator::desired(&lab(&nameless, 2), "0123456789abcdef").unwrap_err();
    assert!(why.contains("no `[lab] name"), "{why}");
    // Not yet created (no uid): nothing can be owned by it.
    let mut new = lab(K4, 2);
    new.metadata.uid = None;
    assert!(operator::desired(&new, "0123456789abcdef").is_err());

    let desired = operator::desired(&lab(K4, 3), "0123456789abcdef").unwrap();
    assert_eq!(desired.machines, 3);
    assert_eq!(desired.partition, partition(3));
    for status in [0, 2, 3] {
        let said = operator::status(&lab(K4, 3), &Ok(desired.clone()), status);
        assert_eq!(said.ready_workers, status);
        assert_eq!(
            said.phase,
            Some(if status == 3 {
                Phase::Running
            } else {
                Phase::Pending
            })
        );
    }
}
