//! Kernel nexthop objects through [`NexthopSocket`], against the kernel
//! (root: a network namespace of a thread's own, gone with the thread).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use turbonet_host::kernel::nexthop::{
    GroupRoute, Hop, NexthopSocket, Objects, Protocol, Request, point_at_groups,
};

/// Runs `command` (an iproute2 line) in the calling thread's namespace.
fn ip(command: &str) {
    let status = std::process::Command::new("ip")
        .args(command.split_whitespace())
        .status()
        .expect("ip runs");
    assert!(status.success(), "ip {command}");
}

/// The routes of protocol `bgp` in the calling thread's namespace, as
/// `ip route` prints their first lines (the next hops a group expands to
/// follow on lines of their own).
fn routes() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["route", "show", "proto", "bgp"])
        .output()
        .expect("ip runs");
    String::from_utf8(out.stdout)
        .expect("text")
        .lines()
        .filter(|line| !line.starts_with(char::is_whitespace))
        .map(str::to_owned)
        .collect()
}

/// Runs `test` as root in a network namespace of a thread's own (gone
/// with the thread), with a port `nh0` (10.9.0.1/24, up) whose index it
/// is given; says it was skipped without root (a failure under CI).
fn with_a_port(test: impl FnOnce(u32) + Send + 'static) {
    if !nix::unistd::geteuid().is_root() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "cannot run under CI: needs root (a network namespace)");
        eprintln!("skipped: needs root (a network namespace)");
        return;
    }
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        ip("link add nh0 type veth peer name nh1");
        ip("link set nh1 up");
        ip("link set nh0 up");
        ip("addr add 10.9.0.1/24 dev nh0");
        test(nix::net::if_::if_nametoindex("nh0").expect("nh0's index"));
    })
    .join()
    .expect("the namespace's thread");
}

/// Against the kernel, in a namespace of a thread's own (gone with
/// the thread): objects made, read back, refused twice, removed;
/// routes to them written and removed in batches.
#[test]
fn objects_round_trip_through_the_kernel() {
    with_a_port(|ifindex| {
        let hop = |last| Hop {
            via: Ipv4Addr::new(10, 9, 0, last),
            ifindex,
            onlink: last == 3,
        };
        let mut socket = NexthopSocket::new(Protocol::Bgp).expect("socket");
        assert_eq!(socket.dump().expect("dump"), Objects::default());
        let made = socket
            .execute(&[
                Request::Hop { id: 1, hop: hop(2) },
                Request::Hop { id: 2, hop: hop(3) },
                Request::Group {
                    id: 5,
                    members: vec![2, 1],
                },
            ])
            .expect("execute");
        assert_eq!(made, vec![Ok(()), Ok(()), Ok(())]);
        let objects = socket.dump().expect("dump");
        assert_eq!(objects.hops, HashMap::from([(1, hop(2)), (2, hop(3))]));
        assert_eq!(objects.groups, HashMap::from([(5, vec![1, 2])]));
        let again = socket
            .execute(&[
                Request::Hop { id: 1, hop: hop(2) },
                Request::Delete { id: 5 },
            ])
            .expect("execute");
        assert_eq!(again, vec![Err(libc::EEXIST), Ok(())]);
        assert!(socket.dump().expect("dump").groups.is_empty());

        // Routes to a group, in batches larger than one sendmsg carries,
        // with refusals among them attributed to their own requests.
        let net = |i: u32| ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a64_0000 + (i << 8)), 24).unwrap();
        let mut requests = vec![Request::Group {
            id: 6,
            members: vec![1, 2],
        }];
        for i in 0..300 {
            let id = if i % 100 == 99 { 77 } else { 6 };
            requests.push(Request::Route {
                prefix: net(i),
                id,
                metric: 20,
            });
        }
        let outcomes = socket.execute(&requests).expect("execute");
        let refused: Vec<usize> = (0..outcomes.len())
            .filter(|&i| outcomes[i].is_err())
            .collect();
        assert_eq!(refused, vec![100, 200, 300], "the routes to no object");
        assert_eq!(routes().len(), 297);
        assert!(routes()[0].contains("nhid 6"), "{}", routes()[0]);
        let gone: Vec<Request> = (0..300)
            .map(|i| Request::Unroute {
                prefix: net(i),
                metric: 20,
            })
            .collect();
        let outcomes = socket.execute(&gone).expect("execute");
        assert_eq!(
            outcomes.iter().filter(|o| **o == Err(libc::ESRCH)).count(),
            3
        );
        assert!(routes().is_empty());
        // Static routes' objects beside the agents': each protocol reads
        // only its own, and numbers new ones past every id in use.
        let mut ours = NexthopSocket::new(Protocol::Static).expect("socket");
        let static_routes = [GroupRoute {
            prefix: net(1),
            metric: 0,
            hops: vec![hop(2), hop(3)],
        }];
        let made = point_at_groups(&ours.dump().expect("dump"), &static_routes);
        assert_eq!(
            made[0],
            Request::Hop { id: 7, hop: hop(2) },
            "past bgp's 1, 2 and 6"
        );
        assert!(
            ours.execute(&made)
                .expect("execute")
                .iter()
                .all(Result::is_ok)
        );
        let line = std::process::Command::new("ip")
            .args(["route", "show", "proto", "static"])
            .output()
            .expect("ip runs");
        let line = String::from_utf8(line.stdout).expect("text");
        assert!(line.starts_with("10.100.1.0/24 nhid 9 "), "{line}");
        let theirs = socket.dump().expect("dump");
        assert_eq!(
            (theirs.hops.len(), theirs.groups.len(), theirs.highest),
            (2, 1, 9)
        );
        let mine = ours.dump().expect("dump");
        assert_eq!(
            (mine.hops.len(), mine.groups.len(), mine.highest),
            (2, 1, 6)
        );
        // Written again (a route replaced at run time): nothing new is made.
        let again = point_at_groups(&mine, &static_routes);
        assert!(
            matches!(again[..], [Request::Route { id: 9, .. }]),
            "{again:?}"
        );

        // The port goes down: the kernel removes its next hops.
        ip("link set nh0 down");
        assert_eq!(socket.dump().expect("dump"), Objects::default());
    });
}

