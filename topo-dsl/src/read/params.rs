//! The parameters of a link as written: the keys shared by
//! `[links.default]`, `[links.<class>]`, `[[links.override]]`, the inline
//! parameters of `[[topology.links]]` and `set` events of `[[timeline]]`
//! (rate, delay, jitter, loss (Bernoulli or Gilbert-Elliott), queue, ECN,
//! MTU, ...).

use std::ops::Range;

use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, example_for, missing, read_table, string, unit};
use crate::diag::Diags;
use crate::model::{GE_KEYS, JitterDistribution, LinkParams, Loss};
use crate::units::{Delay, LossProb, Mtu, QueueLimit, Rate};

/// `[links.default]`, `[links.<class>]`; the other tables that take link
/// parameters convert to it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawParams {
    pub rate: Option<Spanned<toml::Value>>,
    pub delay: Option<Spanned<toml::Value>>,
    pub jitter: Option<Spanned<toml::Value>>,
    pub jitter_distribution: Option<Spanned<toml::Value>>,
    pub reorder: Option<Spanned<toml::Value>>,
    /// Listed for the key checks; its value is read from
    /// [`Section::extra`](super::reader::Section::extra) (it may be a
    /// table, whose keys need spans).
    #[allow(dead_code)]
    pub loss: Option<IgnoredAny>,
    pub corrupt: Option<Spanned<toml::Value>>,
    pub duplicate: Option<Spanned<toml::Value>>,
    pub queue: Option<Spanned<toml::Value>>,
    pub ecn: Option<Spanned<toml::Value>>,
    pub mtu: Option<Spanned<toml::Value>>,
}

