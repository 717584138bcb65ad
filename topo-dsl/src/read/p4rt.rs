//! `[p4rt]` and `[[p4rt.switch]]`: the programmable switches of a
//! `target = "p4rt"` lab.

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, array_items, fields_of, missing, read_table};
use crate::diag::Diags;
use crate::mapper::{MAX_QUEUES, MapError, PhysicalSwitch};
use crate::model::{P4rtConfig, P4rtDevice, P4rtSwitch, Target};

/// `[p4rt]` (`switch` is read separately).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawP4rt {
    p4info: Option<Spanned<String>>,
    device_config: Option<Spanned<String>>,
    queues: Option<Spanned<u32>>,
    /// Listed for the key checks; read from
    /// [`Section::extra`](super::reader::Section::extra).
    #[allow(dead_code)]
    switch: Option<IgnoredAny>,
}

/// `[[p4rt.switch]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawP4rtSwitch {
    name: Option<Spanned<String>>,
    ports: Option<Spanned<u32>>,
    speed: Option<Spanned<String>>,
    address: Option<Spanned<String>>,
    bmv2: Option<Spanned<bool>>,
    device_id: Option<Spanned<u64>>,
    election_id: Option<Spanned<u64>>,
    token_file: Option<Spanned<String>>,
}

/// Queues per port when `[p4rt]` gives none: the v1model pipeline's 3-bit
/// queue.
const DEFAULT_QUEUES: u32 = 8;

/// Reads `[p4rt]` (`v`, if present) against the lab's target, which
/// needs it exactly when it is `p4rt`. `target_span` locates the target
/// for the error when the section is missing.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    target: Option<Target>,
    target_span: Option<Range<usize>>,
) -> Option<Option<P4rtConfig>> {
    let Some(v) = v else {
        if target == Some(Target::P4rt) {
            d.error(
                target_span.or(Some(0..0)),
                "target `p4rt` needs a `[p4rt]` section with at least one `[[p4rt.switch]]`",
            )
            .label("needs `[p4rt]`")
            .help(
                "add `[[p4rt.switch]]` with `name`, `ports`, `speed` and `address = \"HOST:PORT\"` \
                 (or `bmv2 = true`), e.g. name = \"s1\", ports = 64, speed = \"100G\", \
                 address = \"10.0.0.2:9559\"",
            );
            return None;
        }
        return Some(None);
    };
    let keys = Keys::new(fields_of::<RawP4rt>()).extra(&["switch"]);
    let s = read_table::<RawP4rt>(d, v, "`[p4rt]`", keys)?;
    if target.is_some_and(|t| t != Target::P4rt) {
        d.error(
            Some(s.span.clone()),
            "`[p4rt]` applies to target = \"p4rt\" only",
        )
        .label("not used by this target")
        .help("set `target = \"p4rt\"` in `[lab]`, or remove `[p4rt]`");
        return None;
    }
    let mut ok = true;
    let queues = match &s.raw.queues {
        None => DEFAULT_QUEUES,
        Some(q) if (1..=MAX_QUEUES).contains(q.get_ref()) => *q.get_ref(),
        Some(q) => {
            d.error(
                Some(q.span()),
                format!("{} queues per port is out of range", q.get_ref()),
            )
            .label("invalid queues")
            .help(format!(
                "give 1 to {MAX_QUEUES} (the turbonet pipeline's queue is 3 bits: 8)"
            ));
            ok = false;
            0
        }
    };
    let mut switches = Vec::new();
    match s.extra.get("switch") {
        None => {
            d.error(Some(s.span.clone()), "`[p4rt]` has no `[[p4rt.switch]]`")
                .label("needs a switch")
                .help("add `[[p4rt.switch]]` with `name`, `ports`, `speed` and `address`");
            ok = false;
        }
        Some(v) => {
            let items = array_items(d, v, "`p4rt.switch`", "[[p4rt.switch]]")?;
            let mut names: HashMap<String, Range<usize>> = HashMap::new();
            let mut devices: HashMap<(String, u64), Range<usize>> = HashMap::new();
            for item in items {
                match read_switch(d, item) {
                    Some((sw, span)) => {
                        if names.insert(sw.name.clone(), span.clone()).is_some() {
                            d.error(
                                Some(span),
                                format!("switch `{}` is declared twice", sw.name),
                            )
                            .label("second declaration")
                            .help("give every `[[p4rt.switch]]` its own name");
                            ok = false;
                            continue;
                        }
                        if let P4rtDevice::Address(a) = &sw.device
                            && devices
                                .insert((a.clone(), sw.device_id), item.span())
                                .is_some()
                        {
                            d.error(
                                    Some(item.span()),
                                    format!("device {} at {a} is declared twice", sw.device_id),
                                )
                                .label("same address and device id")
                                .help("each switch is one P4Runtime device: give another `device_id` or `address`");
                            ok = false;
                            continue;
                        }
                        switches.push(sw);
                    }
                    None => ok = false,
                }
            }
        }
    }
    ok.then(|| {
        Some(P4rtConfig {
            switches,
            p4info: s.raw.p4info.as_ref().map(|p| p.get_ref().clone()),
            device_config: s.raw.device_config.as_ref().map(|p| p.get_ref().clone()),
            queues,
        })
    })
}

