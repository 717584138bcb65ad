//! The kernel written down: every request one line, nothing created.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use turbonet_injectors::Impairment;

use super::{
    Address, External, Kernel, KernelRoute, NamespaceSpec, Ns, PerNs, SourceRule, Veth, Vxlan,
};
use crate::error::Result;

/// Writes down every request instead of making it: one line each, in the
/// order asked, namespaces by name. Nothing is created.
#[derive(Debug, Default)]
pub struct Recorder {
    names: Vec<String>,
    lines: Mutex<Vec<String>>,
}

impl Recorder {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything recorded, one request a line.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn push(&self, line: String) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }

    fn name(&self, ns: Ns) -> &str {
        self.names.get(ns.0).map_or("?", String::as_str)
    }
}

fn mac_text(mac: Option<[u8; 6]>) -> String {
    mac.map(|m| {
        let hex: Vec<String> = m.iter().map(|b| format!("{b:02x}")).collect();
        format!(" mac {}", hex.join(":"))
    })
    .unwrap_or_default()
}

impl Kernel for Recorder {
    fn create_namespaces(&mut self, specs: &[NamespaceSpec], _threads: usize) -> Result<Vec<Ns>> {
        let first = self.names.len();
        for spec in specs {
            let mut line = format!("netns {}", spec.name);
            for (key, value) in &spec.sysctls {
                let _ = write!(line, " {key}={value}");
            }
            self.push(line);
            self.names.push(spec.name.clone());
        }
        Ok((first..self.names.len()).map(Ns).collect())
    }

    async fn add_veths(&self, veths: Vec<Veth>) -> Result<()> {
        for v in veths {
            let mtu = v.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
            let up = if v.peer_up { " up" } else { "" };
            self.push(format!(
                "veth {} {}#{}{} <-> {} {}#{}{}{mtu}{up}",
                self.name(v.local.ns),
                v.local.name,
                v.local.ifindex,
                mac_text(v.local.mac),
                self.name(v.peer.ns),
                v.peer.name,
                v.peer.ifindex,
                mac_text(v.peer.mac),
            ));
        }
        Ok(())
    }

    async fn add_vxlans(&self, vxlans: Vec<Vxlan>) -> Result<()> {
        for v in vxlans {
            let mtu = v.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
            self.push(format!(
                "vxlan {} {}#{}{} vni {} {} -> {} port {}{mtu}",
                self.name(v.end.ns),
                v.end.name,
                v.end.ifindex,
                mac_text(v.end.mac),
                v.vni,
                v.local,
                v.remote,
                v.port,
            ));
        }
        Ok(())
    }

    async fn add_bridge(&self, ns: Ns, name: &str, ifindex: u32) -> Result<()> {
        self.push(format!("bridge {} {name}#{ifindex}", self.name(ns)));
        Ok(())
    }

    async fn set_bridge_ports(&self, ports: PerNs<(u32, u32)>) -> Result<()> {
        for (ns, ports) in ports {
            for (port, bridge) in ports {
                self.push(format!(
                    "bridge-port {} #{port} -> #{bridge}",
                    self.name(ns)
                ));
            }
        }
        Ok(())
    }

    fn open_namespaces(&mut self, names: &[String]) -> Result<Vec<Ns>> {
        let first = self.names.len();
        for name in names {
            self.push(format!("open {name}"));
            self.names.push(name.clone());
        }
        Ok((first..self.names.len()).map(Ns).collect())
    }

    async fn set_down(&self, links: PerNs<u32>) -> Result<()> {
        for (ns, indices) in links {
            let list: Vec<String> = indices.iter().map(|i| format!("#{i}")).collect();
            self.push(format!("down {} {}", self.name(ns), list.join(" ")));
        }
        Ok(())
    }

    async fn delete_routes(&self, routes: PerNs<(ipnet::Ipv4Net, Option<u32>)>) -> Result<()> {
        for (ns, routes) in routes {
            for (prefix, table) in routes {
                self.push(match table {
                    None => format!("route-del {} {prefix}", self.name(ns)),
                    Some(t) => format!("route-del {} {prefix} table {t}", self.name(ns)),
                });
            }
        }
        Ok(())
    }

    async fn set_up(&self, links: PerNs<u32>) -> Result<()> {
        for (ns, indices) in links {
            let list: Vec<String> = indices.iter().map(|i| format!("#{i}")).collect();
            self.push(format!("up {} {}", self.name(ns), list.join(" ")));
        }
        Ok(())
    }

    fn disable_offloads(&self, links: PerNs<String>) -> Result<()> {
        for (ns, names) in links {
            self.push(format!(
                "offloads-off {} {}",
                self.name(ns),
                names.join(" ")
            ));
        }
        Ok(())
    }

    async fn add_rules(&self, rules: PerNs<SourceRule>) -> Result<()> {
        for (ns, rules) in rules {
            for r in rules {
                self.push(format!(
                    "rule {} from {} lookup {}",
                    self.name(ns),
                    r.from,
                    r.table
                ));
            }
        }
        Ok(())
    }

    async fn add_addresses(&self, addrs: PerNs<Address>) -> Result<()> {
        for (ns, addrs) in addrs {
            for a in addrs {
                self.push(format!("addr {} #{} {}", self.name(ns), a.ifindex, a.addr));
            }
        }
        Ok(())
    }

    fn set_netem(&self, ns: Ns, ifindex: u32, impairment: &Impairment, seed: u64) -> Result<()> {
        self.push(format!(
            "netem {} #{ifindex} seed {seed:#x} {impairment:?}",
            self.name(ns)
        ));
        Ok(())
    }

    fn set_shapers(&self, shapers: PerNs<(u32, super::tbf::Tbf)>) -> Result<()> {
        for (ns, shapers) in shapers {
            for (ifindex, t) in shapers {
                self.push(format!(
                    "tbf {} #{ifindex} rate {} burst {} limit {}",
                    self.name(ns),
                    t.rate,
                    t.burst,
                    t.limit
                ));
            }
        }
        Ok(())
    }

    async fn add_routes(&self, routes: PerNs<KernelRoute>, replace: bool) -> Result<()> {
        for (ns, routes) in routes {
            for r in routes {
                let mut line = format!(
                    "{} {} {}",
                    if replace { "route-replace" } else { "route" },
                    self.name(ns),
                    r.prefix
                );
                for hop in &r.hops {
                    match hop.via {
                        Some(via) => {
                            let _ = write!(line, " via {via} #{}", hop.ifindex);
                        }
                        None => {
                            let _ = write!(line, " dev #{}", hop.ifindex);
                        }
                    }
                    if hop.onlink {
                        line.push_str(" onlink");
                    }
                }
                let _ = write!(line, " proto {:?}", r.protocol);
                if let Some(metric) = r.metric {
                    let _ = write!(line, " metric {metric}");
                }
                if let Some(table) = r.table {
                    let _ = write!(line, " table {table}");
                }
                self.push(line.to_lowercase());
            }
        }
        Ok(())
    }

    async fn attach_external(&self, e: &External) -> Result<()> {
        self.push(format!(
            "external {}{} -> {} {} {} alias {}",
            e.interface,
            e.from
                .as_deref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default(),
            self.name(e.into),
            e.ifname,
            e.addr,
            e.alias
        ));
        Ok(())
    }

    async fn wait_carrier(
        &self,
        ports: Vec<(Ns, String, usize)>,
        _timeout: Duration,
    ) -> Result<()> {
        for (ns, _, count) in ports {
            self.push(format!("carrier {} {count}", self.name(ns)));
        }
        Ok(())
    }
}
