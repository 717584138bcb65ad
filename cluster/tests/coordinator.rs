//! The coordinator on a virtual clock: rendezvous in any order, late and
//! missing workers, disagreements refused naming both sides, a worker
//! lost and back.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use turbonet_cluster::coordinator::Conn;
use turbonet_cluster::{Change, Coordinator, Hello, Input, Output, Phase, Settings};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Machine `index`'s underlay address.
fn underlay(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 10 + index as u8))
}

fn hello(index: usize, of: usize) -> Hello {
    Hello {
        lab: "pod".to_owned(),
        index,
        of,
        version: "0.1.0 (abc)".to_owned(),
        partition: 0xd2cd_9238_7000_9f9e,
        underlay: underlay(index),
        busy_ports: Vec::new(),
    }
}

/// A coordinator of `of` machines started at 0, with the default
/// settings, and what it said first.
fn coordinator(of: usize) -> (Coordinator, Vec<Output>) {
    Coordinator::new(hello(0, of), Settings::default(), Duration::ZERO)
}

/// `hello` said on connection `conn` at second `at`.
fn says(c: &mut Coordinator, at: u64, conn: Conn, hello: Hello) -> Vec<Output> {
    c.handle(secs(at), Input::Hello { conn, hello })
}

/// Worker `index` says hello on connection `conn` (`index`, and
/// `100 + index` when it comes back).
fn says_hello(c: &mut Coordinator, at: u64, conn: Conn, index: usize) -> Vec<Output> {
    let hello = hello(index, c.workers().len());
    says(c, at, conn, hello)
}

