//! `[[task]]`: a graded lab's tasks and their checks, read against the
//! fabric, with located errors that say what would be valid.

mod common;

use common::{TWO_HOSTS as DUO, errors, ok};
use turbonet_topo::check::Check;

#[test]
fn tasks_read_with_their_checks_and_defaults() {
    let lab = ok(&format!(
        "{DUO}[[task]]\nname = \"reach\"\ntitle = \"h1 reaches h2\"\nhint = \"routes\"\n\
         [[task.check]]\nfrom = \"h1\"\nto = \"h2\"\n\
         [[task.check]]\nnode = \"s1\"\nroute = \"10.128.0.0/24\"\necmp = 1\n\
         [[task]]\nname = \"cut\"\ntitle = \"h2 is cut off\"\npoints = 3\n\
         [[task.check]]\nfrom = \"h1\"\nto = \"h2\"\nreachable = false\n\
         [[task.check]]\nnode = \"s1\"\nroute = \"10.9.0.0/16\"\npresent = false\n\
         [[task.check]]\nnode = \"h1\"\nrun = \"ip link show\"\noutput = \"mtu 1500\"\n"
    ));
    let id = |n: &str| lab.fabric.node_by_name(n).unwrap().id;
    assert_eq!(lab.tasks.len(), 2);
    let (reach, cut) = (&lab.tasks[0], &lab.tasks[1]);
    assert_eq!((reach.points, reach.hint.as_deref()), (1, Some("routes")));
    assert_eq!(
        reach.checks[0],
        Check::Reach {
            from: id("h1"),
            to: id("h2"),
            reachable: true
        }
    );
    assert_eq!(
        reach.checks[1],
        Check::Route {
            node: id("s1"),
            prefix: "10.128.0.0/24".parse().unwrap(),
            present: true,
            ecmp: Some(1)
        }
    );
    assert_eq!(cut.points, 3);
    assert!(matches!(
        cut.checks[0],
        Check::Reach {
            reachable: false,
            ..
        }
    ));
    assert_eq!(
        cut.checks[2],
        Check::Command {
            node: id("h1"),
            run: "ip link show".to_owned(),
            exit: 0,
            output: Some("mtu 1500".to_owned())
        }
    );
    let names = |n| lab.fabric.node(n).name.as_str();
    assert_eq!(
        cut.checks[1].describe(names),
        "s1 has no route to 10.9.0.0/16"
    );
}

#[test]
fn bad_tasks_are_located_with_what_would_be_valid() {
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n";
    for (extra, says, helps) in [
        (
            "[[task]]\ntitle = \"x\"\n[[task.check]]\nfrom = \"h1\"\nto = \"h2\"\n".to_owned(),
            "missing `name`",
            "leaf-routes",
        ),
        (task.to_owned(), "missing `check`", "`from` and `to`"),
        (
            format!("{task}[[task.check]]\nfrom = \"h1\"\nto = \"h3\"\n"),
            "no node named `h3`",
            "h1",
        ),
        (
            format!("{task}[[task.check]]\nfrom = \"h1\"\n"),
            "missing `to`",
            "to = \"h1-0\"",
        ),
        (
            format!("{task}[[task.check]]\nnode = \"s1\"\nroute = \"10.0.0.1/8\"\n"),
            "host bits are set",
            "10.0.0.0/8",
        ),
        (
            format!("{task}[[task.check]]\nnode = \"s1\"\nroute = \"10.0.0.0/8\"\nrun = \"x\"\n"),
            "`run` is not a key of a route check",
            "`node` and `run`",
        ),
        (
            format!(
                "{task}[[task.check]]\nnode = \"s1\"\nroute = \"10.0.0.0/8\"\nbgp_peer = \"s1\"\n"
            ),
            "`bgp_peer` is not a key of a route check",
            "`node` and `bgp_peer`",
        ),
        (
            format!("{task}[[task.check]]\nfrom = \"h1\"\nto = \"h2\"\nestablished = true\n"),
            "`established` is not a key of a reachability check",
            "`from` and `to`",
        ),
        (
            format!("{task}[[task.check]]\nrun = \"true\"\n"),
            "missing `node`",
            "node = \"leaf0\"",
        ),
        (
            format!("{task}[[task.check]]\nnode = \"s1\"\n"),
            "`node` alone checks nothing",
            "`node` and `route`",
        ),
        (
            format!(
                "{task}[[task.check]]\nnode = \"s1\"\nroute = \"10.0.0.0/8\"\npresent = false\necmp = 2\n"
            ),
            "`ecmp` with `present = false`",
            "leave `ecmp` out",
        ),
        (
            format!("{task}[[task.check]]\nnode = \"s1\"\nrout = \"10.0.0.0/8\"\n"),
            "unknown key `rout`",
            "route",
        ),
        (
            format!(
                "{task}[[task.check]]\nfrom = \"h1\"\nto = \"h2\"\n{task}[[task.check]]\nfrom = \"h1\"\nto = \"h2\"\n"
            ),
            "two tasks named `t`",
            "its own name",
        ),
    ] {
        let e = errors(&format!("{DUO}{extra}"));
        assert!(!e.is_empty(), "{extra}: no error");
        assert!(e[0].2.contains(says), "{extra}: {e:?}");
        assert!(e[0].3.contains(helps), "{extra}: {e:?}");
    }
}

