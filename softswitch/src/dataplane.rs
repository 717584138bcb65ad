//! The data plane: the turbonet pipeline run natively on frames, sans-I/O
//! (see [`Switch`]).

mod frame;
mod hash;
mod tables;
mod tm;

use std::sync::Arc;

use turbonet_p4::p4::v1::{PacketIn, PacketMetadata, PacketOut};

use frame::{
    ARP_LEN, ETH_LEN, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_VLAN, Frame, IPV4_MIN, VLAN_LEN,
    be16, be32,
};
use hash::mix;
use tables::{Egress, Hop, Local, Route, Tables, Vport};
use tm::{LineRates, LossStreams, TrafficManager};
use turbonet_p4::Pipeline as Ids;
use turbonet_p4::pipeline::Target;
use turbonet_packetio::checksum::checksum_update;

use crate::device::CounterCells;
use crate::{Attach, Device, DeviceConfig, DeviceState};

/// Frames a single [`Switch::poll_transmit`] call moves at most, so a
/// driver stays responsive under a flood of cable crossings; the rest is
/// due at once and [`Switch::next_wakeup`] says so.
const POLL_BUDGET: usize = 1 << 16;

/// Counters of a [`Switch`]'s data plane, for a `show` table and
/// benchmarks. Drops are counted by reason; every frame that enters is
/// transmitted, sent to the controller, still queued, or dropped once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Frames received on interface ports.
    pub received: u64,
    /// Bytes of those frames.
    pub received_bytes: u64,
    /// Controller PacketOuts taken.
    pub packet_outs: u64,
    /// Frames that crossed a loopback cable (and entered the pipeline
    /// again at its other end).
    pub cable_crossings: u64,
    /// Frames handed out on interface ports.
    pub transmitted: u64,
    /// Bytes of those frames.
    pub transmitted_bytes: u64,
    /// ARP requests answered.
    pub arp_replies: u64,
    /// Frames sent to the controller as PacketIn (local addresses, TTL
    /// expiry, `to_cpu` routes).
    pub to_cpu: u64,
    /// Of those, IPv4 frames with TTL <= 1.
    pub ttl_expired: u64,
    /// Of those, PacketIns no controller took (none connected, or its
    /// stream was full).
    pub to_cpu_unheard: u64,
    /// Dropped: no usable pipeline (none set, or its P4Info lacks what the
    /// pipeline needs).
    pub dropped_no_pipeline: u64,
    /// Dropped: too short for its headers, or not IPv4 version 4.
    pub dropped_malformed: u64,
    /// Dropped: no `port_mapper` entry for (port, tag), or its action is
    /// `drop`.
    pub dropped_no_port_mapping: u64,
    /// Dropped: neither ARP nor IPv4.
    pub dropped_not_ip: u64,
    /// Dropped: ARP that gets no answer (not a request, not for an
    /// address of the virtual switch).
    pub dropped_arp: u64,
    /// Dropped: no route (`ipv4_lpm` miss or `drop`, empty group, a
    /// `local` entry without `to_cpu`).
    pub dropped_no_route: u64,
    /// Dropped: `queue_mapper` miss or `drop` (a cut link).
    pub dropped_link_cut: u64,
    /// Dropped: the link's loss draw.
    pub dropped_loss: u64,
    /// Dropped: a host link's inbound loss draw (the port mapper's
    /// threshold), counted in `vport_rx_lost`.
    pub dropped_inbound_loss: u64,
    /// Dropped: the egress queue, or the ingress backlog of an interface
    /// port's line rate, was over its limit (tail drop).
    pub dropped_queue_full: u64,
    /// Of those, frames received on an interface port whose line rate's
    /// backlog was full.
    pub line_rate_full: u64,
    /// Dropped: the egress port is neither an interface nor a cable.
    pub dropped_no_egress_port: u64,
    /// Frames in the traffic manager now (queued or delayed), or received
    /// and waiting for their port's line rate.
    pub queued: u64,
}

impl SwitchStats {
    /// Frames dropped, all reasons.
    pub fn dropped(&self) -> u64 {
        self.drops().iter().map(|(_, n)| n).sum()
    }

