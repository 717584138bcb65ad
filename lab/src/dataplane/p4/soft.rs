//! The `soft` target, planned: every switch of the fabric runs inside one
//! turbonet soft switch (a P4Runtime device running `p4/turbonet.p4`), and
//! every host is a namespace cabled to a port of its own.
//!
//! The soft switch is a physical switch like any other to the mapper
//! ([`turbonet_topo::mapper`]): virtual links between switches ride its
//! loopback cables (which it emulates internally), hosts get untagged host
//! ports (a veth whose switch end, `p<port>`, lives in the lab's hidden
//! `tn-<lab>.soft` namespace). Delay and loss are in the pipeline's queue
//! mapper, and for a host link's host-to-switch direction in its port
//! mapper; rates shape the ports' egress queues and, on a host port, the
//! port's line rate paces what the host sends; the soft switch's device
//! config carries both.

use turbonet_softswitch::{Attach, DeviceConfig, PortConfig, QueueConfig};
use turbonet_topo::mapper::{self, MapConfig, Mapping, PhysicalSwitch, PortKind};
use turbonet_topo::units::{QueueLimit, Rate};
use turbonet_topo::{Lab, LinkParams, Loss, RoutingMode};

/// The soft switch's name in the mapping.
pub const SWITCH: &str = "soft";

/// Its P4Runtime device id.
pub const DEVICE_ID: u64 = 1;

/// Election id of `up`'s session; the lab daemon, which takes over once
/// the fabric is programmed, uses the next one.
pub const UP_ELECTION_ID: u128 = 1;

/// Election id of the lab daemon's session.
pub const DAEMON_ELECTION_ID: u128 = 2;

/// Usable ports: the pipeline's ports are 9-bit, port 255 is the CPU's,
/// and the mapper numbers from 1; 254 keeps every port below it.
const PORTS: u32 = 254;

/// Port speed the mapper checks rates against. A software switch has no
/// line rate; this only bounds the sum of the rates sharing a port.
const SPEED: Rate = Rate::from_gbit(1000);

/// Egress queues per port: the pipeline's queue is 3 bits (v1model's
/// eight priority queues).
const QUEUES: u32 = 8;

/// MTU assumed when a packet-counted queue limit becomes bytes.
const QUEUE_MTU: u64 = 1514;

/// The soft switch's interface for physical port `port`.
pub fn port_ifname(port: u32) -> String {
    format!("p{port}")
}

/// Its ifindex in the soft-switch namespace (`lo` is 1).
pub fn port_ifindex(port: u32) -> u32 {
    port + 1
}

/// Why the soft target cannot run this lab, if it cannot: the impairments
/// its pipeline has no stage for, and routing it does not carry yet.
pub fn unsupported(lab: &Lab) -> Option<String> {
    if lab.routing.mode == RoutingMode::Bgp
        && let Some(node) = lab
            .fabric
            .switches()
            .find(|n| lab.routing.agent_of(n.id) != turbonet_topo::Agent::Builtin)
    {
        return Some(format!(
            "switch {} runs agent \"{}\": on target \"soft\" only the built-in agent \
                 writes its routes into the pipeline; use agent = \"builtin\" there",
            node.name,
            lab.routing.agent_of(node.id)
        ));
    }
    if let Some(ext) = lab.fabric.externals.first() {
        return Some(format!(
            "external interface {} cannot attach to target \"soft\" (its switches have no \
             namespaces); remove [[external]] or use target \"netns\"",
            ext.interface
        ));
    }
    lab.fabric.links.iter().find_map(|link| {
        pipeline_lacks(&link.params).map(|what| {
            format!(
                "link {}: the turbonet pipeline has no {what}; target \"soft\" applies rate, \
                 delay, loss (independent), queue and mtu",
                link.name
            )
        })
    })
}