#[test]
fn a_seed_picks_the_same_faults_every_time_and_seeds_differ() {
    let faults: String = (0..5)
        .map(|i| format!("[[faults.fault]]\nname = \"f{i}\"\nnode = \"s1\"\nrun = \"true {i}\"\n"))
        .collect();
    let lab = ok(&format!("{DUO}[faults]\npick = 2\n{faults}"));
    let f = lab.faults.unwrap();
    assert_eq!((f.pick, f.faults.len()), (2, 5));
    let names = |seed| -> Vec<String> { f.chosen(seed).iter().map(|x| x.name.clone()).collect() };
    assert_eq!(names(7).len(), 2);
    assert_eq!(names(7), names(7), "the same seed, the same faults");
    assert!(
        (0..20).any(|s| names(s) != names(7)),
        "other seeds pick other faults"
    );

    for (extra, says) in [
        ("[faults]\npick = 6\n", "missing `fault`"),
        (
            &*format!("[faults]\npick = 6\n{faults}"),
            "`pick = 6` of 5 fault(s)",
        ),
        (
            "[faults]\n[[faults.fault]]\nname = \"x\"\nnode = \"s9\"\nrun = \"true\"\n",
            "no node named `s9`",
        ),
        (
            "[faults]\n[[faults.fault]]\nname = \"x\"\nnode = \"s1\"\n",
            "missing `run`",
        ),
    ] {
        let e = errors(&format!("{DUO}{extra}"));
        assert!(!e.is_empty(), "{extra}: no error");
        assert!(e[0].2.contains(says), "{extra}: {e:?}");
    }
}

#[test]
fn bgp_session_checks_name_a_neighbouring_switch_in_a_bgp_lab() {
    let bgp = r#"[lab]
name = "m"
[routing]
mode = "bgp"
[topology]
kind = "custom"
nodes = [
  { name = "s1", role = "switch" },
  { name = "s2", role = "switch" },
  { name = "h1", role = "host" },
]
links = [{ a = "s1", b = "s2" }, { a = "h1", b = "s1" }]
"#;
    let check = |node: &str, peer: &str| {
        format!(
            "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\nnode = \"{node}\"\nbgp_peer = \"{peer}\"\n"
        )
    };
    let lab = ok(&format!("{bgp}{}", check("s1", "s2")));
    assert!(matches!(
        lab.tasks[0].checks[0],
        Check::Bgp {
            established: true,
            ..
        }
    ));
    for (text, says) in [
        (
            format!("{DUO}{}", check("s1", "h1")),
            "a BGP session check in a lab without BGP",
        ),
        (
            format!("{bgp}{}", check("s1", "h1")),
            "s1 and h1 do not speak BGP to each other",
        ),
        (
            format!("{bgp}{}", check("s2", "h1")),
            "s2 and h1 do not speak BGP to each other",
        ),
    ] {
        let e = errors(&text);
        assert!(e[0].2.contains(says), "{text}: {e:?}");
    }
}

#[test]
fn workload_checks_grade_the_labs_workloads_and_the_students() {
    let lab = ok(&format!(
        "{DUO}[[workload]]\nname = \"bulk\"\nkind = \"tcp\"\npattern = \"pairs\"\n\
         pairs = [[\"h1\", \"h2\"]]\nduration = \"2s\"\n\
         [[workload]]\nname = \"other\"\nkind = \"tcp\"\npattern = \"pairs\"\n\
         pairs = [[\"h2\", \"h1\"]]\nduration = \"2s\"\n\
         [[task]]\nname = \"t\"\ntitle = \"x\"\n\
         [[task.check]]\nworkload = \"bulk\"\nfigure = \"goodput\"\nmin = \"15mbit\"\n\
         [[task.check]]\nran = \"ring\"\nalgorithm = \"ring\"\nfigure = \"busbw\"\nof = \"max\"\nmin = \"1mbit\"\n"
    ));
    let checks = &lab.tasks[0].checks;
    let Check::Figure {
        workload,
        ran: false,
        bound,
        ..
    } = &checks[0]
    else {
        panic!("{:?}", checks[0])
    };
    assert_eq!((workload.as_str(), bound.min), ("bulk", Some(15e6)));
    assert!(matches!(
        &checks[1],
        Check::Figure { workload, ran: true, algorithm: Some(a), .. } if workload == "ring" && a == "ring"
    ));
    // The workload a task grades waits for `lab check`; the other starts
    // with the fabric.
    let graded: Vec<(&str, bool)> = lab
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.graded))
        .collect();
    assert_eq!(graded, [("bulk", true), ("other", false)]);
    let names = |n| lab.fabric.node(n).name.as_str();
    assert_eq!(
        checks[1].describe(names),
        "your workload ring (ring): max busbw >= 1.00 Mbit/s"
    );
}