    /// Drops by reason, named as a `show` table prints them.
    pub fn drops(&self) -> [(&'static str, u64); 11] {
        [
            ("no pipeline", self.dropped_no_pipeline),
            ("malformed", self.dropped_malformed),
            ("no port mapping", self.dropped_no_port_mapping),
            ("not ARP or IPv4", self.dropped_not_ip),
            ("ARP unanswered", self.dropped_arp),
            ("no route", self.dropped_no_route),
            ("link cut", self.dropped_link_cut),
            ("loss", self.dropped_loss),
            ("inbound loss", self.dropped_inbound_loss),
            ("queue full", self.dropped_queue_full),
            ("no egress port", self.dropped_no_egress_port),
        ]
    }
}

/// What a physical port is, by port number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    Absent,
    Interface,
    Cable(u32),
}

/// The compiled program: resolved ids, tables, counter cells.
#[derive(Debug)]
struct Program {
    ids: Ids,
    tables: Tables,
    /// `vport_rx`, `vport_tx`, `vport_lost`, `vport_rx_lost` (see
    /// [`Counts`]); `None` for a counter the P4Info lacks.
    counters: [Option<Arc<CounterCells>>; COUNTERS],
}

const RX: usize = 0;
const TX: usize = 1;
const LOST: usize = 2;
const RX_LOST: usize = 3;
const COUNTERS: usize = 4;

/// Counter updates not yet added to the device's cells: a frame costs
/// plain adds here, and each touched cell one atomic add per
/// [`Switch::poll_transmit`] (atomic adds were a quarter of a hop's time).
#[derive(Debug, Default)]
struct Counts {
    /// (packets, bytes) per cell of `vport_rx`, `vport_tx`, `vport_lost`,
    /// `vport_rx_lost` (none for a counter the P4Info lacks).
    cells: [Vec<(u64, u64)>; COUNTERS],
    /// Cells with a count, (counter, index).
    dirty: Vec<(usize, usize)>,
}

impl Counts {
    fn add(&mut self, counter: usize, index: usize, bytes: u64) {
        let Some(cell) = self.cells[counter].get_mut(index) else {
            return;
        };
        if cell.0 == 0 {
            self.dirty.push((counter, index));
        }
        cell.0 += 1;
        cell.1 += bytes;
    }

    /// Adds the counts to the device's cells.
    fn flush(&mut self, to: &[Option<Arc<CounterCells>>; COUNTERS]) {
        for (counter, index) in self.dirty.drain(..) {
            let cell = std::mem::take(&mut self.cells[counter][index]);
            if let Some(device) = &to[counter] {
                device.add_many(index, cell.0, cell.1);
            }
        }
    }

    /// Sizes the local cells like the device's.
    fn resize(&mut self, to: &[Option<Arc<CounterCells>>; COUNTERS]) {
        // Flushed cells are zero: only a new size needs new cells.
        for (cells, device) in self.cells.iter_mut().zip(to) {
            let len = device.as_ref().map_or(0, |d| d.len());
            if cells.len() != len {
                *cells = vec![(0, 0); len];
            }
        }
    }
}

/// The switch's state that outlives a compile.
#[derive(Debug, Default)]
struct Runtime {
    /// By port number.
    ports: Vec<Port>,
    interfaces: Vec<(u32, String)>,
    /// The device config the ports and shaping come from.
    config: Option<Arc<DeviceConfig>>,
    /// Salt of the ECMP hash (from the config's seed).
    hash_seed: u64,
    tm: TrafficManager,
    /// Interface ports' line rates, pacing what they receive.
    lines: LineRates,
    losses: LossStreams,
    counts: Counts,
    stats: SwitchStats,
}

impl Runtime {
    fn port(&self, port: u32) -> Port {
        self.ports
            .get(port as usize)
            .copied()
            .unwrap_or(Port::Absent)
    }

    fn apply_config(&mut self, config: &Arc<DeviceConfig>) {
        if self
            .config
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, config) || **c == **config)
        {
            self.config = Some(config.clone());
            return;
        }
        let top = config.ports.iter().map(|p| p.port).max().unwrap_or(0);
        self.ports = vec![Port::Absent; top as usize + 1];
        self.interfaces.clear();
        for p in &config.ports {
            self.ports[p.port as usize] = match &p.attach {
                Attach::Interface(name) => {
                    self.interfaces.push((p.port, name.clone()));
                    Port::Interface
                }
                Attach::Cable(peer) => Port::Cable(*peer),
            };
        }
        self.interfaces.sort();
        self.hash_seed = mix(config.seed ^ 0x7475_7262_6f6e_6574);
        self.tm.configure(config);
        self.lines.configure(config);
        self.losses.reseed(config.seed);
        self.config = Some(config.clone());
    }
}

