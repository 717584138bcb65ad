//! Kernel nexthop objects through [`NexthopSocket`], against the kernel
//! (root: a network namespace of a thread's own, gone with the thread).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use turbonet_host::kernel::nexthop::{Hop, NexthopSocket, Objects, Request};

/// Runs `command` (an iproute2 line) in the calling thread's namespace.
fn ip(command: &str) {
    let status = std::process::Command::new("ip")
        .args(command.split_whitespace())
        .status()
        .expect("ip runs");
    assert!(status.success(), "ip {command}");
}

/// Against the kernel, in a namespace of a thread's own (gone with
/// the thread): objects made, read back, refused twice, removed.
#[test]
fn objects_round_trip_through_the_kernel() {
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
        let ifindex = nix::net::if_::if_nametoindex("nh0").expect("nh0's index");
        let hop = |last| Hop {
            via: Ipv4Addr::new(10, 9, 0, last),
            ifindex,
            onlink: last == 3,
        };
        let mut socket = NexthopSocket::new().expect("socket");
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
        // The port goes down: the kernel removes its next hops.
        ip("link set nh0 down");
        assert_eq!(socket.dump().expect("dump"), Objects::default());
    })
    .join()
    .expect("the namespace's thread");
}
