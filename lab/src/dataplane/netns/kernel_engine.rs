//! The kernel engine on a lab's links: turbonet's BPF program at the
//! engine-side ports of every link it carries, `fq` holding each frame it
//! passes until its due time (see `turbonet_kernel_engine`).
//!
//! The links are spliced through the engine namespace as the userspace
//! engine's are (`e<id>a` faces `ends[0]`, `e<id>b` `ends[1]`); direction
//! `2j` of the program is the `j`-th carried link's `ends[0] -> ends[1]`,
//! arriving at `e<id>a` and leaving by `e<id>b`, whose root qdisc is `fq`,
//! and `2j + 1` the reverse. The daemon loads the program when it starts,
//! fills its maps (parameters, seeds) and attaches it, replacing a
//! predecessor's; the filters stay attached until the lab goes down.

use std::collections::HashMap;

use turbonet_api::counters::{LinkCounters, Shortfall};
use turbonet_injectors::{Counters, Impairment, direction_seed};
use turbonet_kernel_engine::{Mode, Params, Program, State};
use turbonet_topo::{Lab, Link, LinkId};

use super::engine;
use crate::carrier::Carrier;
use crate::error::{Context, Error, Result};
use crate::names;
use turbonet_host::namespaces;

/// Interfaces' counters by ifindex: (sent, received) frames and bytes.
pub type PortStats = HashMap<u32, ((u64, u64), (u64, u64))>;

/// The program on the lab's kernel-engine links.
#[derive(Debug)]
pub struct KernelEngine {
    program: Program,
    /// The carried links, in direction order: each link's id and its
    /// engine-side ports' ifindexes (`[e<id>a, e<id>b]`).
    links: Vec<(LinkId, [u32; 2])>,
}

impl KernelEngine {
    /// Starts the kernel engine on the links `carriers` gives it, if any:
    /// `fq` on their engine-side ports, the program loaded with their
    /// parameters and seeds, and attached.
    pub fn start(lab: &Lab, carriers: &[Carrier]) -> Result<Option<KernelEngine>> {
        let spliced = engine::spliced(carriers);
        let carried: Vec<(&Link, usize)> = lab
            .fabric
            .links
            .iter()
            .zip(carriers)
            .filter(|(_, c)| **c == Carrier::Bpf)
            .map(|(l, _)| {
                (
                    l,
                    spliced[l.id.0 as usize].expect("a kernel-engine link is spliced"),
                )
            })
            .collect();
        if carried.is_empty() {
            return Ok(None);
        }
        let ns_name = names::engine_namespace(&lab.name);
        let ns = namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?;
        let directions = u32::try_from(2 * carried.len())
            .map_err(|_| Error::Invalid("too many kernel-engine links".to_owned()))?;
        let mut program = Program::load(directions, Mode::Link).map_err(kernel_engine_error)?;
        let mut links = Vec::with_capacity(carried.len());
        for (j, &(link, k)) in carried.iter().enumerate() {
            let ports = [0, 1].map(|side| engine::port(link.id.0, k, side));
            let imp = Impairment::from_params(&link.params);
            for (side, (_, ifindex)) in ports.iter().enumerate() {
                let dir = 2 * j as u32 + side as u32;
                let (_, egress) = &ports[1 - side];
                let params = Params::new(&imp, *egress)
                    .map_err(|e| Error::Invalid(format!("link {}: {e}", link.name)))?;
                let seed = direction_seed(lab.seed, &link.name, side as u8);
                program
                    .start_direction(dir, params, seed)
                    .and_then(|()| program.set_port(*ifindex, dir))
                    .map_err(kernel_engine_error)?;
            }
            links.push((link.id, ports.map(|(_, i)| i)));
        }
        let held: Vec<u32> = links.iter().flat_map(|(_, ports)| *ports).collect();
        turbonet_host::kernel::fq::apply(&ns, &held)
            .with_context(|| format!("fq on the engine-side ports in {ns_name}"))?;
        // Attached last, with every map filled: a frame never meets a
        // direction without its parameters.
        namespaces::in_namespace(&ns, || {
            for &(link, k) in &carried {
                for side in 0..2 {
                    let (name, _) = engine::port(link.id.0, k, side);
                    program
                        .attach(&name)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                }
            }
            Ok(())
        })
        .with_context(|| format!("attaching the kernel engine in {ns_name}"))?;
        Ok(Some(KernelEngine { program, links }))
    }

    /// How many links it carries.
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// Gives `link` new parameters (`turbonet link set`): frames already
    /// held keep their due times; the random streams and the queue carry
    /// on. Refused, with the reason, when the program cannot honour them
    /// (the link stays as it was: a link cannot change engines while the
    /// lab runs).
    pub fn set(&mut self, link: &Link, imp: &Impairment) -> Result<()> {
        // `link set` is rare: a search, not an index kept beside `links`.
        let j = self
            .links
            .iter()
            .position(|(id, _)| *id == link.id)
            .ok_or_else(|| {
                Error::Failed(format!("link {} is not on the kernel engine", link.name))
            })?;
        let ports = self.links[j].1;
        for side in 0..2 {
            let params = Params::new(imp, ports[1 - side]).map_err(|e| {
                Error::Invalid(format!(
                    "link {} is on the kernel engine, which cannot take this: {e}; \
                     bring the lab up with engine = \"userspace\" to change it so",
                    link.name
                ))
            })?;
            self.program
                .set_params(2 * j as u32 + side as u32, params)
                .map_err(kernel_engine_error)?;
        }
        Ok(())
    }

    /// Every carried link's counters: the program's decisions, and the
    /// frames that left by each direction's far port (`sent`: the engine
    /// namespace's port counters, by ifindex: (tx, rx) frames and bytes).
    pub fn counters(&self, lab: &Lab, sent: &PortStats) -> HashMap<LinkId, LinkCounters> {
        let mut out = HashMap::new();
        for (j, (id, ports)) in self.links.iter().enumerate() {
            let mut c = LinkCounters {
                link: lab.fabric.link(*id).name.clone(),
                ..LinkCounters::default()
            };
            for side in 0..2 {
                // A direction that cannot be read is counted next time.
                let Ok(state) = self.program.state(2 * j as u32 + side as u32) else {
                    continue;
                };
                let left = sent.get(&ports[1 - side]).map_or((0, 0), |(tx, _)| *tx);
                c.directions[side] = counters(&state, left);
                c.shortfall[side] = Shortfall {
                    tx_errors: state.transmit_errors,
                    ..Shortfall::default()
                };
            }
            out.insert(*id, c);
        }
        out
    }
}

/// One direction's counters from the program's state and the frames its
/// far port sent.
fn counters(s: &State, (tx_packets, tx_bytes): (u64, u64)) -> Counters {
    let (queue_packets, queue_bytes) = s.queue();
    Counters {
        rx_packets: s.rx_packets,
        rx_bytes: s.rx_bytes,
        tx_packets,
        tx_bytes,
        dropped_loss: s.dropped_loss,
        dropped_queue: s.dropped_queue,
        corrupted: s.corrupted,
        duplicated: s.duplicated,
        ecn_marked: s.ecn_marked,
        queue_packets,
        queue_bytes,
    }
}

fn kernel_engine_error(e: turbonet_kernel_engine::Error) -> Error {
    Error::Failed(format!("kernel engine: {e}"))
}