/// The soft switch's data plane: the turbonet pipeline (`p4/turbonet.p4`)
/// run natively on frames, sans-I/O. A driver hands it the frames its
/// interface ports receive and the controller's PacketOuts, with the time
/// (ns from any monotonic origin), and sends what
/// [`Switch::poll_transmit`] makes due; [`Switch::next_wakeup`] says when
/// to call it next.
///
/// What the switch does with a frame, in the program's order:
///
/// 0. (not in the program: the port's wire) an interface port with a line
///    rate in the device config lets a received frame in when its last bit
///    has arrived at that rate, in arrival order, and tail-drops what
///    would pass its backlog limit;
/// 1. parse Ethernet, an optional 802.1Q tag, ARP or IPv4 (options
///    honoured) and the TCP/UDP ports;
/// 2. `port_mapper` (ingress port, tagged or not, VLAN id: 0 when
///    untagged; a frame tagged with VLAN id 0 is tagged) gives the
///    virtual switch and virtual ingress port (a miss drops) and, for a
///    host link, its inbound delay and loss threshold; `vport_rx` counts
///    the frame; one 32-bit random draw below the inbound threshold loses
///    it (`vport_rx_lost`); the tag comes off;
/// 3. ARP requests for an address in `arp_responder` are answered in place
///    and sent back out of the virtual ingress port; IPv4 to an address in
///    `local`, or with TTL <= 1, goes to the controller as a PacketIn
///    (metadata: virtual switch and ingress port); other IPv4 takes the
///    longest `ipv4_lpm` prefix of its virtual switch: a next hop (MACs
///    rewritten, TTL decremented, checksum updated per RFC 1624), an ECMP
///    group member chosen by a hash of the 5-tuple, the CPU or a drop;
/// 4. `queue_mapper` maps the virtual egress port to a physical port, a
///    tag (0: untagged), a queue, the link's delay and loss threshold, or
///    drops (a cut link); one 32-bit random draw below the threshold loses
///    the frame (`vport_lost`), otherwise `vport_tx` counts it;
/// 5. the traffic manager queues it per (port, queue), shaped to the device
///    config's rate with a tail-drop limit, and holds it for the delay:
///    the egress link's plus the inbound delay of step 2 (a PacketOut has
///    none).
///
/// Frames due on an interface port leave through `poll_transmit`; frames
/// due on a loopback-cable port enter the pipeline again at the cable's
/// other port at their due time (tag and all), so virtual links between
/// virtual switches of this switch cost no I/O.
///
/// Where the soft switch departs from what BMv2 would do with the P4
/// source, on purpose:
///
/// - only ARP *requests* are answered: the program would answer any ARP
///   packet whose target it owns, so two virtual switches could answer
///   each other's replies forever over a zero-delay cable;
/// - fragments hash with L4 ports 0 (as Linux's L4 hash does), so the
///   fragments of a datagram take one path; the ECMP hash is salted with
///   the config's seed and the virtual switch, like the `netns` target's
///   per-switch `fib_multipath_hash_seed` (an unsalted hash shared by
///   every tier polarizes);
/// - the checksum is updated incrementally, so IPv4 options stay covered
///   (the program recomputes it over the first 20 bytes only);
/// - group members are picked in proportion to their weights (BMv2's
///   selector ignores weights);
/// - loss draws come from one ChaCha8 stream per virtual egress port and
///   one per virtual ingress port, and a threshold of 0 draws nothing;
/// - a `local` hit on `NoAction` drops (the program returns without an
///   egress port), a port_mapper miss is not counted in `vport_rx` cell 0,
///   and `vport_tx` counts the bytes as they leave (tag included);
/// - counts reach the device's counters at the next `poll_transmit`;
/// - the delayed queue is the traffic manager's timer, not recirculation:
///   no delay header (EtherType 0x88b5) is written or read, and a frame
///   that carries one in from a port is neither ARP nor IPv4 and dropped,
///   as the program drops it (it parses that header only on a
///   recirculated packet); delays are nanoseconds ([`Target::Soft`]), or
///   microseconds when the device config is p4c's BMv2 JSON (the switch
///   then stands in for BMv2, [`crate::stands_in_for_bmv2`]).
///
/// Standing in for BMv2, the switch does as BMv2 does where a recording of
/// BMv2 can tell (`tests/bmv2_replay.rs`): a group's member is BMv2's
/// (CRC-16 of the 5-tuple modulo the group's size, weights ignored,
/// fragments hashed with their ports; BMv2 orders members by the handle it
/// gave them, which is the group's order when members are created in that
/// order), and `vport_tx` and `vport_lost` count the bytes a frame had
/// when it entered.
pub struct Switch {
    device: Arc<Device>,
    /// The device generation compiled; `None` before the first compile.
    compiled: Option<u64>,
    /// `None`: every frame is dropped (`down` says why).
    program: Option<Program>,
    /// Why there is no program, as last logged.
    down: Option<String>,
    /// The ports a device config without ports gets (given when the
    /// switch was started, as BMv2's `-i PORT@IFACE`).
    base: Arc<DeviceConfig>,
    rt: Runtime,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("device_id", &self.device.device_id())
            .field("generation", &self.compiled)
            .field("down", &self.down)
            .field("interfaces", &self.rt.interfaces)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.flush_counts();
    }
}

