//! `[[filter]]`: packet filters at switch (or host) ports: an nftables
//! chain or a compiled eBPF program, at a port's ingress or egress.

use std::collections::BTreeSet;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, Keyword, array_items, fields_of, keyword, missing, read_table};
use super::timeline::close_node_names;
use crate::diag::{Diags, choices_help};
use crate::model::{Attach, Fabric, Filter, FilterKind, Hook, Target};

const WHAT: &str = "`[[filter]]`";

/// `[[filter]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilter {
    name: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    port: Option<Spanned<String>>,
    hook: Option<Spanned<String>>,
    nft: Option<Spanned<String>>,
    ebpf: Option<Spanned<String>>,
    program: Option<Spanned<String>>,
    attach: Option<Spanned<String>>,
}

/// Reads `[[filter]]` (`v`, if present) for `fabric` (when valid).
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
    target: Option<Target>,
) -> Vec<Filter> {
    let Some(v) = v else {
        return Vec::new();
    };
    let Some(items) = array_items(d, v, "`filter`", "[[filter]]") else {
        return Vec::new();
    };
    let mut out: Vec<Filter> = Vec::new();
    let mut names = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let Some(s) = read_table::<RawFilter>(d, item, WHAT, Keys::new(fields_of::<RawFilter>()))
        else {
            continue;
        };
        let span = s.span.clone();
        let f = &s.raw;
        if let Some(t) = target.filter(|t| *t != Target::Netns) {
            d.error(Some(span), format!("`[[filter]]` needs target `netns`, not `{t}`"))
                .label("no filter stage here")
                .help("turbonet's P4 pipeline has no filter stage: filters attach to the ports of the netns target's namespaces");
            continue;
        }
        let name = f
            .name
            .as_ref()
            .map_or_else(|| format!("filter{i}"), |n| n.get_ref().clone());
        let name_span = f.name.as_ref().map_or(span.clone(), Spanned::span);
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            d.error(Some(name_span), format!("invalid filter name `{name}`"))
                .label("not a name")
                .help("lowercase letters, digits, `-` and `_`, e.g. `name = \"sav-edge0-0\"`");
            continue;
        }
        if !names.insert(name.clone()) {
            d.error(
                Some(name_span),
                format!("a filter named `{name}` exists already"),
            )
            .label("duplicate name")
            .help("filter names are unique: rename this one");
            continue;
        }
        let hook = match &f.hook {
            None => Some(Hook::Ingress),
            Some(h) => keyword(
                d,
                h.get_ref(),
                h.span(),
                &[("ingress", Hook::Ingress), ("egress", Hook::Egress)],
                Keyword {
                    what: "hook",
                    short: "hook",
                    plural: "hooks",
                },
            ),
        };
        let kind = match (&f.nft, &f.ebpf) {
            (Some(_), Some(e)) => {
                d.error(
                    Some(e.span()),
                    "a filter is an nftables chain or an eBPF program, not both",
                )
                .label("second filter")
                .help("remove `nft` or `ebpf`; use two `[[filter]]` tables for both");
                None
            }
            (None, None) => {
                missing(d, span.clone(), "nft` or `ebpf", WHAT)
                    .label("filters with what?")
                    .help("add `nft = \"ip saddr != 10.128.0.2 drop\"` (the rules of an nftables chain) or `ebpf = \"sav.o\"` (a compiled eBPF object)");
                None
            }
            (Some(rules), None) => {
                if f.program.is_some() || f.attach.is_some() {
                    let key = f
                        .program
                        .as_ref()
                        .or(f.attach.as_ref())
                        .expect("one is set");
                    d.error(
                        Some(key.span()),
                        "`program` and `attach` are keys of eBPF filters",
                    )
                    .label("not for nftables")
                    .help("remove it: an nftables filter is a chain at the port's hook");
                    None
                } else if rules.get_ref().trim().is_empty() {
                    d.error(Some(rules.span()), "empty `nft` rules")
                        .label("no rules")
                        .help("write the rules of the chain, one per line, e.g. `ip saddr != 10.128.0.2 drop`");
                    None
                } else {
                    Some(FilterKind::Nft {
                        rules: rules.get_ref().clone(),
                    })
                }
            }
            (None, Some(object)) => {
                let attach = match &f.attach {
                    None => Some(Attach::Tc),
                    Some(a) => keyword(
                        d,
                        a.get_ref(),
                        a.span(),
                        &[("tc", Attach::Tc), ("xdp", Attach::Xdp)],
                        Keyword {
                            what: "attach point",
                            short: "attach point",
                            plural: "attach points",
                        },
                    ),
                };
                match (attach, hook) {
                    (Some(Attach::Xdp), Some(Hook::Egress)) => {
                        let at = f.hook.as_ref().map_or(span.clone(), Spanned::span);
                        d.error(Some(at), "XDP runs at a port's ingress only")
                            .label("egress")
                            .help("use `attach = \"tc\"` for an egress filter, or `hook = \"ingress\"`");
                        None
                    }
                    (Some(attach), _) if !object.get_ref().trim().is_empty() => {
                        Some(FilterKind::Ebpf {
                            object: object.get_ref().clone(),
                            program: f.program.as_ref().map(|p| p.get_ref().clone()),
                            attach,
                        })
                    }
                    (Some(_), _) => {
                        d.error(Some(object.span()), "empty `ebpf` object path")
                            .label("no file")
                            .help("the compiled object, relative to the scenario file, e.g. `ebpf = \"sav.o\"`");
                        None
                    }
                    (None, _) => None,
                }
            }
        };
        let Some(fabric) = fabric else { continue };
        let Some(node_name) = &f.node else {
            missing(d, span.clone(), "node", WHAT)
                .label("at which node?")
                .help("add e.g. `node = \"edge0-0\"` and `port = \"h0-0-0\"`");
            continue;
        };
        let Some(node) = fabric.node_by_name(node_name.get_ref()) else {
            d.error(
                Some(node_name.span()),
                format!("no node named `{}`", node_name.get_ref()),
            )
            .label("unknown node")
            .help(close_node_names(node_name.get_ref(), fabric));
            continue;
        };
        let ports: Vec<(&str, crate::model::LinkId)> = fabric
            .ports(node.id)
            .map(|(link, local, _)| (local.ifname.as_str(), link.id))
            .collect();
        let Some(port_name) = &f.port else {
            missing(d, span.clone(), "port", WHAT)
                .label("at which port?")
                .help(format!(
                    "the ports of {}: {}",
                    node.name,
                    ports.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", ")
                ));
            continue;
        };
        let Some(&(_, link)) = ports.iter().find(|(p, _)| p == port_name.get_ref()) else {
            let names: Vec<&str> = ports.iter().map(|(p, _)| *p).collect();
            d.error(
                Some(port_name.span()),
                format!("{} has no port `{}`", node.name, port_name.get_ref()),
            )
            .label("unknown port")
            .help(choices_help(port_name.get_ref(), "ports", &names));
            continue;
        };
        let (Some(hook), Some(kind)) = (hook, kind) else {
            continue;
        };
        // The eBPF filters of a port are counted by its tc hook's own
        // counters: one per port.
        if matches!(kind, FilterKind::Ebpf { .. })
            && let Some(other) = out.iter().find(|o| {
                o.node == node.id
                    && o.port == *port_name.get_ref()
                    && matches!(o.kind, FilterKind::Ebpf { .. })
            })
        {
            d.error(
                Some(port_name.span()),
                format!(
                    "port {} of {} has an eBPF filter already (`{}`)",
                    port_name.get_ref(),
                    node.name,
                    other.name
                ),
            )
            .label("second eBPF filter")
            .help("one eBPF filter per port (its counters are the port's tc hook's); combine them into one program");
            continue;
        }
        out.push(Filter {
            name,
            node: node.id,
            port: port_name.get_ref().clone(),
            link,
            hook,
            kind,
        });
    }
    out
}
