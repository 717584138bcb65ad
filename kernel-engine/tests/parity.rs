//! The kernel engine's program against the userspace model, frame by
//! frame: the same seed and arrivals must give the same losses, copies,
//! corrupted bits, CE marks, queue drops and due times, and leave both at
//! the same position of the random stream.
//!
//! Each case offers 100,000 frames (`TURBONET_PARITY_FRAMES` to change)
//! of mixed kinds — IPv4 and IPv6 in every ECN codepoint, behind a VLAN
//! tag, ARP, bare Ethernet headers, 14 to 1,500 bytes — in bursts that
//! fill the queues and pauses that drain them, to the program through
//! `BPF_PROG_TEST_RUN` and to `turbonet_injectors::Direction`. Loading a
//! BPF program needs root: without it the tests say they were skipped
//! (under `CI=true` that is a failure).

use std::collections::HashMap;

use turbonet_injectors::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_injectors::{Direction, Distribution, Impairment, Jitter, Loss, packet};
use turbonet_kernel_engine::{Mode, Params, Program, Verdict};

fn frames() -> usize {
    std::env::var("TURBONET_PARITY_FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000)
}

/// The program in test mode, or `None` (skipped) without root.
fn program() -> Option<Program> {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the kernel engine's parity tests need root (BPF), and CI runs as root"
        );
        eprintln!("skipped: loading a BPF program needs root");
        return None;
    }
    Some(Program::load(1, Mode::Test).expect("the kernel loads the kernel engine's program"))
}

/// A small deterministic generator for the traffic (not the model's).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 16
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The frames offered and when.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Traffic {
    /// Every kind and length; bursts a few nanoseconds to microseconds
    /// apart, and now and then a pause of up to 2 ms that drains the queue.
    Mixed,
    /// 125-byte IPv4 frames arriving on whole microseconds: at 1 Gbit/s
    /// transmissions end exactly when frames arrive, the queue's edge.
    Aligned,
}

impl Traffic {
    fn gap(self, g: &mut Lcg) -> u64 {
        match self {
            Traffic::Mixed if g.below(64) == 0 => g.below(2_000_000),
            Traffic::Mixed => g.below(3_000),
            Traffic::Aligned if g.below(64) == 0 => 1_000 * g.below(200),
            Traffic::Aligned => 1_000 * g.below(3),
        }
    }
}

/// Frame `id`: its kind and length drawn from `g`; the id in the source
/// MAC address, which corruption (after the Ethernet header) never
/// touches.
fn frame(g: &mut Lcg, id: u64, traffic: Traffic) -> Vec<u8> {
    let kind = if traffic == Traffic::Aligned {
        0
    } else {
        g.below(9)
    };
    let len = match kind {
        _ if traffic == Traffic::Aligned => 125,
        5 => 42,                           // ARP
        6 => 14,                           // a bare Ethernet header
        _ => 64 + g.below(1_437) as usize, // up to 1,500
    };
    let mut f: Vec<u8> = (0..len).map(|_| g.next() as u8).collect();
    f[6..12].copy_from_slice(&id.to_be_bytes()[2..8]);
    let ecn = [0b10, 0b00, 0b11, 0b01][g.below(4) as usize];
    let ipv4 = |f: &mut Vec<u8>, off: usize, ihl: u8, ecn: u8| {
        f[off] = 0x40 | ihl;
        f[off + 1] = (f[off + 1] & !3) | ecn;
    };
    match kind {
        0..=2 => {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            ipv4(&mut f, 14, 5, ecn);
        }
        3 => {
            f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            f[14] = 0x60 | (f[14] & 0x0f);
            f[15] = (f[15] & 0xcf) | (ecn << 4);
        }
        4 => {
            f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
            f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
            ipv4(&mut f, 18, 5, ecn);
        }
        5 => f[12..14].copy_from_slice(&0x0806u16.to_be_bytes()),
        7 => {
            // IPv4 with options: a 60-byte header.
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            ipv4(&mut f, 14, 15, ecn);
        }
        // A bare header: BPF_PROG_TEST_RUN refuses an IP ethertype
        // without an IP header, so it says Ethernet's experimental type.
        6 => f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()),
        _ => {} // 8: whatever the bytes say
    }
    f
}