#[test]
fn bad_workload_checks_say_what_would_be_valid() {
    let bulk = "[[workload]]\nname = \"bulk\"\nkind = \"tcp\"\npattern = \"pairs\"\n\
                pairs = [[\"h1\", \"h2\"]]\nduration = \"2s\"\n";
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\n";
    for (check, says, helps) in [
        (
            "workload = \"blk\"\nfigure = \"goodput\"\nmin = \"1mbit\"\n",
            "no workload named `blk`",
            "ran = \"NAME\"",
        ),
        (
            "workload = \"bulk\"\nfigure = \"busbw\"\nmin = \"1mbit\"\n",
            "tcp workloads do not report `busbw`",
            "goodput",
        ),
        (
            "workload = \"bulk\"\nmin = \"1mbit\"\n",
            "missing `figure`",
            "goodput",
        ),
        (
            "ran = \"ring\"\nalgorithm = \"rign\"\nfigure = \"busbw\"\nmin = \"1mbit\"\n",
            "no algorithm `rign`",
            "ring",
        ),
        (
            "ran = \"ring\"\nfigure = \"busbw\"\n",
            "`busbw` without a bound",
            "min",
        ),
        (
            "workload = \"bulk\"\nalgorithm = \"ring\"\nfigure = \"goodput\"\nmin = \"1mbit\"\n",
            "`algorithm` is not a key of a workload check",
            "`ran`",
        ),
    ] {
        let e = errors(&format!("{DUO}{bulk}{task}{check}"));
        assert!(!e.is_empty(), "{check}: no error");
        assert!(e[0].2.contains(says), "{check}: {e:?}");
        assert!(e[0].3.contains(helps), "{check}: {e:?}");
    }
}

#[test]
fn a_lab_can_be_renamed_in_its_text_and_nothing_else_changes() {
    let text = "# a comment\n[lab]\nname = \"duo\" # the name\nseed = 3\n\n[topology]\nkind = \"custom\"\n";
    let renamed = turbonet_topo::with_lab_name(text, "alice-duo").unwrap();
    assert_eq!(
        renamed,
        "# a comment\n[lab]\nname = \"alice-duo\" # the name\nseed = 3\n\n[topology]\nkind = \"custom\"\n"
    );
    assert_eq!(turbonet_topo::with_lab_name("[topology]\n", "x"), None);
}

#[test]
fn a_convergence_check_takes_a_time_and_a_bgp_lab() {
    let bgp = "[lab]\nname = \"b\"\n[topology]\nkind = \"leaf-spine\"\nspines = 1\nleaves = 2\nhosts_per_leaf = 1\n[routing]\nmode = \"bgp\"\n";
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\n";
    let lab = ok(&format!("{bgp}{task}converged = \"5s\"\n"));
    assert!(matches!(
        &lab.tasks[0].checks[0],
        Check::Converged { within, after: None } if within.as_duration().as_secs() == 5
    ));
    let e = errors(&format!("{DUO}{task}converged = \"5s\"\n"));
    assert!(
        e[0].2.contains("a convergence check in a lab without BGP"),
        "{e:?}"
    );
}

#[test]
fn capture_and_filter_checks_name_what_exists() {
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\n";
    let lab = ok(&format!(
        "{DUO}{task}capture = \"h1--s1\"\nframes = \"ecn-marked\"\n"
    ));
    assert!(matches!(
        &lab.tasks[0].checks[0],
        Check::Capture { link, min: Some(1), max: None, .. } if link == "h1--s1"
    ));
    for (check, says, helps) in [
        ("capture = \"h1--s9\"\n", "no link named `h1--s9`", "h1--s1"),
        (
            "capture = \"h1--s1\"\nframes = \"ecn\"\n",
            "unknown kind of frame `ecn`",
            "ecn-marked",
        ),
        (
            "capture = \"h1--s1\"\ndirection = \"up\"\n",
            "unknown direction `up`",
            "a-b",
        ),
        (
            "capture = \"h1--s1\"\nmin = \"1mbit\"\n",
            "`min` is a number of frames",
            "min = 1",
        ),
        (
            "filter = \"sav\"\n",
            "no filter named `sav`",
            "no `[[filter]]`",
        ),
    ] {
        let e = errors(&format!("{DUO}{task}{check}"));
        assert!(!e.is_empty(), "{check}: no error");
        assert!(e[0].2.contains(says), "{check}: {e:?}");
        assert!(e[0].3.contains(helps), "{check}: {e:?}");
    }
}

