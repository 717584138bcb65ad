//! `[mgmt]`: the management network, on when the section is there (an
//! empty table takes the default pool).

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::addressing::{overlaps, parse_net};
use super::reader::{Keys, fields_of, read_table};
use crate::diag::Diags;
use crate::model::Mgmt;
use crate::plan::Pools;

/// `[mgmt]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMgmt {
    pool: Option<Spanned<String>>,
}

/// Reads `[mgmt]` (`v`, if present) for a fabric of `nodes` nodes (when
/// known) whose `[addressing]` pools are `pools` (when valid): `Some(None)`
/// without the section, `None` when it is invalid (reported).
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    pools: Option<&Pools>,
    nodes: Option<usize>,
) -> Option<Option<Mgmt>> {
    let Some(v) = v else {
        return Some(None);
    };
    let section = read_table::<RawMgmt>(d, v, "`[mgmt]`", Keys::new(fields_of::<RawMgmt>()))?;
    let (pool, span) = match &section.raw.pool {
        None => (
            Mgmt::DEFAULT_POOL
                .parse()
                .expect("the default pool is valid"),
            section.span.clone(),
        ),
        Some(p) => match parse_net(p.get_ref().trim()) {
            Ok(net) => (net, p.span()),
            Err((why, help)) => {
                d.error(
                    Some(p.span()),
                    format!("invalid `[mgmt] pool` `{}`: {why}", p.get_ref()),
                )
                .label("invalid network")
                .help(help);
                return None;
            }
        },
    };
    let mut ok = true;
    for other in pools
        .into_iter()
        .flat_map(|p| [&p.loopbacks, &p.fabric, &p.hosts])
    {
        if overlaps(&pool, &other.net) {
            ok = false;
            d.error(
                Some(span.clone()),
                format!(
                    "the management pool {pool} overlaps the `{}` pool {}",
                    other.key, other.net
                ),
            )
            .label("overlaps a fabric pool")
            .help(format!(
                "the management network is out of band: give it a pool of its own with `[mgmt] pool = \"...\"` (default \"{}\")",
                Mgmt::DEFAULT_POOL
            ));
        }
    }
    if let Some(nodes) = nodes
        && nodes as u64 > Mgmt::capacity(pool.prefix_len())
    {
        ok = false;
        let need = (nodes as u64 + 3).next_power_of_two().trailing_zeros();
        d.error(
            Some(span),
            format!(
                "the management pool {pool} is too small: it holds {} nodes, the fabric has {nodes}",
                Mgmt::capacity(pool.prefix_len())
            ),
        )
        .label("pool too small")
        .help(format!(
            "use a /{} or larger (every node takes an address, and the lab one more)",
            32 - need
        ));
    }
    ok.then_some(Some(Mgmt { pool }))
}