fn id_of(f: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[2..8].copy_from_slice(&f[6..12]);
    u64::from_be_bytes(b)
}

/// A copy of a frame that passed, comparable across the engines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Passed {
    duplicate: bool,
    due: u64,
    corrupted: bool,
    marked: bool,
    bytes: Vec<u8>,
}

/// The bytes the program sends for a copy it did not leave in `out`:
/// the frame as it arrived with the copy's edits, made the userspace way.
fn edited(frame: &[u8], bit: Option<u32>, marked: bool) -> Vec<u8> {
    let mut f = frame.to_vec();
    if let Some(bit) = bit {
        f[14 + (bit / 8) as usize] ^= 1 << (bit % 8);
    }
    if marked {
        packet::mark_ce(&mut f);
    }
    f
}

/// A change of parameters at a frame (`turbonet link set`).
struct Change {
    at: usize,
    to: Impairment,
}

/// Offers the same frames to both engines and compares every outcome.
fn compare(name: &str, imp: Impairment, change: Option<Change>, seed: u64, traffic: Traffic) {
    let Some(mut prog) = program() else {
        return;
    };
    let params = |imp: &Impairment| {
        Params::new(imp, 1).unwrap_or_else(|e| panic!("{name}: the program refuses: {e}"))
    };
    prog.start_direction(0, params(&imp), seed).unwrap();
    let mut model = Direction::new(imp, seed);
    model.keep_dropped(true);

    let mut g = Lcg(seed ^ 0x5eed);
    let mut now = 1_000_000_000u64;
    let mut expected: HashMap<(u64, bool), Passed> = HashMap::new();
    let mut out = Vec::new();
    let (mut passed, mut dropped) = (0u64, 0u64);
    let n = frames();
    for i in 0..n {
        if let Some(c) = &change
            && c.at == i
        {
            prog.set_params(0, params(&c.to)).unwrap();
            model.set_impairment(c.to.clone());
        }
        now += traffic.gap(&mut g);
        let id = i as u64;
        let f = frame(&mut g, id, traffic);

        let trace = prog
            .test_run(0, now, &f, &mut out)
            .unwrap_or_else(|e| panic!("{name}: frame {i} ({} bytes): {e}", f.len()));
        let copies = [trace.copy(0), trace.copy(1)];
        let last_passed = copies
            .iter()
            .rposition(|c| matches!(c.verdict, Verdict::Pass { .. }));
        let mut kernel_drops = Vec::new();
        for (k, c) in copies.iter().enumerate() {
            match c.verdict {
                Verdict::None => {}
                Verdict::Loss => kernel_drops.push("loss"),
                Verdict::Queue => kernel_drops.push("queue"),
                Verdict::Pass { due } => {
                    let bytes = if last_passed == Some(k) {
                        out.clone()
                    } else {
                        edited(&f, c.bit, c.marked)
                    };
                    expected.insert(
                        (id, k == 1),
                        Passed {
                            duplicate: k == 1,
                            due,
                            corrupted: c.bit.is_some(),
                            marked: c.marked,
                            bytes,
                        },
                    );
                }
            }
        }

        model.offer(now, f);
        let mut model_drops: Vec<&str> = model.take_dropped().map(|(c, _)| c.name()).collect();
        model_drops.sort_unstable();
        kernel_drops.sort_unstable();
        assert_eq!(
            model_drops, kernel_drops,
            "{name}: frame {i} at {now} ns: drops differ"
        );
        dropped += model_drops.len() as u64;
        let depth = prog.state(0).unwrap().queue();
        let c = model.counters();
        assert_eq!(
            depth,
            (c.queue_packets, c.queue_bytes),
            "{name}: frame {i} at {now} ns: queue depth (frames, bytes) differs"
        );
        // What is due by now leaves the model (its queue is already up to
        // date for `now`, so this changes none of its decisions).
        while let Some((due, bytes, marks)) = model.pop_due_marked(now) {
            passed += 1;
            check(name, &mut expected, due, bytes, marks);
        }
    }
    while let Some((due, bytes, marks)) = model.pop_due_marked(u64::MAX) {
        passed += 1;
        check(name, &mut expected, due, bytes, marks);
    }
    assert!(
        expected.is_empty(),
        "{name}: the program passed {} copies the model did not, e.g. {:?}",
        expected.len(),
        expected.keys().next()
    );

    let st = prog.state(0).unwrap();
    let c = model.counters();
    let kernel = (
        st.rx_packets,
        st.rx_bytes,
        st.dropped_loss,
        st.dropped_queue,
        st.duplicated,
        st.corrupted,
        st.ecn_marked,
    );
    let user = (
        c.rx_packets,
        c.rx_bytes,
        c.dropped_loss,
        c.dropped_queue,
        c.duplicated,
        c.corrupted,
        c.ecn_marked,
    );
    assert_eq!(
        kernel, user,
        "{name}: counters (rx, bytes, loss, queue, dup, corrupt, ecn)"
    );
    assert_eq!(
        u128::from(st.drawn),
        model.words_drawn(),
        "{name}: the engines stopped at different points of the random stream"
    );
    eprintln!(
        "{name}: {n} frames, {passed} copies passed, {dropped} dropped, {} corrupted, {} marked, \
         {} words drawn: identical",
        st.corrupted, st.ecn_marked, st.drawn
    );
    assert!(passed > 0, "{name}: nothing passed, nothing compared");
}

