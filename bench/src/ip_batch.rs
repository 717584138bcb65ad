//! The kernel's own cost, as iproute2 would ask for it: every request of a
//! build written as a line of an `ip -batch` (or `tc -batch`) file, grouped
//! by the phase of `up` that asks for it. `turbonet bench` runs the batches
//! and times each phase beside `up`'s own.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turbonet_injectors::Impairment;

use turbonet_topo::Lab;

use turbonet_host::Result;

use turbonet_host::kernel::nexthop::{Objects, Request, point_at_groups, split_grouped};
use turbonet_host::kernel::{
    Address, External, Kernel, KernelRoute, NamespaceSpec, Ns, PerNs, RULE_PRIORITY, SourceRule,
    Veth, Vxlan,
};
use turbonet_host::namespaces;
use turbonet_lab::error::Error;
use turbonet_lab::up;

/// The most words a route line takes before its next hops are written
/// tersely (iproute2 reads at most 512 a line).
const MAX_ROUTE_WORDS: usize = 480;

/// What `up` would ask of the kernel for `lab` on this machine, as
/// iproute2 batch files by phase, with the namespaces they create in
/// order.
pub fn ip_batches(lab: &Lab) -> turbonet_lab::Result<(Vec<String>, Vec<Batch>)> {
    let carriers = up::runnable(lab).map_err(Error::Invalid)?;
    let mut kernel = IpBatch::new();
    let phases = kernel.phases();
    let hash_seed = namespaces::has_sysctl("net/ipv4/fib_multipath_hash_seed");
    up::dry_build(
        &mut kernel,
        lab,
        &turbonet_lab::span::Span::whole(lab),
        &carriers,
        hash_seed,
        &phases,
    )?;
    let names = kernel.namespaces().to_vec();
    Ok((names, kernel.into_batches()))
}

/// The program a batch is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `ip -batch`.
    Ip,
    /// `tc -batch`.
    Tc,
}

impl Tool {
    /// The program's name.
    pub fn program(self) -> &'static str {
        match self {
            Tool::Ip => "ip",
            Tool::Tc => "tc",
        }
    }
}

/// One batch file: `lines` for `tool`, run in namespace `netns` (`-n`;
/// `None`: the root namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The phase of `up` that makes these requests.
    pub phase: String,
    /// The program.
    pub tool: Tool,
    /// Where it runs.
    pub netns: Option<String>,
    /// One command a line, without the program's name.
    pub lines: Vec<String>,
}

/// Writes every request down as iproute2 batch lines instead of making it.
/// A request belongs to the phase its build last started, as the
/// [`IpBatch::phases`] progress heard it.
#[derive(Debug, Default)]
pub struct IpBatch {
    names: Vec<String>,
    phase: Arc<Mutex<String>>,
    /// Interface names by namespace and index (`lo` is 1 everywhere).
    ifnames: Mutex<HashMap<(Ns, u32), String>>,
    batches: Mutex<Vec<Batch>>,
}

impl IpBatch {
    /// Nothing written yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The progress to build with: each phase it hears start is the
    /// phase of the requests that follow.
    pub fn phases(&self) -> Phases {
        Phases(Arc::clone(&self.phase))
    }

    /// Every batch written, in the order asked.
    pub fn into_batches(self) -> Vec<Batch> {
        self.batches.into_inner().unwrap_or_default()
    }

    /// The namespaces' names, in creation order.
    pub fn namespaces(&self) -> &[String] {
        &self.names
    }

    fn name(&self, ns: Ns) -> &str {
        self.names.get(ns.0).map_or("?", String::as_str)
    }

    fn learn(&self, ns: Ns, ifindex: u32, name: &str) {
        if let Ok(mut names) = self.ifnames.lock() {
            names.insert((ns, ifindex), name.to_owned());
        }
    }

    /// The name of interface `ifindex` of `ns`, as an earlier request
    /// named it.
    fn ifname(&self, ns: Ns, ifindex: u32) -> Result<String> {
        if ifindex == 1 {
            return Ok("lo".to_owned());
        }
        self.ifnames
            .lock()
            .ok()
            .and_then(|names| names.get(&(ns, ifindex)).cloned())
            .ok_or_else(|| turbonet_host::err!("no interface #{ifindex} in {}", self.name(ns)))
    }

