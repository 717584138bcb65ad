//! `[[job]]`, `[[workload]]` and `[[expect]]`: what runs on a fabric and
//! what a run must show, read against the fabric they name.

mod common;

use turbonet_topo::check::{After, Check};
use turbonet_topo::experiment::*;
use turbonet_topo::units::{Bytes, Delay, Rate};

use common::{errors, ok};

/// The bundled scaled-down HPN pod: 2 segments of 4 hosts (+1 backup), 2
/// rails of 2 planes.
const HPN: &str = r#"[lab]
name = "ex"
seed = 7
[topology]
kind = "hpn"
segments = 2
hosts_per_segment = 4
backup_hosts = 1
rails = 2
planes = 2
aggs_per_plane = 2
cores = 2
core_uplinks = 1
[routing]
mode = "static"
[links.host-tor]
rate = "1gbit"
"#;

fn with(rest: &str) -> String {
    format!("{HPN}{rest}")
}

#[test]
fn a_job_selects_the_rail_of_every_host_of_a_segment_in_rank_order() {
    let lab = ok(&with(
        r#"
[[job]]
name = "train"
segment = 1
rail = 1

[[job]]
name = "pair"
hosts = ["h1-2", "h0-0"]
"#,
    ));
    let train = &lab.jobs[0];
    let names: Vec<&str> = train
        .ranks
        .iter()
        .map(|r| lab.fabric.node(r.host).name.as_str())
        .collect();
    // Segment 1 without its backup host, in node order.
    assert_eq!(names, ["h1-0", "h1-1", "h1-2", "h1-3"]);
    for r in &train.ranks {
        assert_eq!(r.rail, 1);
        // Rail 1's address: that of the host's ports to the rail-1 ToRs.
        let port = lab
            .fabric
            .ports(r.host)
            .find(|(_, _, far)| lab.fabric.node(far.node).name.contains("-r1"))
            .unwrap();
        assert_eq!(r.addr, port.1.addr.addr());
    }
    let pair: Vec<&str> = lab.jobs[1]
        .ranks
        .iter()
        .map(|r| lab.fabric.node(r.host).name.as_str())
        .collect();
    assert_eq!(pair, ["h1-2", "h0-0"]);
}

#[test]
fn workloads_of_every_kind_read_with_their_defaults() {
    let lab = ok(&with(
        r#"
[[job]]
name = "train"
segment = 0

[[workload]]
name = "ring"
kind = "collective"
job = "train"
op = "all-reduce"
sizes = ["16MiB", "1MiB"]
gap = "5ms"

[[workload]]
name = "bulk"
kind = "tcp"
hosts = ["h0-0", "h1-0", "h1-1"]
pattern = "incast"
to = "h1-0"
bytes = "8MiB"
congestion = "bbr"
start = "2s"

[[workload]]
name = "probe"
kind = "udp"
pattern = "pairs"
pairs = [["h0-0", "h1-0"]]
rate = "10mbit"
duration = "3s"
pacing = "poisson"

[[workload]]
name = "hello"
kind = "exec"
job = "train"
command = ["sh", "-c", "echo $RANK"]
"#,
    ));
    let [ring, bulk, probe, hello] = &lab.workloads[..] else {
        panic!("{:?}", lab.workloads)
    };
    assert_eq!(ring.job, "train");
    assert_eq!(ring.ranks.len(), 4);
    assert_eq!(
        ring.kind,
        WorkloadKind::Collective {
            op: Op::AllReduce,
            algorithm: None,
            sizes: vec![Bytes(1 << 20), Bytes(16 << 20)],
            iterations: 5,
            warmup: 1,
            gap: Delay::from_millis(5),
            root: 0,
            skew: None,
        }
    );
    // An inline job is named after its workload; `to` is an index into it.
    assert_eq!(bulk.job, "bulk");
    assert_eq!(bulk.start, Delay::from_secs(2));
    assert_eq!(
        bulk.kind,
        WorkloadKind::Tcp {
            pattern: Pattern::Incast { to: 1 },
            arrivals: Arrivals::At(std::time::Duration::ZERO),
            amount: Amount::Bytes(Bytes(8 << 20)),
            congestion: Some("bbr".into()),
            on_off: None,
        }
    );
    // Without hosts: every host that is not a backup.
    assert_eq!(probe.ranks.len(), 8);
    let WorkloadKind::Udp {
        pattern,
        rate,
        size,
        pacing,
        ..
    } = &probe.kind
    else {
        panic!("{probe:?}")
    };
    assert_eq!(*pattern, Pattern::Pairs(vec![(0, 4)]));
    assert_eq!(
        (*rate, *size, *pacing),
        (Offered::Rate(Rate::from_mbit(10)), 1400, Pacing::Poisson)
    );
    assert!(matches!(&hello.kind, WorkloadKind::Exec { command } if command.len() == 3));
    // Seeds differ per workload and follow the scenario's.
    assert_ne!(ring.seed, bulk.seed);
    let again = with("[[workload]]\nname = \"ring\"\nkind = \"exec\"\ncommand = [\"true\"]\n");
    let again = ok(&again.replace("seed = 7", "seed = 8"));
    assert_ne!(again.workloads[0].seed, ring.seed);
}