/// A namespace whose kernel names only the object a route points at
/// (`nexthop_compat_mode` 0): its table read back and its notifications
/// heard with each route's next hops, and an object's removal told.
#[test]
fn routes_to_objects_are_resolved_without_compat_mode() {
    use std::time::Duration;
    use turbonet_host::kernel::table::{
        Listener, Nexthops, Notice, ObjectChange, TableHop, read_table,
    };
    with_a_port(|ifindex| {
        std::fs::write("/proc/sys/net/ipv4/nexthop_compat_mode", "0").expect("compat mode off");
        let ns = std::fs::File::open("/proc/thread-self/ns/net").expect("the namespace");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut listener =
                Listener::new(Listener::socket().expect("socket"), Nexthops::default())
                    .expect("listener");
            let hop = |last| Hop {
                via: Ipv4Addr::new(10, 9, 0, last),
                ifindex,
                onlink: false,
            };
            let mut socket = NexthopSocket::new(Protocol::Bgp).expect("socket");
            let prefix = "10.8.0.0/24".parse().unwrap();
            let made = socket
                .execute(&[
                    Request::Hop { id: 1, hop: hop(2) },
                    Request::Hop { id: 2, hop: hop(3) },
                    Request::Group {
                        id: 5,
                        members: vec![1, 2],
                    },
                    Request::Route {
                        prefix,
                        id: 5,
                        metric: 20,
                    },
                ])
                .expect("execute");
            assert!(made.iter().all(Result::is_ok), "{made:?}");
            let expected: Vec<TableHop> = [2, 3]
                .map(|last| TableHop {
                    via: Some(Ipv4Addr::new(10, 9, 0, last)),
                    ifindex,
                    down: false,
                })
                .into();
            // Only the group's id is in `ip route`: compat mode is off.
            let shown = std::process::Command::new("ip")
                .args(["route", "show", "10.8.0.0/24"])
                .output()
                .expect("ip runs");
            let shown = String::from_utf8(shown.stdout).expect("text");
            assert_eq!(shown.lines().count(), 1, "{shown}");
            assert!(shown.starts_with("10.8.0.0/24 nhid 5 proto bgp"), "{shown}");

            // Heard: three objects made, then the route with their hops.
            let mut heard = Vec::new();
            while !heard.iter().any(|n| matches!(n, Notice::Route(_))) {
                heard.extend(
                    tokio::time::timeout(Duration::from_secs(5), listener.next())
                        .await
                        .expect("a notification within 5 s")
                        .expect("read"),
                );
            }
            let routes: Vec<_> = heard
                .iter()
                .filter_map(|n| match n {
                    Notice::Route(r) => Some(r),
                    _ => None,
                })
                .collect();
            assert_eq!(routes.len(), 1, "{heard:?}");
            assert_eq!(
                (routes[0].prefix, routes[0].object, &routes[0].hops[..]),
                (prefix, Some(5), &expected[..])
            );
            assert!(heard.contains(&Notice::Object(ObjectChange::Made(5))));

            // Read back: the same.
            let handle = turbonet_host::kernel::connect(
                turbonet_host::namespaces::route_socket().expect("socket"),
            )
            .expect("handle");
            let table = read_table(&handle, &ns).await.expect("read");
            let read: Vec<_> = table.iter().filter(|r| r.prefix == prefix).collect();
            assert_eq!(read.len(), 1);
            assert_eq!(&read[0].hops[..], &expected[..]);

            // The group goes (and its route with it, unsaid): told.
            let gone = socket
                .execute(&[Request::Delete { id: 5 }])
                .expect("execute");
            assert_eq!(gone, vec![Ok(())]);
            let mut heard = Vec::new();
            while !heard.contains(&Notice::Object(ObjectChange::Removed(5))) {
                heard.extend(
                    tokio::time::timeout(Duration::from_secs(5), listener.next())
                        .await
                        .expect("a notification within 5 s")
                        .expect("read"),
                );
            }
            let table = read_table(&handle, &ns).await.expect("read");
            assert!(table.iter().all(|r| r.prefix != prefix), "{table:?}");
        });
    });
}
