//! `[metrics]`: the lab daemon's OpenMetrics endpoint, on when the section
//! is there.

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, fields_of, missing, read_table};
use crate::diag::Diags;
use crate::model::Metrics;

/// `[metrics]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    port: Option<Spanned<i64>>,
    address: Option<Spanned<String>>,
}

/// Reads `[metrics]` (`v`, if present): `Some(None)` without the section,
/// `None` when it is invalid (reported).
pub(crate) fn read(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> Option<Option<Metrics>> {
    let Some(v) = v else {
        return Some(None);
    };
    let section =
        read_table::<RawMetrics>(d, v, "`[metrics]`", Keys::new(fields_of::<RawMetrics>()))?;
    let Some(port) = &section.raw.port else {
        missing(d, section.span.clone(), "port", "`[metrics]`")
            .label("no port")
            .help("the endpoint's TCP port, e.g. `port = 9464`");
        return None;
    };
    let Some(port_number) = u16::try_from(*port.get_ref()).ok().filter(|p| *p > 0) else {
        d.error(
            Some(port.span()),
            format!(
                "invalid `[metrics] port` {}: a TCP port is 1 to 65535",
                port.get_ref()
            ),
        )
        .label("not a port")
        .help("e.g. `port = 9464`");
        return None;
    };
    let address = match &section.raw.address {
        None => Metrics::DEFAULT_ADDRESS.parse().expect("a valid address"),
        Some(a) => match a.get_ref().trim().parse() {
            Ok(address) => address,
            Err(_) => {
                d.error(
                    Some(a.span()),
                    format!("invalid `[metrics] address` `{}`", a.get_ref()),
                )
                .label("not an IPv4 address")
                .help(format!(
                    "an address of this machine to serve on, e.g. `\"{}\"` (the default) or `\"0.0.0.0\"` (every interface)",
                    Metrics::DEFAULT_ADDRESS
                ));
                return None;
            }
        },
    };
    Some(Some(Metrics {
        port: port_number,
        address,
    }))
}