/// The first parameter of `params` the pipeline cannot apply.
pub fn pipeline_lacks(params: &LinkParams) -> Option<&'static str> {
    if params.jitter.is_some() || params.reorder == Some(true) {
        Some("jitter")
    } else if matches!(params.loss, Some(Loss::GilbertElliott { .. })) {
        Some("bursty (Gilbert-Elliott) loss")
    } else if params.corrupt.is_some() {
        Some("corruption")
    } else if params.duplicate.is_some() {
        Some("duplication")
    } else if params.ecn.is_some() {
        Some("ECN marking")
    } else {
        None
    }
}

/// The soft switch as the mapper sees it.
pub fn map_config() -> MapConfig {
    MapConfig {
        switches: vec![PhysicalSwitch::new(SWITCH, PORTS, SPEED)],
        queues: QUEUES,
        default_rate: mapper::DEFAULT_RATE,
        untagged_hosts: true,
    }
}

/// Maps the lab onto one soft switch, or says what is short.
pub fn map(lab: &Lab) -> Result<Mapping, String> {
    mapper::map(&lab.fabric, &map_config()).map_err(|e| {
        format!(
            "the fabric does not fit one soft switch ({PORTS} ports of {QUEUES} queues, one \
             port per host): {e}"
        )
    })
}