    /// `route add` (or `replace`) for `r` in `ns`.
    /// The `ip` line of a static route's nexthop request.
    fn nexthop_line(&self, ns: Ns, request: Request) -> Result<String> {
        let verb = if matches!(request, Request::Regroup { .. }) {
            "replace"
        } else {
            "add"
        };
        Ok(match request {
            Request::Hop { id, hop } => format!(
                "nexthop add id {id} via {} dev {}{} proto static",
                hop.via,
                self.ifname(ns, hop.ifindex)?,
                if hop.onlink { " onlink" } else { "" }
            ),
            Request::Group { id, members } | Request::Regroup { id, members } => {
                let members: Vec<String> = members.iter().map(u32::to_string).collect();
                format!(
                    "nexthop {verb} id {id} group {} proto static",
                    members.join("/")
                )
            }
            Request::Route { prefix, id, metric } => {
                format!("route replace {prefix} nhid {id} metric {metric} proto static")
            }
            Request::Delete { id } => format!("nexthop del id {id}"),
            Request::Unroute { prefix, metric } => {
                format!("route del {prefix} metric {metric} proto static")
            }
        })
    }

    fn route_line(&self, ns: Ns, r: &KernelRoute, replace: bool) -> Result<String> {
        let verb = if replace { "replace" } else { "add" };
        let protocol = format!("{:?}", r.protocol).to_lowercase();
        let mut line = format!("route {verb} {}", r.prefix);
        if let Some(table) = r.table {
            let _ = write!(line, " table {table}");
        }
        let _ = write!(line, " proto {protocol}");
        if let Some(metric) = r.metric {
            let _ = write!(line, " metric {metric}");
        }
        let several = r.hops.len() > 1;
        // iproute2 splits a batch line into at most 512 words; a wide ECMP
        // route (an HPN aggregation switch has 120 next hops) names each
        // gateway on a connected /31 alone, which the kernel resolves to the
        // device the full form would name.
        let terse = several && r.hops.len() * 6 > MAX_ROUTE_WORDS;
        for hop in &r.hops {
            if several {
                line.push_str(" nexthop");
            }
            if let Some(via) = hop.via {
                let _ = write!(line, " via {via}");
                if terse && !hop.onlink {
                    continue;
                }
            }
            let _ = write!(line, " dev {}", self.ifname(ns, hop.ifindex)?);
            if hop.onlink {
                line.push_str(" onlink");
            }
        }
        Ok(line)
    }

    /// Appends `lines` to the current phase's batch for `tool` in `netns`
    /// (one batch per namespace and phase: a phase's requests of one
    /// namespace go in one process, as `up` sends them on one socket).
    fn push(&self, tool: Tool, netns: Option<&str>, lines: impl IntoIterator<Item = String>) {
        let phase = self.phase.lock().map(|p| p.clone()).unwrap_or_default();
        let Ok(mut batches) = self.batches.lock() else {
            return;
        };
        let found = batches
            .iter()
            .rposition(|b| b.phase == phase && b.tool == tool && b.netns.as_deref() == netns);
        let batch = match found {
            Some(i) => &mut batches[i],
            None => {
                batches.push(Batch {
                    phase,
                    tool,
                    netns: netns.map(str::to_owned),
                    lines: Vec::new(),
                });
                batches.last_mut().expect("just pushed")
            }
        };
        batch.lines.extend(lines);
    }

    /// `link set ... up` lines in the namespaces they are for, in
    /// namespace order.
    fn push_ups(&self, ups: HashMap<Ns, Vec<String>>) {
        let mut ups: Vec<(Ns, Vec<String>)> = ups.into_iter().collect();
        ups.sort_by_key(|(ns, _)| *ns);
        for (ns, lines) in ups {
            self.push(Tool::Ip, Some(self.name(ns)), lines);
        }
    }

    /// Per-namespace requests, one line each from `line`.
    fn per_ns<T>(
        &self,
        tool: Tool,
        requests: PerNs<T>,
        line: impl Fn(Ns, T) -> Result<String>,
    ) -> Result<()> {
        for (ns, items) in requests {
            let lines = items
                .into_iter()
                .map(|t| line(ns, t))
                .collect::<Result<Vec<_>>>()?;
            self.push(tool, Some(self.name(ns)), lines);
        }
        Ok(())
    }
}

/// What tells an [`IpBatch`] the phase of its requests.
#[derive(Debug)]
pub struct Phases(Arc<Mutex<String>>);

