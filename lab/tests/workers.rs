//! The coordinator's service on the wire (no root): worker 0 coordinates
//! on a loopback port, the others attend over gRPC with the lab's token;
//! all are told to build with every machine's underlay address, and the
//! lab runs once each says it built. A wrong token, or a worker that
//! computed another partition, is refused saying why.

use std::net::IpAddr;
use std::time::Duration;

use turbonet_cluster::{Hello, Phase, Settings};
use turbonet_lab::workers::{Attendance, Tell, Told, attend, coordinate};

const TOKEN: &str = "s3cret-token";

fn hello(index: usize, underlay: &str) -> Hello {
    Hello {
        lab: "wire".to_owned(),
        index,
        of: 3,
        version: "turbonet test".to_owned(),
        partition: 0x1234,
        underlay: underlay.parse().unwrap(),
        busy_ports: Vec::new(),
    }
}

/// The next thing `worker` is told that is not a phase, within 10 s.
async fn next_order(worker: &mut Attendance) -> Told {
    loop {
        let told = tokio::time::timeout(Duration::from_secs(10), worker.told.recv())
            .await
            .expect("told within 10 s")
            .expect("the stream is open");
        if !matches!(told, Told::Phase(_)) {
            return told;
        }
    }
}

async fn start() -> (turbonet_lab::workers::Coordinating, Attendance, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (coordinating, own) = coordinate(
        listener,
        TOKEN.to_owned(),
        hello(0, "198.18.0.1"),
        Settings::default(),
        None,
    )
    .unwrap();
    let endpoint = format!("http://{}", coordinating.addr);
    (coordinating, own, endpoint)
}

#[tokio::test]
async fn workers_rendezvous_build_and_run_over_grpc() {
    let (coordinating, mut own, endpoint) = start().await;
    let mut w2 = attend(&endpoint, TOKEN, &hello(2, "198.18.0.3"))
        .await
        .unwrap();
    let mut w1 = attend(&endpoint, TOKEN, &hello(1, "198.18.0.2"))
        .await
        .unwrap();
    let underlays: Vec<IpAddr> = ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    for worker in [&mut own, &mut w1, &mut w2] {
        assert_eq!(
            next_order(worker).await,
            Told::Build {
                underlays: underlays.clone(),
                port: 14789
            }
        );
    }
    for worker in [&own, &w1, &w2] {
        worker.tell.send(Tell::Built).await.unwrap();
    }
    let mut phase = coordinating.phase.clone();
    tokio::time::timeout(
        Duration::from_secs(10),
        phase.wait_for(|p| *p == Phase::Running),
    )
    .await
    .expect("running within 10 s")
    .unwrap();

    // Worker 2 goes: the others take their cut links to it down.
    drop(w2);
    for worker in [&mut own, &mut w1] {
        assert_eq!(
            next_order(worker).await,
            Told::Carrier { peer: 2, up: false }
        );
    }
    tokio::time::timeout(
        Duration::from_secs(10),
        phase.wait_for(|p| matches!(p, Phase::Degraded { lost } if lost == &[2])),
    )
    .await
    .expect("degraded within 10 s")
    .unwrap();
}

#[tokio::test]
async fn a_wrong_token_or_another_partition_is_refused_saying_why() {
    let (_coordinating, _own, endpoint) = start().await;
    let refused = attend(&endpoint, "not-the-token", &hello(1, "198.18.0.2"))
        .await
        .expect_err("a wrong token");
    assert!(refused.to_string().contains("token"), "{refused}");

    let mut other = hello(1, "198.18.0.2");
    other.partition = 0x9999;
    let mut w1 = attend(&endpoint, TOKEN, &other).await.unwrap();
    let told = next_order(&mut w1).await;
    let Told::Refused(reason) = told else {
        panic!("refused, not {told:?}");
    };
    assert!(
        reason.contains("1234") && reason.contains("9999"),
        "names both partitions: {reason}"
    );
}

/// The lab's control API, passed to a machine's daemon for the other
/// machines: refused without the lab's token, its reads passed on with it
/// (here to a lab directory whose daemon is not running: its socket is
/// absent), its changes refused.
#[tokio::test]
async fn a_machines_lab_api_is_served_to_token_holders_only() {
    let token = "0123456789abcdef0123456789abcdef";
    let dir = std::env::temp_dir().join(format!("turbonet-proxy-{}", std::process::id()));
    let lab_dir = turbonet_lab::state::LabDir::new(&dir, "nolab");
    let routes = tonic::service::Routes::new(turbonet_lab::workers::LabProxy::new(
        &lab_dir,
        token.to_owned(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let _serving = turbonet_lab::workers::serve_parts(listener, routes);

    let status = |token: &'static str| {
        let endpoint = endpoint.clone();
        // The blocking client runs a runtime of its own.
        tokio::task::spawn_blocking(move || {
            turbonet_api::Client::remote(&endpoint, token).and_then(|mut c| c.status())
        })
    };
    let refused = status("not-the-token-of-this-lab")
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.kind(), turbonet_api::Kind::Failed);
    assert!(
        refused
            .to_string()
            .contains("did not carry this lab's token"),
        "{refused}"
    );
    let passed = status(token).await.unwrap().unwrap_err();
    assert!(
        passed.to_string().contains("this machine's lab daemon"),
        "passed on to the daemon, which is not there: {passed}"
    );
    // Only reads and link parameters cross machines: a failure is
    // refused before the daemon.
    let endpoint = endpoint.clone();
    let changed = tokio::task::spawn_blocking(move || {
        turbonet_api::Client::remote(&endpoint, token)
            .and_then(|mut c| c.fail(&turbonet_api::Target::Link("a--b".to_owned())))
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(
        changed
            .to_string()
            .starts_with("Fail is not served to other machines: only reads and link parameters"),
        "{changed}"
    );
}