#[test]
fn link_checks_name_a_link_or_every_link() {
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\n";
    let lab = ok(&format!(
        "{DUO}{task}link = \"h1--s1\"\nup = true\n[[task.check]]\nlink = \"*\"\nmtu = 9000\n"
    ));
    let checks = &lab.tasks[0].checks;
    assert_eq!(
        checks[0],
        Check::Link {
            link: Some("h1--s1".to_owned()),
            up: Some(true),
            mtu: None
        }
    );
    assert_eq!(
        checks[1],
        Check::Link {
            link: None,
            up: None,
            mtu: Some(9000)
        }
    );
    let names = |n| lab.fabric.node(n).name.as_str();
    assert_eq!(checks[0].describe(names), "h1--s1 is up");
    assert_eq!(
        checks[1].describe(names),
        "every link has MTU 9000 at both ends"
    );
    for (check, says, helps) in [
        (
            "link = \"s1--h1\"\nup = true\n",
            "no link named `s1--h1`",
            "h1--s1",
        ),
        (
            "link = \"h1--s1\"\n",
            "must say what of the link",
            "mtu = 9000",
        ),
        (
            "link = \"*\"\nmtu = 20\n",
            "an MTU of 20 bytes",
            "68 to 65535",
        ),
        (
            "link = \"*\"\nup = true\nnode = \"s1\"\n",
            "`node` is not a key of a link check",
            "`link`",
        ),
    ] {
        let e = errors(&format!("{DUO}{task}{check}"));
        assert!(!e.is_empty(), "{check}: no error");
        assert!(e[0].2.contains(says), "{check}: {e:?}");
        assert!(e[0].3.contains(helps), "{check}: {e:?}");
    }
}

#[test]
fn lookup_checks_take_an_address_and_a_port_of_the_node() {
    let task = "[[task]]\nname = \"t\"\ntitle = \"x\"\n[[task.check]]\n";
    let lab = ok(&format!(
        "{DUO}{task}node = \"s1\"\nlookup = \"10.128.0.2\"\ndev = \"h1\"\n"
    ));
    let s1 = lab.fabric.node_by_name("s1").unwrap().id;
    let check = &lab.tasks[0].checks[0];
    assert_eq!(
        *check,
        Check::Lookup {
            node: s1,
            address: "10.128.0.2".parse().unwrap(),
            dev: Some("h1".to_owned())
        }
    );
    assert_eq!(
        check.describe(|n| lab.fabric.node(n).name.as_str()),
        "s1 sends 10.128.0.2 out of h1"
    );
    for (check, says, helps) in [
        (
            "node = \"s1\"\nlookup = \"10.128.0.0/24\"\n",
            "not an IPv4 address",
            "a prefix is `route`",
        ),
        (
            "node = \"s1\"\nlookup = \"10.128.0.2\"\ndev = \"h3\"\n",
            "s1 has no port `h3`",
            "valid ports: h1, h2",
        ),
        (
            "node = \"s1\"\nlookup = \"10.128.0.2\"\necmp = 2\n",
            "`ecmp` is not a key of a lookup check",
            "`lookup`",
        ),
    ] {
        let e = errors(&format!("{DUO}{task}{check}"));
        assert!(!e.is_empty(), "{check}: no error");
        assert!(e[0].2.contains(says), "{check}: {e:?}");
        assert!(e[0].3.contains(helps), "{check}: {e:?}");
    }
}

#[test]
fn a_capture_check_needs_graded_workloads_that_run_for_a_set_time() {
    let workloads = |amount: &str| {
        format!(
            "{DUO}[[workload]]\nname = \"bulk\"\nkind = \"tcp\"\npattern = \"pairs\"\n\
             pairs = [[\"h1\", \"h2\"]]\n{amount}\n\
             [[task]]\nname = \"t\"\ntitle = \"x\"\n\
             [[task.check]]\nworkload = \"bulk\"\nfigure = \"goodput\"\nmin = \"1mbit\"\n\
             [[task]]\nname = \"u\"\ntitle = \"y\"\n\
             [[task.check]]\ncapture = \"h1--s1\"\n"
        )
    };
    ok(&workloads("duration = \"2s\""));
    let e = errors(&workloads("bytes = \"1MiB\""));
    assert!(e[0].2.contains("`bulk` runs until it is done"), "{e:?}");
    assert!(e[0].3.contains("give `bulk` a `duration`"), "{e:?}");
}