#[test]
fn background_load_is_a_share_of_each_sender_s_links_and_flows_may_burst() {
    let lab = ok(&with(
        r#"
[[workload]]
name = "background"
kind = "udp"
segment = 0
pattern = "all-to-all"
load = "30%"
size = 1458
duration = "2s"
on = "100ms"
off = "300ms"
periods = "exponential"

[[workload]]
name = "bursts"
kind = "tcp"
pattern = "pairs"
pairs = [["h0-0", "h1-0"]]
duration = "2s"
on = "50ms"
off = "50ms"
"#,
    ));
    let [background, bursts] = &lab.workloads[..] else {
        panic!("{:?}", lab.workloads)
    };
    let WorkloadKind::Udp { rate, on_off, .. } = &background.kind else {
        panic!("{background:?}")
    };
    assert_eq!(*rate, Offered::Load(0.3));
    assert_eq!(
        *on_off,
        Some(OnOff {
            on: Delay::from_millis(100),
            off: Delay::from_millis(300),
            periods: Periods::Exponential,
        })
    );
    // Each host of segment 0 reaches its ToR at 1 Gbit/s on rail 0 (both
    // ports of the dual-ToR NIC): 2 Gbit/s, of which 30% on the wire
    // is shared by its 3 flows; a 1458-byte payload is 1500 bytes there.
    let capacity = background.ranks[0].capacity(&lab.fabric);
    assert_eq!(capacity, Some(Rate::from_mbit(2000)));
    assert_eq!(
        rate.per_flow(capacity, 3, 1458),
        Rate(194_400_000),
        "2 Gbit/s x 0.3 x 1458/1500 / 3"
    );
    assert!(matches!(
        bursts.kind,
        WorkloadKind::Tcp {
            on_off: Some(OnOff {
                periods: Periods::Fixed,
                ..
            }),
            ..
        }
    ));

    let errs = errors(&with(
        r#"
[[workload]]
name = "both"
kind = "udp"
rate = "1mbit"
load = 0.5
duration = "1s"

[[workload]]
name = "over"
kind = "udp"
load = "150%"
duration = "1s"

[[workload]]
name = "half"
kind = "udp"
rate = "1mbit"
duration = "1s"
on = "10ms"
"#,
    ));
    let find = |needle: &str| {
        errs.iter()
            .find(|e| e.2.contains(needle))
            .unwrap_or_else(|| panic!("no error with {needle:?} in {errs:#?}"))
    };
    assert_eq!(find("at a `rate` or a `load`, not both").0, 23);
    assert!(
        find("`load` must be above 0 and at most 100%")
            .3
            .contains("30%")
    );
    assert_eq!(find("needs both `on` and `off`").0, 37);
    // A link without a rate: the aggregation links of this pod have none,
    // but its hosts' links do; a scenario without rates refuses `load`.
    let bare = with("[[workload]]\nname = \"bg\"\nkind = \"udp\"\nload = 0.2\nduration = \"1s\"\n")
        .replace("[links.host-tor]\nrate = \"1gbit\"\n", "");
    let errs = errors(&bare);
    assert!(
        errs.iter().any(|e| e.2.contains("has a link without one")),
        "{errs:#?}"
    );
}

