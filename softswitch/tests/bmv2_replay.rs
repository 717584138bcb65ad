//! The soft switch held to BMv2: every recording of `tests/bmv2/*.json`
//! (made on real `simple_switch_grpc` by `lab/tests/bmv2_record.rs`, see
//! docs/p4.md) replayed through the soft switch's sans-I/O data plane. Its
//! writes go through the soft switch's P4Runtime service with p4c's BMv2
//! JSON as the device config (so it stands in for BMv2: delays in
//! microseconds, BMv2's ECMP hash and byte counts); its frames and
//! PacketOuts go into [`Switch`] on a virtual clock, one step at a time;
//! cables between switches are carried by the test.
//!
//! Required equal: per step, the frames out (switch, port, bytes) and the
//! PacketIns (metadata, payload); after the last step, every counter cell.
//! Where they may differ on purpose:
//!
//! - **timing**: the soft switch holds a frame exactly its delay; BMv2's
//!   was measured at the veth's far end, its delay plus its own time (about
//!   1-3 ms here): the soft switch's must be at most BMv2's and within
//!   [`SLACK_US`] of it;
//! - **order across ports** within a step: BMv2's threads make it
//!   arbitrary, so frames are compared sorted;
//! - **counter cell 0**: no virtual port is 0; BMv2's program counts there
//!   what the port mapper or the routes miss (it does not return after a
//!   miss, so `vport_rx[0]` and `vport_tx[0]` count frames it drops); the
//!   soft switch counts nothing for them.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::Bench;
use tokio_stream::StreamExt;
use turbonet_p4::p4::v1::{PacketOut, stream_message_response};
use turbonet_p4::{Schema, turbonet_p4info};
use turbonet_softswitch::recording::{
    COUNTERS, CounterCell, FrameOut, Packet, Recording, counter_id, hex, packet_metadata, unhex,
};
use turbonet_softswitch::{Attach, DeviceConfig, PortConfig, Switch};

/// How much longer than the soft switch BMv2 may have taken (its own time
/// plus the recorder's polling): measured 1.1-2.8 ms.
const SLACK_US: u64 = 10_000;

/// Steps are this far apart on the virtual clock, beyond any delay.
const STEP_NS: u64 = 10_000_000_000;

fn recordings() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bmv2");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// One soft switch of a replay: its device served on loopback with a
/// primary controller, and its data plane.
struct Soft {
    bench: Bench,
    switch: Switch,
}

async fn soft(index: usize, rec: &Recording, schema: &Schema) -> Soft {
    // p4c's BMv2 JSON, as the recorder gave BMv2: the soft switch stands
    // in for BMv2 with the ports it was started with.
    let mut bench =
        Bench::start_raw(turbonet_p4info(), turbonet_p4::TURBONET_BMV2_JSON.to_vec()).await;
    let sw = &rec.switches[index];
    let entities = sw
        .writes
        .iter()
        .map(|w| w.entity(schema).unwrap())
        .collect();
    bench.insert(entities).await;
    let port = |port, attach| PortConfig {
        port,
        attach,
        queues: vec![],
        line_rate_bps: None,
        line_limit_bytes: None,
    };
    let mut ports: Vec<PortConfig> = sw
        .ports
        .iter()
        .map(|&p| port(p, Attach::Interface(format!("p{p}"))))
        .collect();
    for &[a, b] in &sw.loopbacks {
        ports.push(port(a, Attach::Cable(b)));
        ports.push(port(b, Attach::Cable(a)));
    }
    // A cable to another switch is an interface the test carries.
    for end in rec.cables.iter().flatten().filter(|e| e.switch == index) {
        ports.push(port(end.port, Attach::Interface(format!("c{}", end.port))));
    }
    let base = DeviceConfig { ports, seed: 1 };
    base.validate().unwrap();
    let switch = Switch::with_ports(bench.device.clone(), base);
    assert!(switch.down().is_none(), "{:?}", switch.down());
    Soft { bench, switch }
}

/// What the soft switches did with one step's input: frames out (the
/// cables between switches carried), PacketIns.
async fn run_step(
    rec: &Recording,
    softs: &mut [Soft],
    t0: u64,
    step: &turbonet_softswitch::recording::Step,
    out_ids: &BTreeMap<String, u32>,
    in_ids: &BTreeMap<String, u32>,
) -> (Vec<FrameOut>, Vec<Packet>) {
    if let Some(f) = &step.frame_in {
        softs[f.switch]
            .switch
            .receive(t0, f.port, &unhex(&f.frame).unwrap());
    }
    if let Some(p) = &step.packet_out {
        softs[p.switch].switch.packet_out(
            t0,
            PacketOut {
                payload: unhex(&p.payload).unwrap(),
                metadata: p.metadata(out_ids).unwrap(),
            },
        );
    }
    let mut out = Vec::new();
    let mut now = t0;
    let mut due = Vec::new();
    for _ in 0..10_000 {
        for i in 0..softs.len() {
            due.clear();
            softs[i].switch.poll_transmit(now, &mut due);
            for (port, frame) in due.drain(..) {
                let cable = rec.cables.iter().find_map(|[a, b]| {
                    if (a.switch, a.port) == (i, port) {
                        Some(*b)
                    } else if (b.switch, b.port) == (i, port) {
                        Some(*a)
                    } else {
                        None
                    }
                });
                match cable {
                    Some(peer) => softs[peer.switch].switch.receive(now, peer.port, &frame),
                    None => out.push(FrameOut {
                        switch: i,
                        port,
                        frame: hex(&frame),
                        delay_us: (now - t0) / 1000,
                    }),
                }
            }
        }
        match softs.iter().filter_map(|s| s.switch.next_wakeup()).min() {
            Some(next) => now = next.max(now),
            None => break,
        }
    }
    // PacketIns were queued on the stream when the frame was handled; they
    // take a moment over gRPC. Waiting longer where BMv2 had some only
    // saves time: one that comes late is seen in the next step (or at the
    // end) and fails there.
    let wait = if step.packet_ins.is_empty() { 20 } else { 1000 };
    let packet_ins = packet_ins(softs, Duration::from_millis(wait), in_ids).await;
    out.sort();
    (out, packet_ins)
}