/// Declares a scenario table that takes link parameters beside keys of its
/// own (`serde(flatten)` cannot be combined with `deny_unknown_fields`):
/// its own fields, then every field of [`RawParams`] in its order (`mtu`
/// left out with `without mtu`: it cannot change at run time), and
/// `take_params`, which hands the parameters over.
macro_rules! with_link_params {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty,)* }) => {
        $crate::read::params::with_link_params!(@define $(#[$meta])* $name { $($(#[$fm])* $field: $ty,)* } [mtu]);
    };
    ($(#[$meta:meta])* struct $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty,)* } without mtu) => {
        $crate::read::params::with_link_params!(@define $(#[$meta])* $name { $($(#[$fm])* $field: $ty,)* } []);
    };
    (@define $(#[$meta:meta])* $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty,)* } [$($mtu:ident)?]) => {
        $(#[$meta])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            $($(#[$fm])* $field: $ty,)*
            rate: Option<toml::Spanned<toml::Value>>,
            delay: Option<toml::Spanned<toml::Value>>,
            jitter: Option<toml::Spanned<toml::Value>>,
            jitter_distribution: Option<toml::Spanned<toml::Value>>,
            reorder: Option<toml::Spanned<toml::Value>>,
            /// Listed for the key checks; its value is read from
            /// [`Section::extra`](crate::read::reader::Section::extra) (it
            /// may be a table, whose keys need spans).
            #[allow(dead_code)]
            loss: Option<serde::de::IgnoredAny>,
            corrupt: Option<toml::Spanned<toml::Value>>,
            duplicate: Option<toml::Spanned<toml::Value>>,
            queue: Option<toml::Spanned<toml::Value>>,
            ecn: Option<toml::Spanned<toml::Value>>,
            $($mtu: Option<toml::Spanned<toml::Value>>,)?
        }

        impl $name {
            /// Its link parameters (`loss` is read from the section's
            /// extra keys), leaving its own keys.
            fn take_params(&mut self) -> $crate::read::params::RawParams {
                #[allow(unused_mut)]
                let mut params = $crate::read::params::RawParams {
                    rate: self.rate.take(),
                    delay: self.delay.take(),
                    jitter: self.jitter.take(),
                    jitter_distribution: self.jitter_distribution.take(),
                    reorder: self.reorder.take(),
                    loss: None,
                    corrupt: self.corrupt.take(),
                    duplicate: self.duplicate.take(),
                    queue: self.queue.take(),
                    ecn: self.ecn.take(),
                    mtu: None,
                };
                $(params.$mtu = self.$mtu.take();)?
                params
            }
        }
    };
}
pub(crate) use with_link_params;

/// The Gilbert-Elliott form of `loss`: `{ p = "1%", r = "25%" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGilbertElliott {
    p: Option<Spanned<toml::Value>>,
    r: Option<Spanned<toml::Value>>,
    bad: Option<Spanned<toml::Value>>,
    good: Option<Spanned<toml::Value>>,
}

/// Where the keys that other keys depend on were written, so that an
/// inconsistency found on a link after the levels are merged points at the
/// line that caused it. A key is recorded when present, valid or not, so a
/// bad `rate` does not also make its `queue` "rate-less".
#[derive(Debug, Clone, Default)]
pub(crate) struct ParamSpans {
    pub rate: Option<Range<usize>>,
    pub queue: Option<Range<usize>>,
    pub ecn: Option<Range<usize>>,
}

impl ParamSpans {
    /// Lays the spans of a higher level (class over default, ...) over
    /// these.
    pub(crate) fn overlay(&mut self, top: &ParamSpans) {
        for (base, top) in [
            (&mut self.rate, &top.rate),
            (&mut self.queue, &top.queue),
            (&mut self.ecn, &top.ecn),
        ] {
            if top.is_some() {
                base.clone_from(top);
            }
        }
    }

    /// True when none of the keys was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.rate.is_none() && self.queue.is_none() && self.ecn.is_none()
    }
}

/// Parses the values of a parameter table, reporting each bad one. `loss`
/// is the raw `loss` value (a probability or a Gilbert-Elliott table).
pub(crate) fn read_params(
    d: &mut Diags<'_>,
    raw: &RawParams,
    loss: Option<&Spanned<DeValue<'_>>>,
) -> (LinkParams, ParamSpans) {
    let span = |v: &Option<Spanned<toml::Value>>| v.as_ref().map(toml::Spanned::span);
    let params = LinkParams {
        rate: unit::<Rate>(d, &raw.rate, "rate"),
        delay: unit::<Delay>(d, &raw.delay, "delay"),
        jitter: unit::<Delay>(d, &raw.jitter, "jitter"),
        jitter_distribution: raw.jitter_distribution.as_ref().and_then(|v| {
            let text = string(d, v, "jitter_distribution")?;
            match text.parse::<JitterDistribution>() {
                Ok(x) => Some(x),
                Err(e) => {
                    d.error(Some(v.span()), e.message().to_owned())
                        .label("unknown distribution")
                        .help(e.hint().unwrap_or_default());
                    None
                }
            }
        }),
        reorder: raw.reorder.as_ref().and_then(|v| match v.get_ref() {
            toml::Value::Boolean(b) => Some(*b),
            other => {
                let help = match other.as_str() {
                    Some(t @ ("true" | "false")) => {
                        format!("write it without quotes: `reorder = {t}`")
                    }
                    _ => example_for("reorder").to_owned(),
                };
                d.error(
                    Some(v.span()),
                    format!(
                        "expected `true` or `false` for `reorder`, found {}",
                        other.type_str()
                    ),
                )
                .label("expected a boolean")
                .help(help);
                None
            }
        }),
        loss: loss.and_then(|v| read_loss(d, v)),
        corrupt: unit::<LossProb>(d, &raw.corrupt, "corrupt"),
        duplicate: unit::<LossProb>(d, &raw.duplicate, "duplicate"),
        queue: unit::<QueueLimit>(d, &raw.queue, "queue"),
        ecn: unit::<QueueLimit>(d, &raw.ecn, "ecn"),
        mtu: unit::<Mtu>(d, &raw.mtu, "mtu"),
    };
    let spans = ParamSpans {
        rate: span(&raw.rate),
        queue: span(&raw.queue),
        ecn: span(&raw.ecn),
    };
    (params, spans)
}

/// `loss = "0.1%"` (Bernoulli) or `loss = { p = "1%", r = "25%", bad =
/// "100%", good = "0%" }` (Gilbert-Elliott).
fn read_loss(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>) -> Option<Loss> {
    if v.get_ref().is_table() {
        let what = "the Gilbert-Elliott `loss` table";
        let s = read_table::<RawGilbertElliott>(d, v, what, Keys::new(GE_KEYS))?;
        let g = &s.raw;
        let needs = |d: &mut Diags<'_>, key: &str, meaning: &str| {
            missing(d, s.span.clone(), key, what)
                .label(format!("needs `{key}`"))
                .help(format!(
                    "`{key}` is {meaning}; e.g. `loss = {{ p = \"1%\", r = \"25%\" }}` (`bad` defaults to 100%, `good` to 0%)"
                ));
        };
        if g.p.is_none() {
            needs(d, "p", "the good->bad transition probability per packet");
        }
        if g.r.is_none() {
            needs(d, "r", "the bad->good transition probability per packet");
        }
        let p = unit::<LossProb>(d, &g.p, "p");
        let r = unit::<LossProb>(d, &g.r, "r");
        let bad = match &g.bad {
            None => Some(LossProb(1.0)),
            Some(_) => unit::<LossProb>(d, &g.bad, "bad"),
        };
        let good = match &g.good {
            None => Some(LossProb::ZERO),
            Some(_) => unit::<LossProb>(d, &g.good, "good"),
        };
        return Some(Loss::GilbertElliott {
            p: p?,
            r: r?,
            bad: bad?,
            good: good?,
        });
    }
    let text = match v.get_ref() {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => i.as_str().to_owned(),
        DeValue::Float(f) => f.as_str().to_owned(),
        other => {
            d.error(
                Some(v.span()),
                format!(
                    "expected a probability or a table for `loss`, found {}",
                    other.type_str()
                ),
            )
            .label("expected a string or a table")
            .help(example_for("loss"));
            return None;
        }
    };
    match text.parse::<LossProb>() {
        Ok(p) => Some(Loss::Bernoulli(p)),
        Err(e) => {
            d.error(Some(v.span()), format!("invalid `loss`: {}", e.message()))
                .label("invalid loss")
                .help(e.hint().unwrap_or_default());
            None
        }
    }
}