fn check(
    name: &str,
    expected: &mut HashMap<(u64, bool), Passed>,
    due: u64,
    bytes: Vec<u8>,
    marks: turbonet_injectors::Marks,
) {
    let id = id_of(&bytes);
    let got = Passed {
        duplicate: marks.duplicate,
        due,
        corrupted: marks.corrupted,
        marked: marks.ecn_marked,
        bytes,
    };
    let want = expected.remove(&(id, marks.duplicate)).unwrap_or_else(|| {
        panic!(
            "{name}: the model passed frame {id} (duplicate: {}) which the program did not",
            marks.duplicate
        )
    });
    if got != want {
        let first = got.bytes.iter().zip(&want.bytes).position(|(x, y)| x != y);
        panic!(
            "{name}: frame {id} differs (first differing byte: {first:?})\n  model:   {}\n  program: {}",
            summary(&got),
            summary(&want)
        );
    }
}

fn summary(p: &Passed) -> String {
    format!(
        "due {}, duplicate {}, corrupted {}, marked {}, {} bytes",
        p.due,
        p.duplicate,
        p.corrupted,
        p.marked,
        p.bytes.len()
    )
}

fn p(x: f64) -> LossProb {
    LossProb(x)
}

fn jitter(micros: u64, reorder: bool) -> Option<Jitter> {
    Some(Jitter {
        amount: Delay::from_micros(micros),
        distribution: Distribution::Uniform,
        reorder,
    })
}

#[test]
fn bernoulli_loss_duplication_and_corruption() {
    compare(
        "bernoulli",
        Impairment {
            delay: Delay::from_micros(1_000),
            loss: Some(Loss::Bernoulli(p(0.01))),
            duplicate: Some(p(0.01)),
            corrupt: Some(p(0.01)),
            ..Impairment::default()
        },
        None,
        1,
        Traffic::Mixed,
    );
}