/// PacketIns the switches' streams hold, waiting up to `wait` for each.
async fn packet_ins(
    softs: &mut [Soft],
    wait: Duration,
    in_ids: &BTreeMap<String, u32>,
) -> Vec<Packet> {
    let mut packet_ins = Vec::new();
    for (i, s) in softs.iter_mut().enumerate() {
        while let Ok(Some(Ok(msg))) = tokio::time::timeout(wait, s.bench.stream_rx.next()).await {
            if let Some(stream_message_response::Update::Packet(p)) = msg.update {
                packet_ins.push(Packet::from_p4rt(i, &p.metadata, &p.payload, in_ids));
            }
        }
    }
    packet_ins.sort();
    packet_ins
}

/// Replays `rec`; every difference, described.
async fn replay(rec: &Recording) -> Vec<String> {
    let p4info = turbonet_p4info();
    let schema = Schema::new(&p4info).unwrap();
    let out_ids = packet_metadata(&p4info, "packet_out");
    let in_ids = packet_metadata(&p4info, "packet_in");
    let mut softs = Vec::new();
    for i in 0..rec.switches.len() {
        softs.push(soft(i, rec, &schema).await);
    }
    let mut diffs = Vec::new();
    for (n, step) in rec.steps.iter().enumerate() {
        let t0 = (n as u64 + 1) * STEP_NS;
        let (out, packet_ins) = run_step(rec, &mut softs, t0, step, &out_ids, &in_ids).await;
        let what = format!("{} step {n} ({})", rec.case, step.note);
        let key = |f: &FrameOut| (f.switch, f.port, f.frame.clone());
        let mut bmv2 = step.out.clone();
        bmv2.sort_by_key(key);
        let soft_keys: Vec<_> = out.iter().map(key).collect();
        let bmv2_keys: Vec<_> = bmv2.iter().map(key).collect();
        if soft_keys != bmv2_keys {
            diffs.push(format!(
                "{what}: frames out differ\n  BMv2: {bmv2_keys:?}\n  soft: {soft_keys:?}"
            ));
        } else {
            for (s, b) in out.iter().zip(&bmv2) {
                if s.delay_us > b.delay_us || b.delay_us - s.delay_us > SLACK_US {
                    diffs.push(format!(
                        "{what}: port {} after {} us on the soft switch, {} us on BMv2 \
                         (allowed: BMv2 up to {SLACK_US} us longer)",
                        s.port, s.delay_us, b.delay_us
                    ));
                }
            }
        }
        let mut expected = step.packet_ins.clone();
        expected.sort();
        if packet_ins != expected {
            diffs.push(format!(
                "{what}: PacketIns differ\n  BMv2: {expected:?}\n  soft: {packet_ins:?}"
            ));
        }
    }
    let late = packet_ins(&mut softs, Duration::from_millis(200), &in_ids).await;
    if !late.is_empty() {
        diffs.push(format!(
            "{}: PacketIns after the last step: {late:?}",
            rec.case
        ));
    }
    // Counters (the data plane flushes its counts when polled; drop it to
    // be sure every count reached the device).
    let mut counters = Vec::new();
    for (i, s) in softs.into_iter().enumerate() {
        drop(s.switch);
        for name in COUNTERS {
            let id = counter_id(&schema, name).unwrap();
            let size = schema.counters[&id].size;
            for index in 1..size {
                let c = s
                    .bench
                    .device
                    .with_state(|st| st.counter(id, index))
                    .unwrap();
                if c.packets != 0 || c.bytes != 0 {
                    counters.push(CounterCell {
                        switch: i,
                        counter: name.to_owned(),
                        index: index as u64,
                        packets: c.packets,
                        bytes: c.bytes,
                    });
                }
            }
        }
        s.bench.stop().await;
    }
    counters.sort();
    // Cell 0 is no virtual port (see the module's documentation).
    let expected: Vec<CounterCell> = rec
        .counters
        .iter()
        .filter(|c| c.index != 0)
        .cloned()
        .collect();
    if counters != expected {
        diffs.push(format!(
            "{}: counters differ\n  BMv2: {expected:?}\n  soft: {counters:?}",
            rec.case
        ));
    }
    diffs
}

#[tokio::test]
async fn the_soft_switch_replays_every_bmv2_recording() {
    let files = recordings();
    assert!(files.len() >= 13, "recordings in tests/bmv2: {files:?}");
    let mut diffs = Vec::new();
    for file in &files {
        let rec: Recording = serde_json::from_str(&std::fs::read_to_string(file).unwrap())
            .unwrap_or_else(|e| {
                panic!("{}: {e}", file.display());
            });
        assert_eq!(
            file.file_stem().unwrap().to_str().unwrap(),
            rec.case,
            "a recording's file is named for its case"
        );
        assert!(
            rec.steps
                .iter()
                .any(|s| !s.out.is_empty() || !s.packet_ins.is_empty()),
            "{}: nothing came out on BMv2: nothing to hold the soft switch to",
            rec.case
        );
        diffs.extend(replay(&rec).await);
    }
    assert!(
        diffs.is_empty(),
        "the soft switch differs from BMv2 in {} places:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