#[test]
fn expectations_resolve_their_workload_link_and_event() {
    let lab = ok(&with(
        r#"
[[timeline]]
name = "core-fails"
at = "1s"
action = "fail"
node = "core0-0"

[[workload]]
name = "ring"
kind = "collective"
op = "all-reduce"
size = "1MiB"

[[workload]]
name = "bulk"
kind = "tcp"
pattern = "pairs"
pairs = [["h0-0", "h1-0"]]
duration = "2s"

[[expect]]
reachable = true

[[expect]]
workload = "ring"
figure = "busbw"
min = "100mbit"

[[expect]]
name = "bulk near line rate"
workload = "bulk"
figure = "goodput"
within = "10%"
of_link = "h0-0--tor0-r0p0"

[[expect]]
converged = "5s"
after = "core-fails"
"#,
    ));
    let [reach, busbw, near, conv] = &lab.expects[..] else {
        panic!("{:?}", lab.expects)
    };
    assert_eq!(reach.check, Check::Reachable);
    assert_eq!(busbw.name, "ring: each busbw >= 100 Mbit/s");
    assert_eq!(
        busbw.check,
        Check::Figure {
            workload: "ring".into(),
            ran: false,
            algorithm: None,
            figure: Figure::Busbw,
            of: Of::Each,
            bound: Bound {
                min: Some(1e8),
                max: None
            },
        }
    );
    assert_eq!(near.name, "bulk near line rate");
    let Check::Figure { bound, .. } = &near.check else {
        panic!()
    };
    assert!((bound.min.unwrap() - 0.9e9).abs() < 1.0 && (bound.max.unwrap() - 1.1e9).abs() < 1.0);
    assert_eq!(
        conv.check,
        Check::Converged {
            within: Delay::from_secs(5),
            after: Some(After {
                index: 0,
                event: "core-fails".into()
            })
        }
    );
}

#[test]
fn mistakes_are_located_and_say_what_would_be_valid() {
    let text = with(
        r#"
[[job]]
name = "train"
hosts = ["h0-0", "tor0-r0p0", "h9-9"]

[[workload]]
name = "ring"
kind = "collectiv"

[[workload]]
name = "ar"
kind = "collective"
job = "trian"
op = "all-reduce"
size = "1MiB"

[[workload]]
name = "bulk"
kind = "tcp"
rate = "1gbit"
bytes = "1MiB"

[[workload]]
name = "hd"
kind = "collective"
segment = 0
count = 3
op = "all-reduce"
algorithm = "halving-doubling"
size = "4mib"

[[expect]]
workload = "bluk"
figure = "goodput"
min = "1gbit"

[[workload]]
name = "ok"
kind = "collective"
op = "all-gather"
size = "1MiB"

[[expect]]
workload = "ok"
figure = "goodput"
min = "1gbit"

[[expect]]
workload = "bulk"
figure = "fct"
max = "1s"
"#,
    );
    let errs = errors(&text);
    let find = |needle: &str| {
        errs.iter()
            .find(|e| e.2.contains(needle))
            .unwrap_or_else(|| panic!("no error with {needle:?} in {errs:#?}"))
    };
    let e = find("`tor0-r0p0` is a switch (tor), not a host");
    assert_eq!(e.0, 21);
    let e = find("no host named `h9-9`");
    assert!(e.3.contains("close names"), "{e:?}");
    let e = find("unknown workload kind `collectiv`");
    assert!(e.3.contains("did you mean `collective`"), "{e:?}");
    let e = find("no job named `trian`");
    assert!(e.3.contains("did you mean `train`"), "{e:?}");
    let e = find("`rate` is not a key of `tcp` workloads");
    assert!(e.3.contains("bytes"), "{e:?}");
    let e = find("halving-doubling needs a power-of-two number of ranks, this job has 3");
    assert_eq!(e.0, 46);
    let e = find("unknown unit `mib`");
    assert!(e.3.contains("did you mean `MiB`"), "{e:?}");
    let e = find("no workload named `bluk`");
    assert!(e.3.contains("did you mean `bulk`"), "{e:?}");
    find("collective workloads do not report `goodput`");
    // `bulk` is declared but invalid: reported once, not again here.
    assert!(
        !errs
            .iter()
            .any(|e| e.2.contains("no workload named `bulk`"))
    );
}
