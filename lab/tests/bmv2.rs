//! turbonet.p4 on the real target: BMv2's `simple_switch_grpc` started as
//! `up` starts it, programmed over P4Runtime with p4c's JSON and P4Info
//! (`p4/build/`), its tables written through the pipeline's contract, and
//! frames sent through two veth ports.
//!
//! Ignored by default: it needs root and `simple_switch_grpc` on `PATH`
//! (`scripts/build-p4-tools`, see docs/p4.md), which CI does not build.
//! Run it with `cargo test -p turbonet-lab --test bmv2 -- --ignored`.

use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::process::Command;
use std::time::{Duration, Instant};

use turbonet_lab::dataplane::p4::switches;
use turbonet_p4::p4::v1::{
    Action, ActionProfileMember, Entity, FieldMatch, TableAction, TableEntry, action, entity,
    field_match, table_action, update,
};
use turbonet_p4::pipeline::{ActionIds, Target};
use turbonet_p4::{Pipeline, Schema, turbonet_p4info};
use turbonet_packetio::socket::{PacketSocket, RxBatch};

const DEVICE: u64 = 7;
/// The egress link's delay, and the queue it is mapped to (not 0: BMv2
/// drops it unless started with enough priority queues).
const DELAY: Duration = Duration::from_millis(50);
const QUEUE: u64 = 3;
const MARK: &[u8] = b"turbonet-bmv2-test";

/// A namespace with veth pairs p1/h1 and p2/h2, and the BMv2 started in
/// it; both go when dropped.
struct Bench {
    ns: String,
    pid: Option<u32>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Bench {
    fn new() -> Self {
        let ns = format!("tnbm{}", std::process::id());
        ip(&["netns", "add", &ns]);
        let bench = Bench { ns, pid: None };
        let ns = bench.ns.as_str();
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        for n in ["1", "2"] {
            let (p, h) = (format!("p{n}"), format!("h{n}"));
            ip(&[
                "-n", ns, "link", "add", &p, "type", "veth", "peer", "name", &h,
            ]);
            for end in [&p, &h] {
                ip(&["-n", ns, "link", "set", end, "up"]);
            }
        }
        bench
    }

    fn netns(&self) -> OwnedFd {
        turbonet_host::namespaces::open(&self.ns).unwrap()
    }

    /// A socket on interface `name` of the namespace.
    fn socket(&self, name: &str) -> PacketSocket {
        turbonet_host::namespaces::in_namespace(&self.netns(), || {
            let index = nix::net::if_::if_nametoindex(name)?;
            PacketSocket::bind(index)
        })
        .unwrap()
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        let base = std::env::temp_dir().join(&self.ns);
        for extension in ["log", "ipc"] {
            let _ = std::fs::remove_file(base.with_extension(extension));
        }
    }
}

fn bytes(value: u64, bits: u32) -> Vec<u8> {
    turbonet_p4::bytes::encode(value, bits).unwrap()
}

fn exact(field_id: u32, value: Vec<u8>) -> FieldMatch {
    FieldMatch {
        field_id,
        field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
            value,
        })),
    }
}

fn call<const N: usize>(a: &ActionIds<N>, values: [u64; N]) -> Action {
    Action {
        action_id: a.id,
        params: (0..N)
            .map(|i| action::Param {
                param_id: a.params[i],
                value: bytes(values[i], a.widths[i]),
            })
            .collect(),
    }
}

fn entry(table_id: u32, r#match: Vec<FieldMatch>, action: table_action::Type) -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(TableEntry {
            table_id,
            r#match,
            action: Some(TableAction {
                r#type: Some(action),
            }),
            ..TableEntry::default()
        })),
    }
}

/// Virtual switch 1: port 1 untagged is its virtual port 1; 10.0.2.0/24
/// leaves by virtual port 2, port 2 untagged, queue [`QUEUE`], [`DELAY`].
fn entities(p: &Pipeline) -> Vec<Entity> {
    let [set_vport_delay, set_vport_loss] = p.set_vport_in.map(Option::unwrap);
    let mut set_vport = call(&p.set_vport, [1, 1]);
    for (id, bits) in [set_vport_delay, set_vport_loss] {
        set_vport.params.push(action::Param {
            param_id: id,
            value: bytes(0, bits),
        });
    }
    let delay = p.target.delay_ticks(DELAY.as_nanos() as u64);
    let selector = p.ecmp_selector.unwrap();
    vec![
        entry(
            p.port_mapper.id,
            vec![
                exact(p.port_mapper.fields[0], bytes(1, 9)),
                exact(p.port_mapper.fields[1], bytes(0, 1)),
                exact(p.port_mapper.fields[2], bytes(0, 12)),
            ],
            table_action::Type::Action(set_vport),
        ),
        entry(
            p.queue_mapper.id,
            vec![exact(p.queue_mapper.fields[0], bytes(2, 16))],
            table_action::Type::Action(call(&p.set_egress, [2, 0, QUEUE, delay, 0])),
        ),
        Entity {
            entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: selector,
                member_id: 2,
                action: Some(call(
                    &p.set_next_hop,
                    [2, 0x0274_6800_0002, 0x0274_6e00_0001],
                )),
            })),
        },
        entry(
            p.ipv4_lpm.id,
            vec![
                exact(p.ipv4_lpm.fields[0], bytes(1, 16)),
                FieldMatch {
                    field_id: p.ipv4_lpm.fields[1],
                    field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                        value: vec![10, 0, 2, 0],
                        prefix_len: 24,
                    })),
                },
            ],
            table_action::Type::ActionProfileMemberId(2),
        ),
    ]
}