impl Switch {
    /// A data plane for `device` (a [`Device`] or an `Arc` of one),
    /// compiled from its current state. Controller PacketOuts are not read
    /// here: the driver takes [`Device::take_packet_out_receiver`] and
    /// feeds [`Switch::packet_out`].
    pub fn new(device: impl Into<Arc<Device>>) -> Self {
        Self::with_ports(device, DeviceConfig::default())
    }

    /// A data plane whose ports are `base`'s while the committed device
    /// config names none (a pipeline set with an empty device config).
    pub fn with_ports(device: impl Into<Arc<Device>>, base: DeviceConfig) -> Self {
        let mut switch = Self {
            device: device.into(),
            compiled: None,
            program: None,
            down: None,
            base: Arc::new(base),
            rt: Runtime::default(),
        };
        switch.refresh();
        switch
    }

    /// Interface ports of the committed device config: (port, interface
    /// name), by port.
    pub fn interfaces(&self) -> Vec<(u32, String)> {
        self.rt.interfaces.clone()
    }

    /// Generation of the device state the switch last compiled (see
    /// [`Device::generation`]); it changes when ports or tables change.
    pub fn generation(&self) -> u64 {
        self.compiled.unwrap_or(0)
    }

    /// Recompiles if the device changed since the last compile (one atomic
    /// load otherwise). [`Switch::receive`], [`Switch::packet_out`] and
    /// [`Switch::poll_transmit`] call it.
    pub fn refresh(&mut self) {
        if self.compiled == Some(self.device.generation()) {
            return;
        }
        let device = self.device.clone();
        // Read under the state lock, the generation is that of the state
        // compiled (changes bump it under the write lock).
        device.with_state(|state| self.compile(device.generation(), state));
    }

