//! `[addressing]`: the loopback, fabric and host address pools, and the
//! IPv4 networks other sections write (`[[external]]` routes).

use ipnet::Ipv4Net;
use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, fields_of, read_table};
use crate::diag::Diags;
use crate::plan::{self, Pool, Pools};

/// `[addressing]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAddressing {
    loopbacks: Option<Spanned<String>>,
    fabric: Option<Spanned<String>>,
    hosts: Option<Spanned<String>>,
}

/// Reads `[addressing]` (`v`, if present; the default pools otherwise).
/// `None` when a pool is invalid or two overlap (reported).
pub(crate) fn read(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> Option<Pools> {
    let raw = match v {
        None => RawAddressing::default(),
        Some(v) => {
            let keys = Keys::new(fields_of::<RawAddressing>());
            read_table::<RawAddressing>(d, v, "`[addressing]`", keys)?.raw
        }
    };
    let loopbacks = read_pool(d, raw.loopbacks, "loopbacks", plan::DEFAULT_LOOPBACKS);
    let fabric = read_pool(d, raw.fabric, "fabric", plan::DEFAULT_FABRIC);
    let hosts = read_pool(d, raw.hosts, "hosts", plan::DEFAULT_HOSTS);
    let mut ok = true;
    let valid: Vec<&Pool> = [&loopbacks, &fabric, &hosts]
        .into_iter()
        .flatten()
        .collect();
    for (i, a) in valid.iter().enumerate() {
        for b in &valid[i + 1..] {
            if overlaps(&a.net, &b.net) {
                ok = false;
                let span = b.span.clone().or(a.span.clone());
                d.error(
                    span,
                    format!(
                        "address pools overlap: `{}` = {} and `{}` = {}",
                        a.key, a.net, b.key, b.net
                    ),
                )
                .label("overlaps another pool")
                .help(format!(
                    "the loopbacks, fabric and hosts pools must be disjoint; defaults: loopbacks = \"{}\", fabric = \"{}\", hosts = \"{}\"",
                    plan::DEFAULT_LOOPBACKS,
                    plan::DEFAULT_FABRIC,
                    plan::DEFAULT_HOSTS
                ));
            }
        }
    }
    let (loopbacks, fabric, hosts) = (loopbacks?, fabric?, hosts?);
    ok.then_some(Pools {
        loopbacks,
        fabric,
        hosts,
    })
}

/// Whether two networks share addresses.
pub(crate) fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// One pool: `v` if given, else `default`.
fn read_pool(
    d: &mut Diags<'_>,
    v: Option<Spanned<String>>,
    key: &'static str,
    default: &str,
) -> Option<Pool> {
    let Some(v) = v else {
        return Some(Pool {
            net: default.parse().expect("default pools are valid"),
            key,
            span: None,
        });
    };
    let text = v.get_ref().trim();
    match parse_net(text) {
        Ok(net) => Some(Pool {
            net,
            key,
            span: Some(v.span()),
        }),
        Err((why, help)) => {
            d.error(
                Some(v.span()),
                format!("invalid `{key}` pool `{text}`: {why}"),
            )
            .label("invalid network")
            .help(help);
            None
        }
    }
}

/// Parses an IPv4 network with no host bits set.
pub(crate) fn parse_net(text: &str) -> Result<Ipv4Net, (String, String)> {
    let example = "write an IPv4 network in CIDR form, e.g. \"10.0.0.0/16\"".to_owned();
    if text.contains(':') {
        return Err(("IPv6 is not supported yet".into(), example));
    }
    if !text.contains('/') {
        return Err(("the prefix length is missing".into(), example));
    }
    let net: Ipv4Net = text
        .parse()
        .map_err(|_| ("not an IPv4 network".to_owned(), example.clone()))?;
    if net.addr() != net.network() {
        return Err((
            "host bits are set".into(),
            format!("did you mean \"{}\"?", net.trunc()),
        ));
    }
    Ok(net)
}