/// One `[[p4rt.switch]]`, with the span of its name (or table).
fn read_switch(
    d: &mut Diags<'_>,
    item: &Spanned<DeValue<'_>>,
) -> Option<(P4rtSwitch, Range<usize>)> {
    let keys = Keys::new(fields_of::<RawP4rtSwitch>());
    let s = read_table::<RawP4rtSwitch>(d, item, "`[[p4rt.switch]]`", keys)?;
    let r = &s.raw;
    let mut ok = true;
    for (key, present, example) in [
        ("name", r.name.is_some(), "\"s1\""),
        ("ports", r.ports.is_some(), "64"),
        ("speed", r.speed.is_some(), "\"100G\""),
    ] {
        if !present {
            missing(d, s.span.clone(), key, "`[[p4rt.switch]]`")
                .label(format!("needs `{key}`"))
                .help(format!("add e.g. `{key} = {example}`"));
            ok = false;
        }
    }
    let device = match (&r.address, r.bmv2.as_ref().map(|b| *b.get_ref())) {
        (Some(a), None | Some(false)) => {
            let addr = a.get_ref();
            let valid = addr.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !valid {
                d.error(Some(a.span()), format!("invalid address `{addr}`"))
                    .label("expected HOST:PORT")
                    .help("the switch's P4Runtime server, e.g. `address = \"10.0.0.2:9559\"`");
                ok = false;
            }
            Some(P4rtDevice::Address(addr.clone()))
        }
        (None, Some(true)) => Some(P4rtDevice::Bmv2),
        (Some(a), Some(true)) => {
            d.error(Some(a.span()), "`address` and `bmv2 = true` together")
                .label("one or the other")
                .help("`bmv2 = true` starts BMv2 here (on a free port); `address` names a running server");
            None
        }
        (None, _) => {
            d.error(Some(s.span.clone()), "`[[p4rt.switch]]` needs `address` or `bmv2 = true`")
                .label("where is its P4Runtime server?")
                .help("add `address = \"HOST:PORT\"` (a running switch) or `bmv2 = true` (start simple_switch_grpc here)");
            None
        }
    };
    if let (Some(t), Some(P4rtDevice::Bmv2)) = (&r.token_file, &device) {
        d.error(Some(t.span()), "`token_file` with `bmv2 = true`")
            .label("BMv2 takes no token")
            .help("the BMv2 `up` starts serves inside a namespace of its own; `token_file` is for a switch at an `address`");
        ok = false;
    }
    let election_id = r.election_id.as_ref().map_or(1, |e| *e.get_ref());
    if let Some(e) = r.election_id.as_ref().filter(|e| *e.get_ref() == 0) {
        d.error(Some(e.span()), "election id 0 is not valid")
            .label("invalid election id")
            .help("P4Runtime election ids start at 1 (section 5)");
        ok = false;
    }
    let (Some(name), Some(ports), Some(speed), Some(device)) =
        (&r.name, &r.ports, &r.speed, device)
    else {
        return None;
    };
    let span = name.span();
    let spec = format!("{}={}x{}", name.get_ref(), ports.get_ref(), speed.get_ref());
    let physical = match spec.parse::<PhysicalSwitch>() {
        Ok(p) => p,
        Err(MapError::BadSwitch { reason, .. }) => {
            d.error(Some(s.span.clone()), format!("invalid switch `{spec}`: {reason}"))
                .label("invalid switch")
                .help("`name` is letters, digits, `-`, `_`; `ports` 1 to 4096; `speed` like \"100G\" or \"25000M\"");
            return None;
        }
        Err(e) => {
            d.error(Some(s.span.clone()), e.to_string());
            return None;
        }
    };
    ok.then(|| {
        (
            P4rtSwitch {
                name: physical.name,
                ports: physical.ports,
                speed: physical.speed,
                device,
                device_id: r.device_id.as_ref().map_or(1, |i| *i.get_ref()),
                election_id,
                token_file: r.token_file.as_ref().map(|t| t.get_ref().clone()),
            },
            span,
        )
    })
}