/// The soft switch's device config: an interface per host port, the
/// loopback cables, each queue shaped to its link's rate, and each host
/// port's line rate its host link's rate (with the link's queue as its
/// limit), so the host-to-switch direction is rate-limited too. `params`
/// are the links' current parameters, by link id.
pub fn device_config(lab: &Lab, mapping: &Mapping, params: &[LinkParams]) -> DeviceConfig {
    let mut ports = std::collections::BTreeMap::<u32, PortConfig>::new();
    for cable in mapping
        .cables
        .iter()
        .filter(|c| c.kind == PortKind::Loopback)
    {
        for (end, other) in [(&cable.a, &cable.b), (&cable.b, &cable.a)] {
            ports.insert(
                end.port,
                PortConfig {
                    port: end.port,
                    attach: Attach::Cable(other.port),
                    queues: Vec::new(),
                    line_rate_bps: None,
                    line_limit_bytes: None,
                },
            );
        }
    }
    for host in &mapping.host_ports {
        ports.insert(
            host.port.port,
            PortConfig {
                port: host.port.port,
                attach: Attach::Interface(port_ifname(host.port.port)),
                queues: Vec::new(),
                line_rate_bps: None,
                line_limit_bytes: None,
            },
        );
    }
    for vp in &mapping.ports {
        let Some(link) = lab.fabric.link_by_name(&vp.link) else {
            continue;
        };
        let p = &params[link.id.0 as usize];
        let (Some(rate), Some(port)) = (p.rate, ports.get_mut(&vp.port)) else {
            continue;
        };
        let limit_bytes = p.queue.map(|q| match q {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Packets(n) => u64::from(n) * QUEUE_MTU,
        });
        port.queues.push(QueueConfig {
            queue: vp.queue,
            rate_bps: rate.bits_per_sec(),
            limit_bytes,
        });
        // A host port carries its host's one link (hosts are untagged,
        // a port each): the link's rate is the port's line rate, which
        // limits what the host sends as the queue limits what it gets.
        if matches!(port.attach, Attach::Interface(_)) && link.is_host_link() {
            port.line_rate_bps = Some(rate.bits_per_sec());
            port.line_limit_bytes = limit_bytes;
        }
    }
    DeviceConfig {
        ports: ports.into_values().collect(),
        seed: lab.seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(extra: &str) -> Lab {
        turbonet_topo::parse(
            "t.toml",
            &format!(
                "[lab]\nname = \"t\"\ntarget = \"soft\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n{extra}"
            ),
        )
        .unwrap()
    }

    #[test]
    fn k4_fits_with_a_port_per_host_and_cables_both_ways() {
        let lab = lab("[links.agg-core]\nrate = \"10gbit\"\ndelay = \"1ms\"\n");
        let m = map(&lab).unwrap();
        let params: Vec<LinkParams> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
        let config = device_config(&lab, &m, &params);
        let interfaces = config
            .ports
            .iter()
            .filter(|p| matches!(p.attach, Attach::Interface(_)))
            .count();
        assert_eq!(interfaces, 16);
        for p in &config.ports {
            if let Attach::Cable(peer) = p.attach {
                let back = config.ports.iter().find(|q| q.port == peer).unwrap();
                assert_eq!(back.attach, Attach::Cable(p.port));
            }
        }
        // 16 agg-core links, shaped at both ends.
        let shaped: usize = config.ports.iter().map(|p| p.queues.len()).sum();
        assert_eq!(shaped, 32);
        assert!(
            config
                .ports
                .iter()
                .flat_map(|p| &p.queues)
                .all(|q| q.rate_bps == 10_000_000_000)
        );
        assert!(DeviceConfig::from_bytes(&config.to_bytes()).is_ok());
    }

    #[test]
    fn a_rated_host_links_port_gets_its_line_rate_and_queue_limit() {
        let lab = lab("[links.host-edge]\nrate = \"100mbit\"\nqueue = \"20p\"\n\
             [links.agg-core]\nrate = \"10gbit\"\n");
        let m = map(&lab).unwrap();
        let mut params: Vec<LinkParams> =
            lab.fabric.links.iter().map(|l| l.params.clone()).collect();
        let config = device_config(&lab, &m, &params);
        let interfaces: Vec<&PortConfig> = config
            .ports
            .iter()
            .filter(|p| matches!(p.attach, Attach::Interface(_)))
            .collect();
        assert_eq!(interfaces.len(), 16);
        for p in &interfaces {
            assert_eq!(p.line_rate_bps, Some(100_000_000), "port {}", p.port);
            // 20 packets of the MTU, as the egress queue's limit.
            assert_eq!(p.line_limit_bytes, Some(20 * QUEUE_MTU), "port {}", p.port);
            assert_eq!(p.queues.len(), 1);
            assert_eq!(p.queues[0].limit_bytes, Some(20 * QUEUE_MTU));
        }
        // Cables have no line rate (their queues shape them).
        assert!(
            config
                .ports
                .iter()
                .filter(|p| matches!(p.attach, Attach::Cable(_)))
                .all(|p| p.line_rate_bps.is_none() && p.line_limit_bytes.is_none())
        );
        assert!(DeviceConfig::from_bytes(&config.to_bytes()).is_ok());

        // The current parameters count: a new rate for one host link
        // moves its port's line rate; a link without a rate has none.
        let link = lab.fabric.links.iter().find(|l| l.is_host_link()).unwrap();
        let port = m.ports.iter().find(|vp| vp.link == link.name).unwrap().port;
        params[link.id.0 as usize].rate = Some(Rate::from_gbit(1));
        params[link.id.0 as usize].queue = None;
        let line = |config: &DeviceConfig| {
            let p = config.ports.iter().find(|p| p.port == port).unwrap();
            (p.line_rate_bps, p.line_limit_bytes)
        };
        assert_eq!(
            line(&device_config(&lab, &m, &params)),
            (Some(1_000_000_000), None)
        );
        params[link.id.0 as usize].rate = None;
        assert_eq!(line(&device_config(&lab, &m, &params)), (None, None));
    }

    #[test]
    fn impairments_without_a_pipeline_stage_are_refused_by_name() {
        let why = unsupported(&lab(
            "[links.agg-core]\njitter = \"1ms\"\ndelay = \"2ms\"\n",
        ))
        .unwrap();
        assert!(
            why.contains("link agg0-0--core0") || why.contains("jitter"),
            "{why}"
        );
        assert!(why.contains("jitter"), "{why}");
        assert!(unsupported(&lab("[links.agg-core]\nloss = \"1%\"\n")).is_none());
        assert!(unsupported(&lab("[routing]\nmode = \"bgp\"\n")).is_none());
        let frr = unsupported(&lab("[routing]\nmode = \"bgp\"\nagent = \"frr\"\n")).unwrap();
        assert!(frr.contains("built-in agent"), "{frr}");
    }
}