/// A UDP datagram from host 10.0.1.2 to 10.0.2.2 behind `ether_type` and
/// `between` (what comes between the MAC addresses' EtherType and IPv4).
fn frame(ether_type: u16, between: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    ip.extend(Ipv4Addr::new(10, 0, 1, 2).octets());
    ip.extend(Ipv4Addr::new(10, 0, 2, 2).octets());
    let total = (20 + 8 + MARK.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = turbonet_packetio::checksum::internet_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = vec![0x02, 0x74, 0x6e, 0, 0, 1, 0x02, 0x74, 0x68, 0, 0, 1];
    f.extend(ether_type.to_be_bytes());
    f.extend(between);
    f.extend(ip);
    f.extend([0x03, 0xe8, 0x07, 0xd0]);
    f.extend((8 + MARK.len() as u16).to_be_bytes());
    f.extend([0, 0]);
    f.extend(MARK);
    f
}

/// Sends `frame` on `tx` and waits up to `window` for a frame carrying
/// [`MARK`] on `rx`: it and how long it took.
fn through(
    tx: &PacketSocket,
    rx: &PacketSocket,
    frame: Vec<u8>,
    window: Duration,
) -> Option<(Vec<u8>, Duration)> {
    let mut batch = RxBatch::new(16, 2048);
    while rx.recv_batch(&mut batch).unwrap_or(0) > 0 {}
    let sent = Instant::now();
    assert_eq!(tx.send_batch(&[frame]).unwrap(), 0, "the frame was sent");
    while sent.elapsed() < window {
        let n = rx.recv_batch(&mut batch).unwrap_or(0);
        for i in 0..n {
            let got = batch.frame(i);
            if got.windows(MARK.len()).any(|w| w == MARK) {
                return Some((got.to_vec(), sent.elapsed()));
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

#[tokio::test]
#[ignore = "needs root and simple_switch_grpc on PATH (scripts/build-p4-tools)"]
async fn turbonet_p4_runs_on_simple_switch_grpc() {
    // Run only when asked (`--ignored`): what it needs missing is a failure.
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (a network namespace, veths, BMv2's ports)"
    );
    assert!(
        switches::find_bmv2().is_some(),
        "{} is not on PATH (scripts/build-p4-tools builds it)",
        switches::BMV2
    );
    let mut bench = Bench::new();
    let p4info = turbonet_p4info();
    let queues = switches::queues(&p4info).unwrap();
    let log = std::env::temp_dir().join(format!("{}.log", bench.ns));
    let pid = switches::start_bmv2("bm", &bench.ns, (DEVICE, &[1, 2], queues), &log)
        .await
        .unwrap();
    bench.pid = Some(pid);

    let mut client = switches::connect_in(&bench.ns, switches::BMV2_GRPC, DEVICE, 1)
        .await
        .unwrap();
    client
        .set_pipeline(p4info.clone(), turbonet_p4::TURBONET_BMV2_JSON.to_vec())
        .await
        .unwrap();
    let pipeline =
        Pipeline::resolve(&Schema::new(&p4info).unwrap(), &p4info, Target::Bmv2).unwrap();
    client
        .write(update::Type::Insert, entities(&pipeline))
        .await
        .unwrap();
    let read = client
        .read(Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry::default())),
        })
        .await
        .unwrap();
    assert_eq!(
        read.len(),
        3,
        "port mapper, queue mapper and route read back"
    );

    let (h1, h2) = (bench.socket("h1"), bench.socket("h2"));
    // Routed out of port 2 through queue 3, held for the link's delay:
    // 50,000 ticks of BMv2's microsecond clock.
    let (out, took) = through(&h1, &h2, frame(0x0800, &[]), Duration::from_secs(3)).expect(
        "the routed frame leaves port 2 within 3 s (BMv2 has the queues the pipeline uses, \
             the delay is in its microseconds)",
    );
    assert_eq!(&out[0..6], &[0x02, 0x74, 0x68, 0, 0, 2], "next hop's MAC");
    assert_eq!(&out[12..14], &[0x08, 0x00], "untagged");
    assert_eq!(out[22], 63, "TTL decremented");
    assert!(
        took >= DELAY,
        "held {took:?}, the link's delay is {DELAY:?}"
    );
    assert!(took < DELAY * 10, "held {took:?} for a delay of {DELAY:?}");
    println!("routed through queue {QUEUE} in {took:?} (delay {DELAY:?})");

    // A delay header from a host names port 2, queue 0, due long ago: it
    // is not the pipeline's, so it chooses nothing.
    let forged = [0, 0, 0, 0, 0, 0, 0b0000_0001, 0, 0, 2, 0x08, 0x00];
    let leaked = through(&h1, &h2, frame(0x88b5, &forged), Duration::from_millis(500));
    assert!(leaked.is_none(), "a host's 0x88b5 frame left port 2");
    // Tagged with VLAN id 0 is not untagged: no port mapper entry.
    let tagged = through(
        &h1,
        &h2,
        frame(0x8100, &[0x00, 0x00, 0x08, 0x00]),
        Duration::from_millis(500),
    );
    assert!(tagged.is_none(), "a frame tagged 0 took the untagged entry");
}