#[test]
fn gilbert_elliott_bursts() {
    compare(
        "gilbert-elliott",
        Impairment {
            delay: Delay::from_micros(50),
            loss: Some(Loss::GilbertElliott {
                p: p(0.01),
                r: p(0.3),
                bad: p(0.9),
                good: p(0.001),
            }),
            ..Impairment::default()
        },
        None,
        2,
        Traffic::Mixed,
    );
}

#[test]
fn rate_queue_in_packets_with_ecn() {
    compare(
        "queue-packets",
        Impairment {
            rate: Some(Rate(100_000_000)),
            queue: QueueLimit::Packets(100),
            ecn: Some(QueueLimit::Packets(20)),
            delay: Delay::from_micros(50),
            ..Impairment::default()
        },
        None,
        3,
        Traffic::Mixed,
    );
}

#[test]
fn rate_queue_in_bytes_with_ecn_duplicates_and_corruption() {
    compare(
        "queue-bytes",
        Impairment {
            rate: Some(Rate(10_000_000)),
            queue: QueueLimit::Bytes(14_000),
            ecn: Some(QueueLimit::Bytes(3_000)),
            duplicate: Some(p(0.05)),
            corrupt: Some(p(0.02)),
            ..Impairment::default()
        },
        None,
        4,
        Traffic::Mixed,
    );
}

#[test]
fn uniform_jitter_in_order() {
    compare(
        "jitter",
        Impairment {
            delay: Delay::from_micros(1_000),
            jitter: jitter(200, false),
            loss: Some(Loss::Bernoulli(p(0.005))),
            ..Impairment::default()
        },
        None,
        5,
        Traffic::Mixed,
    );
}

#[test]
fn uniform_jitter_reordering_at_rate() {
    compare(
        "jitter-reorder",
        Impairment {
            rate: Some(Rate(1_000_000_000)),
            delay: Delay::from_micros(100),
            jitter: jitter(500, true),
            duplicate: Some(p(0.02)),
            ..Impairment::default()
        },
        None,
        6,
        Traffic::Mixed,
    );
}

#[test]
fn certain_events_draw_nothing() {
    compare(
        "certain",
        Impairment {
            delay: Delay::from_micros(10),
            loss: Some(Loss::Bernoulli(p(0.0))),
            duplicate: Some(p(1.0)),
            corrupt: Some(p(1.0)),
            ..Impairment::default()
        },
        None,
        7,
        Traffic::Mixed,
    );
}

#[test]
fn link_set_midway_keeps_the_stream_and_the_queue() {
    let before = Impairment {
        rate: Some(Rate(50_000_000)),
        queue: QueueLimit::Packets(200),
        ecn: Some(QueueLimit::Packets(50)),
        delay: Delay::from_micros(300),
        jitter: jitter(100, false),
        loss: Some(Loss::Bernoulli(p(0.02))),
        corrupt: Some(p(0.01)),
        duplicate: Some(p(0.01)),
    };
    let after = Impairment {
        rate: Some(Rate(20_000_000)),
        queue: QueueLimit::Bytes(10_000),
        ecn: None,
        delay: Delay::from_micros(2_000),
        jitter: jitter(700, true),
        loss: Some(Loss::GilbertElliott {
            p: p(0.02),
            r: p(0.5),
            bad: p(1.0),
            good: p(0.0),
        }),
        corrupt: None,
        duplicate: Some(p(0.03)),
    };
    compare(
        "link-set",
        before,
        Some(Change {
            at: frames() / 2,
            to: after,
        }),
        8,
        Traffic::Mixed,
    );
}

#[test]
fn no_impairment_passes_everything_on_time() {
    compare("none", Impairment::default(), None, 9, Traffic::Mixed);
}

#[test]
fn transmissions_ending_exactly_as_frames_arrive() {
    compare(
        "aligned",
        Impairment {
            rate: Some(Rate(1_000_000_000)),
            queue: QueueLimit::Packets(30),
            ecn: Some(QueueLimit::Packets(5)),
            ..Impairment::default()
        },
        None,
        10,
        Traffic::Aligned,
    );
}