fn builds(out: &[Output]) -> Vec<usize> {
    out.iter()
        .filter_map(|o| match o {
            Output::Build { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

fn phases(out: &[Output]) -> Vec<Phase> {
    out.iter()
        .filter_map(|o| match o {
            Output::Phase(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn refusal(out: &[Output]) -> String {
    match out {
        [Output::Refuse { reason, .. }] => reason.clone(),
        other => panic!("one refusal, not {other:?}"),
    }
}

/// Every worker of a coordinator of `of` says hello (in order 1..of) and
/// builds at second 1.
fn running(of: usize) -> Coordinator {
    let (mut c, _) = coordinator(of);
    for index in 1..of {
        says_hello(&mut c, 1, index as Conn, index);
    }
    for conn in 0..of {
        c.handle(secs(1), Input::Built { conn: conn as Conn });
    }
    assert_eq!(c.phase(), Phase::Running);
    c
}

#[test]
fn one_machine_builds_at_once() {
    let (mut c, out) = coordinator(1);
    assert_eq!(
        out,
        vec![
            Output::Build {
                index: 0,
                underlays: vec![underlay(0)],
                port: 14789
            },
            Output::Phase(Phase::Building { waiting: vec![0] })
        ]
    );
    let out = c.handle(
        secs(5),
        Input::Built {
            conn: Coordinator::OWN,
        },
    );
    assert_eq!(out, vec![Output::Phase(Phase::Running)]);
    assert_eq!(c.next_deadline(), None, "nothing to watch");
}

#[test]
fn workers_meet_in_any_order_and_all_build_with_every_address() {
    let orders = [[1, 2, 3], [3, 1, 2], [2, 3, 1], [3, 2, 1]];
    for order in orders {
        let (mut c, out) = coordinator(4);
        assert_eq!(
            phases(&out),
            vec![Phase::Gathering {
                missing: vec![1, 2, 3]
            }]
        );
        let mut said = Vec::new();
        for (at, index) in order.into_iter().enumerate() {
            said = says_hello(&mut c, at as u64, index as Conn, index);
        }
        // The last one in hands out every part, the same whatever the
        // order.
        let everyone: Vec<IpAddr> = (0..4).map(underlay).collect();
        assert_eq!(builds(&said), vec![0, 1, 2, 3], "{order:?}");
        assert!(said.iter().all(|o| match o {
            Output::Build { underlays, .. } => *underlays == everyone,
            _ => true,
        }));
        assert_eq!(
            phases(&said),
            vec![Phase::Building {
                waiting: vec![0, 1, 2, 3]
            }]
        );
        for conn in [2, 0, 3] {
            c.handle(secs(9), Input::Built { conn });
        }
        assert_eq!(c.phase(), Phase::Building { waiting: vec![1] });
        let out = c.handle(secs(9), Input::Built { conn: 1 });
        assert_eq!(phases(&out), vec![Phase::Running]);
    }
}

#[test]
fn a_late_worker_is_waited_for_and_a_missing_one_fails_the_lab_naming_it() {
    let (mut c, _) = coordinator(3);
    says_hello(&mut c, 1, 1, 1);
    // The rendezvous ends at 120 s: worker 2 connects at 119 s.
    assert_eq!(c.next_deadline(), Some(secs(4)), "worker 1's heartbeats");
    c.handle(secs(3), Input::Alive { conn: 1 });
    let mut at = 3;
    while at < 119 {
        at += 1;
        c.handle(secs(at), Input::Alive { conn: 1 });
        assert!(c.tick(secs(at)).is_empty());
    }
    let out = says_hello(&mut c, 119, 2, 2);
    assert_eq!(builds(&out), vec![0, 1, 2]);
    assert!(c.tick(secs(120)).is_empty(), "gathered: no rendezvous left");

    // Another lab where workers 1 and 2 never come.
    let (mut c, _) = coordinator(4);
    says_hello(&mut c, 5, 3, 3);
    assert!(c.tick(secs(7)).is_empty(), "worker 3 is alive until 8 s");
    // Worker 3 falls silent: missing again, not lost (nothing was built).
    let out = c.tick(secs(8));
    assert!(matches!(&out[0], Output::Refuse { conn: 3, reason } if reason.contains("silent")));
    assert_eq!(
        phases(&out),
        vec![Phase::Gathering {
            missing: vec![1, 2, 3]
        }]
    );
    assert_eq!(c.next_deadline(), Some(secs(120)));
    let out = c.tick(secs(120));
    assert_eq!(
        phases(&out),
        vec![Phase::Failed {
            reason: "workers 1, 2 and 3 did not connect within 120 s".to_owned()
        }]
    );
    let out = says_hello(&mut c, 121, 9, 1);
    assert_eq!(
        refusal(&out),
        "lab pod failed: workers 1, 2 and 3 did not connect within 120 s"
    );
    assert_eq!(c.next_deadline(), None);
}

#[test]
fn a_worker_that_disagrees_is_refused_naming_both_sides() {
    let (mut c, _) = coordinator(3);
    let refused = |c: &mut Coordinator, change: &dyn Fn(&mut Hello)| {
        let mut h = hello(2, 3);
        change(&mut h);
        refusal(&c.handle(secs(1), Input::Hello { conn: 7, hello: h }))
    };
    assert_eq!(
        refused(&mut c, &|h| h.version = "0.2.0 (def)".to_owned()),
        "worker 2 runs turbonet 0.2.0 (def), the coordinator 0.1.0 (abc): run the same \
         turbonet on every machine"
    );
    assert_eq!(
        refused(&mut c, &|h| h.partition = 0x1234),
        "worker 2 computed partition 0000000000001234, the coordinator d2cd923870009f9e: they \
         read different scenarios"
    );
    assert_eq!(
        refused(&mut c, &|h| h.of = 4),
        "worker 2 splits lab pod over 4 machines, the coordinator over 3"
    );
    assert_eq!(
        refused(&mut c, &|h| h.lab = "k4".to_owned()),
        "this is the coordinator of lab pod; the worker belongs to lab k4"
    );
    for index in [0, 3] {
        assert_eq!(
            refused(&mut c, &|h| h.index = index),
            format!(
                "there is no worker {index} of lab pod: the coordinator is 0 and the workers \
                 are 1 to 2"
            )
        );
    }
    // None of them counts: both workers are still missing.
    assert_eq!(
        c.phase(),
        Phase::Gathering {
            missing: vec![1, 2]
        }
    );
    // A second worker 1 while the first is connected.
    says_hello(&mut c, 1, 1, 1);
    let mut twin = hello(1, 3);
    twin.underlay = underlay(7);
    let out = says(&mut c, 2, 8, twin);
    assert_eq!(
        refusal(&out),
        "worker 1 (at 198.18.0.17) is connected already from 198.18.0.11"
    );
    // Hello twice on one connection, and anything before hello.
    assert!(refusal(&says_hello(&mut c, 2, 1, 1)).contains("hello twice"));
    assert_eq!(
        refusal(&c.handle(secs(2), Input::Built { conn: 9 })),
        "a worker says hello first"
    );
}

#[test]
fn a_worker_that_cannot_build_fails_the_first_build() {
    let (mut c, _) = coordinator(2);
    says_hello(&mut c, 1, 1, 1);
    let out = c.handle(
        secs(2),
        Input::BuildFailed {
            conn: 1,
            error: "the underlay's MTU 1500 is too small for link tor0--agg0 (MTU 1500 needs 1550)"
                .to_owned(),
        },
    );
    assert_eq!(
        phases(&out),
        vec![Phase::Failed {
            reason: "worker 1 could not build its part: the underlay's MTU 1500 is too small \
                     for link tor0--agg0 (MTU 1500 needs 1550)"
                .to_owned()
        }]
    );

    // One that takes longer than the build allows.
    let (mut c, _) = coordinator(2);
    says_hello(&mut c, 1, 1, 1);
    c.handle(
        secs(1),
        Input::Built {
            conn: Coordinator::OWN,
        },
    );
    for at in 2..1201 {
        c.handle(secs(at), Input::Alive { conn: 1 });
        assert!(c.tick(secs(at)).is_empty(), "{at}");
    }
    let out = c.tick(secs(1201));
    assert_eq!(
        phases(&out),
        vec![Phase::Failed {
            reason: "worker 1 did not build its part within 1200 s".to_owned()
        }]
    );
}

#[test]
fn a_lost_worker_degrades_the_lab_until_it_is_back_and_built() {
    let mut c = running(3);
    // Worker 2 goes silent after 1 s: lost at 4 s; the others take their
    // cut links to it down.
    for at in 2..4 {
        c.handle(secs(at), Input::Alive { conn: 1 });
        assert!(c.tick(secs(at)).is_empty());
    }
    assert_eq!(c.next_deadline(), Some(secs(4)));
    c.handle(secs(4), Input::Alive { conn: 1 });
    let out = c.tick(secs(4));
    assert_eq!(
        out,
        vec![
            Output::Carrier {
                to: 0,
                peer: 2,
                up: false
            },
            Output::Carrier {
                to: 1,
                peer: 2,
                up: false
            },
            Output::Refuse {
                conn: 2,
                reason: "worker 2 was silent for 3 s".to_owned()
            },
            Output::Phase(Phase::Degraded { lost: vec![2] }),
        ]
    );
    // Worker 1's connection closes too.
    let out = c.handle(secs(5), Input::Closed { conn: 1 });
    assert_eq!(
        out,
        vec![
            Output::Carrier {
                to: 0,
                peer: 1,
                up: false
            },
            Output::Phase(Phase::Degraded { lost: vec![1, 2] }),
        ]
    );
    // Worker 2 restarts on another machine: the others send there; it
    // builds again, its links to worker 1 (still lost) down.
    let mut back = hello(2, 3);
    back.underlay = underlay(9);
    let out = says(&mut c, 30, 102, back);
    assert_eq!(
        out,
        vec![
            Output::Repoint {
                to: 0,
                peer: 2,
                underlay: underlay(9)
            },
            Output::Build {
                index: 2,
                underlays: vec![underlay(0), underlay(1), underlay(9)],
                port: 14789
            },
            Output::Carrier {
                to: 2,
                peer: 1,
                up: false
            },
        ]
    );
    let out = c.handle(secs(40), Input::Built { conn: 102 });
    assert_eq!(
        out,
        vec![
            Output::Carrier {
                to: 0,
                peer: 2,
                up: true
            },
            Output::Phase(Phase::Degraded { lost: vec![1] }),
        ]
    );
    // Worker 1 comes back where it was: no repointing.
    let out = says_hello(&mut c, 41, 101, 1);
    assert_eq!(builds(&out), vec![1]);
    assert!(!out.iter().any(|o| matches!(o, Output::Repoint { .. })));
    let out = c.handle(secs(42), Input::Built { conn: 101 });
    assert_eq!(
        out,
        vec![
            Output::Carrier {
                to: 0,
                peer: 1,
                up: true
            },
            Output::Carrier {
                to: 2,
                peer: 1,
                up: true
            },
            Output::Phase(Phase::Running),
        ]
    );
}

#[test]
fn a_worker_back_that_cannot_build_stays_lost_and_the_lab_runs_on() {
    let mut c = running(2);
    c.handle(secs(2), Input::Closed { conn: 1 });
    says_hello(&mut c, 3, 101, 1);
    let out = c.handle(
        secs(4),
        Input::BuildFailed {
            conn: 101,
            error: "out of memory".to_owned(),
        },
    );
    assert_eq!(
        out,
        vec![Output::Refuse {
            conn: 101,
            reason: "worker 1 could not build its part: out of memory".to_owned()
        }]
    );
    assert_eq!(c.phase(), Phase::Degraded { lost: vec![1] });
    // Its carrier was said down once, when it was first lost.
    assert!(c.tick(secs(5)).is_empty());
}

#[test]
fn a_lab_takes_the_lowest_port_no_machine_of_it_has_taken() {
    let mut own = hello(0, 3);
    own.busy_ports = vec![14791];
    let (mut c, _) = Coordinator::new(own, Settings::default(), Duration::ZERO);
    let mut one = hello(1, 3);
    one.busy_ports = vec![14789, 14790];
    says(&mut c, 1, 1, one);
    let out = says_hello(&mut c, 1, 2, 2);
    let ports: Vec<u16> = out
        .iter()
        .filter_map(|o| match o {
            Output::Build { port, .. } => Some(*port),
            _ => None,
        })
        .collect();
    assert_eq!(ports, vec![14792; 3]);
    for conn in 0..3 {
        c.handle(secs(2), Input::Built { conn });
    }
    // Worker 2 restarts, and meanwhile another lab took the port there.
    c.handle(secs(3), Input::Closed { conn: 2 });
    let mut back = hello(2, 3);
    back.busy_ports = vec![14792];
    let out = says(&mut c, 4, 102, back);
    assert_eq!(
        refusal(&out),
        "UDP port 14792, lab pod's, is taken on worker 2's machine (at 198.18.0.12) by another lab"
    );
}

#[test]
fn a_failure_at_one_machine_is_told_to_every_other_running_worker() {
    let mut c = running(4);
    // Worker 3 is lost: it is not told.
    c.handle(secs(2), Input::Closed { conn: 3 });
    let failed = Change {
        node: false,
        name: "tor0--agg0".to_owned(),
        up: false,
    };
    let out = c.handle(
        secs(2),
        Input::Change {
            conn: 1,
            change: failed.clone(),
        },
    );
    let told: Vec<(usize, &Change)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Change { to, change } => Some((*to, change)),
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![(0, &failed), (2, &failed)]);
    // From a connection that said no hello: refused, no one told.
    let out = c.handle(
        secs(2),
        Input::Change {
            conn: 9,
            change: failed,
        },
    );
    assert!(
        !out.iter().any(|o| matches!(o, Output::Change { .. })),
        "{out:?}"
    );
}

#[test]
fn a_worker_back_is_told_what_changed_while_it_was_away() {
    let mut c = running(3);
    let link = |up| Change {
        node: false,
        name: "tor0--agg0".to_owned(),
        up,
    };
    let node = |up| Change {
        node: true,
        name: "agg1".to_owned(),
        up,
    };
    // A link failed before worker 2 is lost and restored while it is away
    // (its part, kept over a restart, would still have it down); a node
    // failed while it is away.
    c.handle(
        secs(2),
        Input::Change {
            conn: 1,
            change: link(false),
        },
    );
    c.handle(secs(3), Input::Closed { conn: 2 });
    for (conn, change) in [(0, link(true)), (1, node(false))] {
        let out = c.handle(secs(4), Input::Change { conn, change });
        assert!(
            !out.iter()
                .any(|o| matches!(o, Output::Change { to: 2, .. })),
            "{out:?}"
        );
    }
    let told = |out: &[Output]| -> Vec<(usize, Change)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Change { to, change } => Some((*to, change.clone())),
                _ => None,
            })
            .collect()
    };
    assert_eq!(builds(&says_hello(&mut c, 5, 102, 2)), [2]);
    let out = c.handle(secs(6), Input::Built { conn: 102 });
    assert_eq!(told(&out), [(2, link(true)), (2, node(false))]);
    // The others were told each as it happened: a worker that built once
    // and stays is not told again.
    let out = c.handle(secs(7), Input::Alive { conn: 1 });
    assert!(told(&out).is_empty());
}