impl turbonet_lab::progress::Progress for Phases {
    fn start(&self, phase: &str) {
        if let Ok(mut current) = self.0.lock() {
            phase.clone_into(&mut current);
        }
    }
}

fn mac_text(mac: Option<[u8; 6]>) -> String {
    mac.map(|m| {
        let hex: Vec<String> = m.iter().map(|b| format!("{b:02x}")).collect();
        format!(" address {}", hex.join(":"))
    })
    .unwrap_or_default()
}

impl Kernel for IpBatch {
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], _threads: usize) -> Result<Vec<Ns>> {
        let first = self.names.len();
        self.names.extend(specs.iter().map(|s| s.name.clone()));
        // The sysctls have no `ip` command: iproute2 would need a process
        // per namespace (`ip netns exec ... sysctl`).
        self.push(
            Tool::Ip,
            None,
            specs.iter().map(|s| format!("netns add {}", s.name)),
        );
        Ok((first..self.names.len()).map(Ns).collect())
    }

    async fn add_veths(&self, veths: Vec<Veth>) -> Result<()> {
        let mut lines = Vec::with_capacity(veths.len());
        let mut peers_up: HashMap<Ns, Vec<String>> = HashMap::new();
        for v in veths {
            if v.peer_up {
                peers_up
                    .entry(v.peer.ns)
                    .or_default()
                    .push(format!("link set dev {} up", v.peer.name));
            }
            self.learn(v.local.ns, v.local.ifindex, &v.local.name);
            self.learn(v.peer.ns, v.peer.ifindex, &v.peer.name);
            let mtu = v.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
            lines.push(format!(
                "link add {}{}{mtu} index {} netns {} up type veth peer name {}{}{mtu} index {} netns {}",
                v.local.name,
                mac_text(v.local.mac),
                v.local.ifindex,
                self.name(v.local.ns),
                v.peer.name,
                mac_text(v.peer.mac),
                v.peer.ifindex,
                self.name(v.peer.ns),
            ));
        }
        self.push(Tool::Ip, None, lines);
        self.push_ups(peers_up);
        Ok(())
    }

    async fn add_vxlans(&self, vxlans: Vec<Vxlan>) -> Result<()> {
        // iproute2 cannot bring a device up in the namespace it moves it
        // into: a second line there.
        let mut lines = Vec::with_capacity(vxlans.len());
        let mut up: HashMap<Ns, Vec<String>> = HashMap::new();
        for v in vxlans {
            self.learn(v.end.ns, v.end.ifindex, &v.end.name);
            let mtu = v.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
            lines.push(format!(
                "link add {}{}{mtu} index {} netns {} type vxlan id {} local {} remote {} \
                 dstport {} nolearning df set",
                v.end.name,
                mac_text(v.end.mac),
                v.end.ifindex,
                self.name(v.end.ns),
                v.vni,
                v.local,
                v.remote,
                v.port,
            ));
            up.entry(v.end.ns)
                .or_default()
                .push(format!("link set dev {} up", v.end.name));
        }
        self.push(Tool::Ip, None, lines);
        self.push_ups(up);
        Ok(())
    }

    async fn add_bridge(&self, ns: Ns, name: &str, ifindex: u32) -> Result<()> {
        self.learn(ns, ifindex, name);
        self.push(
            Tool::Ip,
            Some(self.name(ns)),
            [format!("link add {name} index {ifindex} up type bridge")],
        );
        Ok(())
    }

    async fn set_bridge_ports(&self, ports: PerNs<(u32, u32)>) -> Result<()> {
        self.per_ns(Tool::Ip, ports, |ns, (port, bridge)| {
            Ok(format!(
                "link set dev {} master {} up",
                self.ifname(ns, port)?,
                self.ifname(ns, bridge)?
            ))
        })
    }

    fn open_namespaces(&mut self, _names: &[String]) -> Result<Vec<Ns>> {
        turbonet_host::bail!("the kernel's cost is measured for `up`, which opens no namespace")
    }

    async fn set_up(&self, links: PerNs<u32>) -> Result<()> {
        self.per_ns(Tool::Ip, links, |ns, i| {
            Ok(format!("link set dev {} up", self.ifname(ns, i)?))
        })
    }

    async fn set_down(&self, links: PerNs<u32>) -> Result<()> {
        self.per_ns(Tool::Ip, links, |ns, i| {
            Ok(format!("link set dev {} down", self.ifname(ns, i)?))
        })
    }

    async fn delete_routes(&self, routes: PerNs<(ipnet::Ipv4Net, Option<u32>)>) -> Result<()> {
        self.per_ns(Tool::Ip, routes, |_, (prefix, table)| {
            Ok(format!(
                "route del {prefix} proto static table {}",
                table.unwrap_or(254)
            ))
        })
    }

    fn disable_offloads(&self, _links: PerNs<String>) -> Result<()> {
        // ethtool has no batch mode: not part of the kernel's cost here.
        Ok(())
    }

    async fn add_addresses(&self, addrs: PerNs<Address>) -> Result<()> {
        self.per_ns(Tool::Ip, addrs, |ns, a| {
            Ok(format!(
                "address add {} dev {}",
                a.addr,
                self.ifname(ns, a.ifindex)?
            ))
        })
    }

    fn set_netem(&self, _ns: Ns, _ifindex: u32, _imp: &Impairment, _seed: u64) -> Result<()> {
        // Not measured: a netem line would need the whole impairment
        // spelled as tc does, and the bench's machines have no netem.
        Ok(())
    }

    fn set_shapers(&self, shapers: PerNs<(u32, turbonet_host::kernel::tbf::Tbf)>) -> Result<()> {
        self.per_ns(Tool::Tc, shapers, |ns, (ifindex, t)| {
            Ok(format!(
                "qdisc add dev {} root tbf rate {}bit burst {} limit {}",
                self.ifname(ns, ifindex)?,
                t.rate.bits_per_sec(),
                t.burst,
                t.limit
            ))
        })
    }

    async fn add_rules(&self, rules: PerNs<SourceRule>) -> Result<()> {
        self.per_ns(Tool::Ip, rules, |_, r| {
            Ok(format!(
                "rule add from {} lookup {} priority {RULE_PRIORITY}",
                r.from, r.table
            ))
        })
    }

    /// As `Netlink` writes them: a static route through several gateways
    /// to a nexthop group (`ip nexthop add`, then `ip route replace ...
    /// nhid`), every other route inline.
    async fn add_routes(&self, routes: PerNs<KernelRoute>, replace: bool) -> Result<()> {
        for (ns, routes) in routes {
            let (grouped, inline) = split_grouped(routes);
            // A namespace `up` made has no objects yet.
            let mut lines = point_at_groups(&Objects::default(), &grouped)
                .into_iter()
                .map(|request| self.nexthop_line(ns, request))
                .collect::<Result<Vec<_>>>()?;
            for r in inline {
                lines.push(self.route_line(ns, &r, replace)?);
            }
            self.push(Tool::Ip, Some(self.name(ns)), lines);
        }
        Ok(())
    }

    async fn attach_external(&self, e: &External) -> Result<()> {
        turbonet_host::bail!(
            "the kernel's cost of attaching {} is not measured: bench a scenario without externals",
            e.interface
        )
    }

    async fn wait_carrier(
        &self,
        _ports: Vec<(Ns, String, usize)>,
        _timeout: Duration,
    ) -> Result<()> {
        // iproute2 does not wait for carrier.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use rtnetlink::packet_route::route::RouteProtocol;

    use super::*;
    use turbonet_host::kernel::KernelHop;

    /// The batches of `up` for the bundled HPN scenario (two rails, two
    /// planes, dual-ToR hosts with a routing table per NIC), with a rate
    /// on every host link.
    fn hpn_batches() -> (Vec<String>, Vec<Batch>) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/hpn.toml");
        let text =
            std::fs::read_to_string(path).unwrap() + "\n[links.host-tor]\nrate = \"1gbit\"\n";
        let lab = turbonet_topo::parse(path, &text).unwrap();
        ip_batches(&lab).unwrap()
    }

    #[test]
    fn every_request_lands_in_its_phase_as_an_iproute2_line() {
        let (names, batches) = hpn_batches();
        let mut phases: Vec<&str> = Vec::new();
        for b in &batches {
            if !phases.contains(&b.phase.as_str()) {
                phases.push(&b.phase);
            }
        }
        assert_eq!(
            phases,
            ["namespaces", "links", "shapers", "addresses", "routes"]
        );
        let lines =
            |phase: &str| -> Vec<&Batch> { batches.iter().filter(|b| b.phase == phase).collect() };

        // One root-namespace batch creates every namespace.
        let [ns] = lines("namespaces")[..] else {
            panic!("one batch of namespaces")
        };
        assert_eq!(ns.netns, None);
        assert_eq!(ns.lines.len(), names.len());
        assert_eq!(ns.lines[0], format!("netns add {}", names[0]));

        // Each veth pair is one line, both ends placed and indexed, in the
        // root namespace; then each namespace brings its peers up.
        let links = lines("links");
        assert_eq!(links[0].netns, None);
        assert_eq!(
            links[0].lines[0],
            "link add agg0-0 mtu 9000 index 7 netns tn-hpn-tor0-r0p0 up type veth \
             peer name tor0-r0p0 mtu 9000 index 2 netns tn-hpn-agg0-0"
        );
        let agg = links
            .iter()
            .find(|b| b.netns.as_deref() == Some("tn-hpn-agg0-0"))
            .expect("agg0-0's peers");
        assert!(agg.lines.contains(&"link set dev tor0-r0p0 up".to_owned()));

        // Shapers are tc lines in the namespace of each end.
        let shapers = lines("shapers");
        assert!(
            shapers
                .iter()
                .all(|b| b.tool == Tool::Tc && b.netns.is_some())
        );
        assert!(
            shapers[0].lines[0].starts_with("qdisc add dev ")
                && shapers[0].lines[0].contains(" root tbf rate 1000000000bit burst "),
            "{}",
            shapers[0].lines[0]
        );

        // A host brings its ports up, addresses them and adds a rule per
        // NIC, all in one batch in its namespace.
        let host = lines("addresses")
            .into_iter()
            .find(|b| b.netns.as_deref() == Some("tn-hpn-h0-0"))
            .expect("h0-0's batch");
        assert!(
            host.lines
                .iter()
                .any(|l| l.starts_with("link set dev ") && l.ends_with(" up"))
        );
        assert!(host.lines.iter().any(|l| l.starts_with("address add 10.")));
        assert!(
            host.lines
                .iter()
                .any(|l| l.starts_with("rule add from 10.") && l.contains(" lookup 100 priority ")),
            "{:?}",
            host.lines
        );

        // ECMP routes of the main table go to nexthop groups, made first;
        // NIC tables' routes stay inline, naming every next hop.
        let routes: Vec<&String> = lines("routes").iter().flat_map(|b| &b.lines).collect();
        let first = |what: &dyn Fn(&str) -> bool| routes.iter().position(|l| what(l));
        let hop = first(&|l| l.starts_with("nexthop add id 1 via ")).expect("a next hop");
        let group =
            first(&|l| l.starts_with("nexthop add id ") && l.contains(" group ")).expect("a group");
        let route = first(&|l| l.starts_with("route replace ")).expect("a route to a group");
        assert!(hop < group && group < route);
        assert!(routes[route].contains(" nhid "), "{}", routes[route]);
        assert!(
            routes.iter().any(|l| l.starts_with("route add ")
                && l.contains(" table 100 ")
                && l.matches(" nexthop via ").count() >= 2),
            "{routes:?}"
        );
        assert!(routes.iter().any(|l| l.contains(" table 100 ")));
        assert!(routes.iter().all(|l| l.contains(" proto static")));
    }

    #[test]
    fn a_wide_ecmp_route_stays_within_iproute2s_words_a_line() {
        let batch = IpBatch::new();
        let ns = Ns(0);
        let hops: Vec<KernelHop> = (0..120u32)
            .map(|i| {
                batch.learn(ns, i + 2, &format!("core{i}"));
                KernelHop {
                    via: Some(Ipv4Addr::new(10, 0, (i / 128) as u8, (2 * i + 1) as u8)),
                    ifindex: i + 2,
                    onlink: false,
                }
            })
            .collect();
        let route = KernelRoute {
            prefix: "10.8.0.0/16".parse().unwrap(),
            hops,
            protocol: RouteProtocol::Static,
            metric: None,
            table: None,
        };
        let line = batch.route_line(ns, &route, false).unwrap();
        assert!(line.split_whitespace().count() < 512, "{line}");
        assert_eq!(line.matches(" nexthop via ").count(), 120);
        assert!(!line.contains(" dev "), "{line}");

        let narrow = KernelRoute {
            hops: route.hops[..2].to_vec(),
            ..route
        };
        assert_eq!(
            batch.route_line(ns, &narrow, true).unwrap(),
            "route replace 10.8.0.0/16 proto static \
             nexthop via 10.0.0.1 dev core0 nexthop via 10.0.0.3 dev core1"
        );
    }
}