    fn compile(&mut self, generation: u64, state: &DeviceState) {
        self.flush_counts();
        self.compiled = Some(generation);
        let Some(pipeline) = state.pipeline() else {
            self.program = None;
            self.rt.apply_config(&Arc::new(DeviceConfig::default()));
            self.down = Some("no forwarding pipeline is set".into());
            return;
        };
        let config = if pipeline.device_config.ports.is_empty() {
            &self.base
        } else {
            &pipeline.device_config
        };
        self.rt.apply_config(config);
        let ids = match &pipeline.config.p4info {
            Some(p4info) => {
                // Programmed as BMv2 is, it keeps BMv2's clock.
                let target = if crate::config::stands_in_for_bmv2(&pipeline.config.p4_device_config)
                {
                    Target::Bmv2
                } else {
                    Target::Soft
                };
                Ids::resolve(&pipeline.schema, p4info, target).map_err(|e| e.to_string())
            }
            // The service refuses such configs; a Device is only set by it.
            None => Err("the pipeline has no P4Info".to_owned()),
        };
        let program = ids.and_then(|ids| {
            let cells = |id: u32| {
                state
                    .counters
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| format!("counter id {id} has no cells"))
            };
            Ok(Program {
                counters: [
                    Some(cells(ids.vport_rx)?),
                    Some(cells(ids.vport_tx)?),
                    Some(cells(ids.vport_lost)?),
                    ids.vport_rx_lost.map(cells).transpose()?,
                ],
                tables: tables::compile(&ids, state, &mut self.rt.tm, &mut self.rt.losses),
                ids,
            })
        });
        match program {
            Ok(program) => {
                self.rt.counts.resize(&program.counters);
                if self.down.take().is_some() {
                    tracing::debug!(generation, "soft switch data plane compiled");
                }
                self.program = Some(program);
            }
            Err(why) => {
                if self.down.as_deref() != Some(why.as_str()) {
                    tracing::warn!(
                        "the soft switch's data plane drops every frame: the committed P4Info \
                         is not the turbonet pipeline's ({why}); the control plane keeps working"
                    );
                }
                self.program = None;
                self.down = Some(why);
            }
        }
    }

    /// A frame received on interface port `port` at `now`. On a port with
    /// a line rate it enters the pipeline when its last bit has arrived at
    /// that rate (from [`Switch::poll_transmit`], in arrival order), or is
    /// tail-dropped when the port's backlog is full; otherwise at once.
    pub fn receive(&mut self, now: u64, port: u32, frame: &[u8]) {
        self.refresh();
        self.rt.stats.received += 1;
        self.rt.stats.received_bytes += frame.len() as u64;
        match self.rt.lines.receive(now, port, Frame::from_wire(frame)) {
            Ok(Some(frame)) => ingress(
                self.program.as_ref(),
                &mut self.rt,
                &self.device,
                now,
                port,
                frame,
            ),
            Ok(None) => {}
            Err(tm::QueueFull) => {
                self.rt.stats.dropped_queue_full += 1;
                self.rt.stats.line_rate_full += 1;
            }
        }
    }

    /// A controller PacketOut (metadata vswitch and vport from the P4Info's
    /// `packet_out` header): out of that virtual port through the queue
    /// mapper, with its delay and shaping. As in the program, a
    /// controller's packet is neither counted in `vport_tx` nor subject
    /// to the link's loss, and a tag it carries is removed first.
    pub fn packet_out(&mut self, now: u64, packet: PacketOut) {
        self.refresh();
        self.rt.stats.packet_outs += 1;
        let Some(prog) = self.program.as_ref() else {
            self.rt.stats.dropped_no_pipeline += 1;
            return;
        };
        let meta = |id: u32| {
            packet
                .metadata
                .iter()
                .find(|m| m.metadata_id == id)
                .map(|m| m.value.iter().fold(0u64, |v, b| v << 8 | u64::from(*b)))
        };
        let Some(vport) = meta(prog.ids.packet_out[1]) else {
            self.rt.stats.dropped_malformed += 1;
            return;
        };
        let mut frame = Frame::from_vec(packet.payload);
        if frame.len() < ETH_LEN {
            self.rt.stats.dropped_malformed += 1;
            return;
        }
        if frame.ether_type() == ETHERTYPE_VLAN {
            if frame.len() < ETH_LEN + VLAN_LEN {
                self.rt.stats.dropped_malformed += 1;
                return;
            }
            frame.strip_vlan();
        }
        // A controller's packet did not come in over a host link: no
        // inbound delay.
        egress(prog, &mut self.rt, now, vport as u16, frame, None, 0);
    }

    /// Frames due on interface ports at or before `now`, appended to `out`
    /// as (port, frame), in due order. Frames due on cable ports enter the
    /// pipeline again at the cable's other port (with their tag), as if
    /// received there at their due time; frames an interface port's line
    /// rate held enter the pipeline at their admission time, in time order
    /// with the rest. At most a fixed budget of frames is moved per call;
    /// [`Switch::next_wakeup`] is then `<= now`.
    ///
    /// The counts (`vport_rx`, `vport_tx`, `vport_lost`, `vport_rx_lost`)
    /// of the frames handled since the last call reach the device's
    /// counters here (one atomic add per touched cell, not per frame).
    pub fn poll_transmit(&mut self, now: u64, out: &mut Vec<(u32, Vec<u8>)>) {
        self.refresh();
        for _ in 0..POLL_BUDGET {
            // The earlier of the next admission and the next departure, so
            // what a line rate held meets the pipeline's state of its time.
            let admission = self.rt.lines.next_due().filter(|&at| at <= now);
            let departure = self.rt.tm.next_due().filter(|&due| due <= now);
            if let Some(at) = admission.filter(|&at| departure.is_none_or(|due| at < due)) {
                if let Some((at, port, frame)) = self.rt.lines.pop_due(at) {
                    ingress(
                        self.program.as_ref(),
                        &mut self.rt,
                        &self.device,
                        at,
                        port,
                        frame,
                    );
                }
                continue;
            }
            let Some((due, port, frame)) = self.rt.tm.pop_due(now) else {
                break;
            };
            match self.rt.port(port) {
                Port::Interface => {
                    self.rt.stats.transmitted += 1;
                    self.rt.stats.transmitted_bytes += frame.len() as u64;
                    out.push((port, frame.into_vec()));
                }
                Port::Cable(peer) => {
                    self.rt.stats.cable_crossings += 1;
                    ingress(
                        self.program.as_ref(),
                        &mut self.rt,
                        &self.device,
                        due,
                        peer,
                        frame,
                    );
                }
                // The port left the device config while the frame waited.
                Port::Absent => self.rt.stats.dropped_no_egress_port += 1,
            }
        }
        self.flush_counts();
    }

    /// Adds the counts of the frames since the last flush to the device's
    /// counters.
    fn flush_counts(&mut self) {
        if let Some(prog) = &self.program {
            self.rt.counts.flush(&prog.counters);
        }
    }

    /// When the next frame is due (to leave, or to enter the pipeline at
    /// its port's line rate), if any.
    pub fn next_wakeup(&self) -> Option<u64> {
        match (self.rt.tm.next_due(), self.rt.lines.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why the data plane drops every frame, if it does (no pipeline, or a
    /// P4Info that lacks part of the turbonet pipeline).
    pub fn down(&self) -> Option<&str> {
        self.down.as_deref()
    }

    /// Counters of this data plane.
    pub fn stats(&self) -> SwitchStats {
        SwitchStats {
            queued: (self.rt.tm.len() + self.rt.lines.len()) as u64,
            ..self.rt.stats
        }
    }
}

/// The shortest big-endian bytes of `v` (P4Runtime's canonical form,
/// section 8.3).
fn canonical(v: u16) -> Vec<u8> {
    match v.to_be_bytes() {
        [0, b] => vec![b],
        two => two.to_vec(),
    }
}

/// Ingress: parse, port mapper, ARP or IPv4, then egress.
fn ingress(
    prog: Option<&Program>,
    rt: &mut Runtime,
    device: &Device,
    now: u64,
    port: u32,
    mut frame: Frame,
) {
    let Some(prog) = prog else {
        rt.stats.dropped_no_pipeline += 1;
        return;
    };
    if frame.len() < ETH_LEN {
        rt.stats.dropped_malformed += 1;
        return;
    }
    let tagged = frame.ether_type() == ETHERTYPE_VLAN;
    let vid = if tagged {
        if frame.len() < ETH_LEN + VLAN_LEN {
            rt.stats.dropped_malformed += 1;
            return;
        }
        Some(be16(frame.bytes(), ETH_LEN) & 0x0fff)
    } else {
        None
    };
    let Some(Vport {
        vswitch,
        vport,
        delay_ns,
        loss_threshold,
        loss,
    }) = prog.tables.port_mapper(port, vid)
    else {
        rt.stats.dropped_no_port_mapping += 1;
        return;
    };
    let len = frame.len() as u64;
    rt.counts.add(RX, usize::from(vport), len);
    // A host link's inbound loss, drawn as the frame enters (its other
    // end is outside the pipeline, so no egress draws for it).
    if loss_threshold != 0 && rt.losses.draw(loss) < loss_threshold {
        rt.counts
            .add(RX_LOST, usize::from(vport), frame.len() as u64);
        rt.stats.dropped_inbound_loss += 1;
        return;
    }
    if tagged {
        frame.strip_vlan();
    }
    let from = Ingress {
        vswitch,
        vport,
        delay_ns,
        len,
    };
    match frame.ether_type() {
        ETHERTYPE_ARP => arp(prog, rt, now, from, frame),
        ETHERTYPE_IPV4 => ipv4(prog, rt, device, now, from, frame),
        _ => rt.stats.dropped_not_ip += 1,
    }
}

/// Where a frame entered: its virtual switch and virtual ingress port, and
/// the inbound delay of that port's link (a host link's; 0 otherwise).
#[derive(Debug, Clone, Copy)]
struct Ingress {
    vswitch: u16,
    vport: u16,
    delay_ns: u64,
    /// The frame's length as it entered (tag included): what BMv2's
    /// counters count.
    len: u64,
}

/// `arp_responder`: a request for one of the virtual switch's addresses
/// is turned into its reply in place (RFC 826) and sent back out.
fn arp(prog: &Program, rt: &mut Runtime, now: u64, from: Ingress, mut frame: Frame) {
    let b = frame.bytes();
    if b.len() < ETH_LEN + ARP_LEN {
        rt.stats.dropped_malformed += 1;
        return;
    }
    let a = &b[ETH_LEN..ETH_LEN + ARP_LEN];
    // Ethernet/IPv4 requests only (htype 1, ptype IPv4, 6- and 4-byte
    // addresses, oper 1).
    if a[..8] != [0, 1, 8, 0, 6, 4, 0, 1] {
        rt.stats.dropped_arp += 1;
        return;
    }
    let Some(mac) = prog.tables.arp_responder(from.vswitch, be32(a, 24)) else {
        rt.stats.dropped_arp += 1;
        return;
    };
    let b = frame.bytes_mut();
    let (eth, arp) = b.split_at_mut(ETH_LEN);
    let mut sha = [0u8; 6];
    sha.copy_from_slice(&arp[8..14]);
    let mut spa = [0u8; 4];
    spa.copy_from_slice(&arp[14..18]);
    let mut asked = [0u8; 4];
    asked.copy_from_slice(&arp[24..28]);
    arp[7] = 2; // oper: reply
    arp[8..14].copy_from_slice(&mac);
    arp[14..18].copy_from_slice(&asked);
    arp[18..24].copy_from_slice(&sha);
    arp[24..28].copy_from_slice(&spa);
    eth.copy_within(6..12, 0);
    eth[6..12].copy_from_slice(&mac);
    rt.stats.arp_replies += 1;
    // Back over the link it came in on: both directions' delay.
    egress(
        prog,
        rt,
        now,
        from.vport,
        frame,
        Some(from.len),
        from.delay_ns,
    );
}

/// IPv4: `local`, the TTL check, then `ipv4_lpm`.
fn ipv4(
    prog: &Program,
    rt: &mut Runtime,
    device: &Device,
    now: u64,
    from: Ingress,
    mut frame: Frame,
) {
    let Ingress {
        vswitch,
        vport: vport_in,
        ..
    } = from;
    let b = frame.bytes();
    if b.len() < ETH_LEN + IPV4_MIN || b[ETH_LEN] >> 4 != 4 {
        rt.stats.dropped_malformed += 1;
        return;
    }
    let ihl = usize::from(b[ETH_LEN] & 0x0f) * 4;
    if ihl < IPV4_MIN || b.len() < ETH_LEN + ihl {
        rt.stats.dropped_malformed += 1;
        return;
    }
    let ip = &b[ETH_LEN..];
    let dst = be32(ip, 16);
    match prog.tables.local(vswitch, dst) {
        Local::ToCpu => return punt(prog, rt, device, vswitch, vport_in, frame),
        Local::Drop => {
            rt.stats.dropped_no_route += 1;
            return;
        }
        Local::Continue => {}
    }
    if ip[8] <= 1 {
        // The control plane answers (ICMP time exceeded).
        rt.stats.ttl_expired += 1;
        return punt(prog, rt, device, vswitch, vport_in, frame);
    }
    let hop = match prog.tables.ipv4_lpm(vswitch, dst) {
        Route::Hop(hop) => hop,
        Route::Group(g) if prog.ids.target == Target::Bmv2 => {
            prog.tables.groups[g as usize].pick_nth(bmv2_flow_hash(ip, ihl))
        }
        Route::Group(g) => {
            let seed = rt.hash_seed ^ u64::from(vswitch).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            prog.tables.groups[g as usize].pick(flow_hash(seed, ip, ihl))
        }
    };
    match hop {
        Hop::Forward { vport, dmac, smac } => {
            let b = frame.bytes_mut();
            b[0..6].copy_from_slice(&dmac);
            b[6..12].copy_from_slice(&smac);
            let ip = &mut b[ETH_LEN..];
            let old = be16(ip, 8);
            ip[8] -= 1;
            let checksum = checksum_update(be16(ip, 10), old, be16(ip, 8));
            ip[10..12].copy_from_slice(&checksum.to_be_bytes());
            egress(prog, rt, now, vport, frame, Some(from.len), from.delay_ns);
        }
        Hop::ToCpu => punt(prog, rt, device, vswitch, vport_in, frame),
        Hop::Drop => rt.stats.dropped_no_route += 1,
    }
}

/// The ECMP hash of an IPv4 header `ip` (of `ihl` bytes): source,
/// destination, protocol and, for TCP and UDP first-and-only fragments,
/// the ports.
fn flow_hash(seed: u64, ip: &[u8], ihl: usize) -> u64 {
    let proto = ip[9];
    let fragment = be16(ip, 6) & 0x3fff != 0; // MF or an offset
    let ports = if matches!(proto, 6 | 17) && !fragment && ip.len() >= ihl + 4 {
        be32(ip, ihl)
    } else {
        0
    };
    let addrs = u64::from(be32(ip, 12)) << 32 | u64::from(be32(ip, 16));
    mix(mix(addrs ^ seed) ^ (u64::from(proto) << 32 | u64::from(ports)))
}

/// BMv2's selector hash of an IPv4 header `ip` (of `ihl` bytes), as
/// `ecmp_selector` declares it: CRC-16/ARC (BMv2's `crc16`: polynomial
/// 0x8005 reflected, initial value 0, no final xor) over source,
/// destination, protocol and the TCP/UDP ports (zero for other protocols;
/// fragments included, as BMv2's parser reads them).
fn bmv2_flow_hash(ip: &[u8], ihl: usize) -> u16 {
    let ports = if matches!(ip[9], 6 | 17) && ip.len() >= ihl + 4 {
        &ip[ihl..ihl + 4]
    } else {
        &[0; 4]
    };
    let mut crc = 0u16;
    for &b in ip[12..20].iter().chain(&ip[9..10]).chain(ports) {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                crc >> 1 ^ 0xa001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// To the controller: a PacketIn of the (untagged) frame with the virtual
/// switch and virtual ingress port.
fn punt(prog: &Program, rt: &mut Runtime, device: &Device, vswitch: u16, vport: u16, frame: Frame) {
    rt.stats.to_cpu += 1;
    let [vswitch_id, vport_id] = prog.ids.packet_in;
    let packet = PacketIn {
        payload: frame.into_vec(),
        metadata: vec![
            PacketMetadata {
                metadata_id: vswitch_id,
                value: canonical(vswitch),
            },
            PacketMetadata {
                metadata_id: vport_id,
                value: canonical(vport),
            },
        ],
    };
    if device.packet_in(packet) == 0 {
        rt.stats.to_cpu_unheard += 1;
    }
}

/// `queue_mapper`, then (for frames of the pipeline, which came in
/// `ingress_len` bytes long) the loss draw and `vport_tx`, then the traffic manager, which holds the frame
/// for the link's delay plus `in_delay_ns` (the inbound delay of the host
/// link it came in on, as `set_egress` adds `meta.in_delay_ns`).
fn egress(
    prog: &Program,
    rt: &mut Runtime,
    now: u64,
    vport: u16,
    mut frame: Frame,
    ingress_len: Option<u64>,
    in_delay_ns: u64,
) {
    let Egress::Set {
        port,
        tag,
        queue,
        delay_ns,
        loss_threshold,
        loss,
    } = prog.tables.queue_mapper(vport)
    else {
        rt.stats.dropped_link_cut += 1;
        return;
    };
    if tag != 0 {
        frame.push_vlan(tag);
    }
    if let Some(ingress_len) = ingress_len {
        // BMv2 counts a frame's length as it entered; the soft switch's
        // own pipeline counts it as it leaves.
        let bytes = if prog.ids.target == Target::Bmv2 {
            ingress_len
        } else {
            frame.len() as u64
        };
        if loss_threshold != 0 && rt.losses.draw(loss) < loss_threshold {
            rt.counts.add(LOST, usize::from(vport), bytes);
            rt.stats.dropped_loss += 1;
            return;
        }
        rt.counts.add(TX, usize::from(vport), bytes);
    }
    if rt.port(port) == Port::Absent {
        rt.stats.dropped_no_egress_port += 1;
        return;
    }
    let delay_ns = delay_ns.saturating_add(in_delay_ns);
    if rt.tm.enqueue(now, queue, delay_ns, frame).is_err() {
        rt.stats.dropped_queue_full += 1;
    }
}
