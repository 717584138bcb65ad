//! Emulated link parameters ([`LinkParams`]), the rules across them
//! ([`ParamProblem`]), jitter shapes and loss models, with their scenario
//! syntax (parsing, printing, serde).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::units::{Delay, LossProb, Mtu, QueueLimit, Rate, UnitError};

/// Emulated properties of a link, the same in both directions.
/// `None` means "not emulated" (or, for the modifiers `jitter_distribution`
/// and `reorder`, "the default"): the veth's native behaviour.
///
/// Every field is an `Option` so that the levels of a scenario
/// (`[links.default]`, `[links.<class>]`, inline, `[[links.override]]`)
/// overlay key by key. In JSON (the daemon's input log, `--json`) each
/// value is written in scenario syntax (`"delay": "5ms"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkParams {
    /// Bandwidth.
    pub rate: Option<Rate>,
    /// One-way propagation delay.
    pub delay: Option<Delay>,
    /// Delay jitter: the spread of the per-packet delay variation.
    pub jitter: Option<Delay>,
    /// Shape of the jitter (default [`JitterDistribution::Uniform`]).
    pub jitter_distribution: Option<JitterDistribution>,
    /// Whether jitter may reorder packets (default `false`: frames leave in
    /// the order they arrived).
    pub reorder: Option<bool>,
    /// Packet loss: independent (Bernoulli) or bursty (Gilbert-Elliott).
    pub loss: Option<Loss>,
    /// Probability that a frame gets one bit flipped.
    pub corrupt: Option<LossProb>,
    /// Probability that a frame is sent twice.
    pub duplicate: Option<LossProb>,
    /// Finite queue drained at `rate` (needs `rate`).
    pub queue: Option<QueueLimit>,
    /// Queue depth at or above which ECN-capable packets are marked CE
    /// (needs `rate`; at most `queue`).
    pub ecn: Option<QueueLimit>,
    /// Interface MTU (both ends).
    pub mtu: Option<Mtu>,
}

impl LinkParams {
    /// The queue of a rate-limited link that sets none (Linux's default
    /// `txqueuelen`); `ecn` is checked against it.
    pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);

    /// The keys of a link in scenario files and on the command line, in
    /// field order.
    pub const KEYS: [&'static str; 11] = [
        "rate",
        "delay",
        "jitter",
        "jitter_distribution",
        "reorder",
        "loss",
        "corrupt",
        "duplicate",
        "queue",
        "ecn",
        "mtu",
    ];

    /// `self` run `scale` times slower: its rate, queue and ECN threshold
    /// divided by `scale` (a queue or threshold rounded up, at least one
    /// packet or byte), so queueing delays and the ratios between links
    /// stay as they were. Delays, jitter and probabilities do not change.
    pub fn scaled(&self, scale: u32) -> LinkParams {
        if scale <= 1 {
            return self.clone();
        }
        let s = u64::from(scale);
        let limit = |q: QueueLimit| match q {
            QueueLimit::Packets(n) => QueueLimit::Packets(u64::from(n).div_ceil(s).max(1) as u32),
            QueueLimit::Bytes(b) => QueueLimit::Bytes(b.div_ceil(s).max(1)),
        };
        LinkParams {
            rate: self
                .rate
                .map(|r| Rate::from_bits_per_sec((r.bits_per_sec() / s).max(1))),
            queue: self.queue.map(limit),
            ecn: self.ecn.map(limit),
            ..self.clone()
        }
    }

    /// `self` with every field that `patch` sets replaced (key by key, like
    /// an override); the fields `patch` leaves `None` keep their value.
    pub fn merged(&self, patch: &LinkParams) -> LinkParams {
        let mut out = self.clone();
        out.overlay(patch);
        out
    }

    /// In place [`LinkParams::merged`].
    pub(crate) fn overlay(&mut self, top: &LinkParams) {
        // Destructure so that a new field cannot be forgotten here.
        let LinkParams {
            rate,
            delay,
            jitter,
            jitter_distribution,
            reorder,
            loss,
            corrupt,
            duplicate,
            queue,
            ecn,
            mtu,
        } = top;
        fn set<T: Clone>(base: &mut Option<T>, top: &Option<T>) {
            if top.is_some() {
                base.clone_from(top);
            }
        }
        set(&mut self.rate, rate);
        set(&mut self.delay, delay);
        set(&mut self.jitter, jitter);
        set(&mut self.jitter_distribution, jitter_distribution);
        set(&mut self.reorder, reorder);
        set(&mut self.loss, loss);
        set(&mut self.corrupt, corrupt);
        set(&mut self.duplicate, duplicate);
        set(&mut self.queue, queue);
        set(&mut self.ecn, ecn);
        set(&mut self.mtu, mtu);
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        *self == LinkParams::default()
    }

    /// The rules across fields that every link must satisfy (the scenario
    /// parser enforces them on the merged `[links]` levels, and `turbonet
    /// link set` on the patched parameters of a running link):
    ///
    /// - `queue` needs `rate`: only the rate drains a queue;
    /// - `ecn` needs `rate`: it marks from that queue;
    /// - `ecn` is at most `queue`, or at most [`LinkParams::DEFAULT_QUEUE`]
    ///   when no queue is set (a packet threshold is not compared with a
    ///   byte limit, nor the reverse: that needs the frame sizes).
    ///
    /// On failure, one message per violated rule, each saying what to
    /// change.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.iter().map(ParamProblem::to_string).collect())
        }
    }

    /// The violated rules of [`LinkParams::check`], in the order listed
    /// there.
    pub fn problems(&self) -> Vec<ParamProblem> {
        let mut out = Vec::new();
        if self.rate.is_none() {
            if self.queue.is_some() {
                out.push(ParamProblem::QueueWithoutRate);
            }
            if self.ecn.is_some() {
                out.push(ParamProblem::EcnWithoutRate);
            }
        } else if let Some(ecn) = self.ecn {
            let queue = self.queue.unwrap_or(Self::DEFAULT_QUEUE);
            let above = match (ecn, queue) {
                (QueueLimit::Packets(e), QueueLimit::Packets(q)) => e > q,
                (QueueLimit::Bytes(e), QueueLimit::Bytes(q)) => e > q,
                _ => false,
            };
            if above {
                out.push(ParamProblem::EcnAboveQueue {
                    ecn,
                    queue,
                    default_queue: self.queue.is_none(),
                });
            }
        }
        out
    }

    /// What a link with these parameters needs to carry it (see
    /// [`Shaping`]). A parameter written as zero (`delay = "0ms"`, `loss =
    /// "0%"`) asks for nothing; a queue or ECN threshold only acts with a
    /// rate.
    pub fn shaping(&self) -> Shaping {
        let zero = |p: Option<LossProb>| p.is_none_or(|p| p.0 <= 0.0);
        let beyond_rate = self.delay.is_some_and(|d| !d.is_zero())
            || self.jitter.is_some_and(|j| !j.is_zero())
            || self.loss.is_some_and(|l| !l.is_zero())
            || !zero(self.corrupt)
            || !zero(self.duplicate);
        if beyond_rate || (self.rate.is_some() && self.ecn.is_some()) {
            Shaping::Engine
        } else if self.rate.is_some() {
            Shaping::Rate
        } else {
            Shaping::None
        }
    }

    /// True when some property needs an impairment engine (everything but
    /// MTU; `jitter_distribution` and `reorder` only qualify `jitter`).
    pub fn has_impairments(&self) -> bool {
        self.rate.is_some()
            || self.delay.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.corrupt.is_some()
            || self.duplicate.is_some()
            || self.queue.is_some()
            || self.ecn.is_some()
    }
}

/// What carries a link, by its parameters ([`LinkParams::shaping`]): the
/// one rule `up` and the machine plan share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaping {
    /// Nothing to apply: a plain veth pair.
    None,
    /// A rate and a queue, nothing else: the kernel's token bucket can
    /// shape it on both ends.
    Rate,
    /// Delay, jitter, loss, corruption, duplication or ECN marking: a link
    /// engine (or netem).
    Engine,
}

/// Prints the fields that are set as `key=value` pairs in field order,
/// separated by spaces, values in scenario syntax (`delay=10ms loss=1%`);
/// nothing when no field is set.
impl LinkParams {
    /// Every parameter set, as `(key, value)` in scenario syntax and field
    /// order (`[("delay", "5ms"), ("loss", "0.1%")]`).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let LinkParams {
            rate,
            delay,
            jitter,
            jitter_distribution,
            reorder,
            loss,
            corrupt,
            duplicate,
            queue,
            ecn,
            mtu,
        } = self;
        let values: [Option<String>; 11] = [
            rate.map(|v| v.to_string()),
            delay.map(|v| v.to_string()),
            jitter.map(|v| v.to_string()),
            jitter_distribution.map(|v| v.to_string()),
            reorder.map(|v| v.to_string()),
            loss.map(|v| v.to_string()),
            corrupt.map(|v| v.to_string()),
            duplicate.map(|v| v.to_string()),
            queue.map(|v| v.to_string()),
            ecn.map(|v| v.to_string()),
            mtu.map(|v| v.to_string()),
        ];
        LinkParams::KEYS
            .into_iter()
            .zip(values)
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect()
    }
}

impl fmt::Display for LinkParams {
    /// `key=value` for every parameter set, space-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.pairs().into_iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// A rule of [`LinkParams::check`] that a set of link parameters breaks.
/// `Display` says what is wrong and what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamProblem {
    /// `queue` without `rate`.
    QueueWithoutRate,
    /// `ecn` without `rate`.
    EcnWithoutRate,
    /// `ecn` deeper than the queue can get.
    EcnAboveQueue {
        /// The ECN threshold.
        ecn: QueueLimit,
        /// The queue limit it exceeds.
        queue: QueueLimit,
        /// True when `queue` is [`LinkParams::DEFAULT_QUEUE`] because none
        /// is set.
        default_queue: bool,
    },
}

impl ParamProblem {
    /// The key whose value is wrong (`queue` or `ecn`).
    pub fn key(&self) -> &'static str {
        match self {
            ParamProblem::QueueWithoutRate => "queue",
            ParamProblem::EcnWithoutRate | ParamProblem::EcnAboveQueue { .. } => "ecn",
        }
    }
}

impl fmt::Display for ParamProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamProblem::QueueWithoutRate => f.write_str(
                "`queue` is set but `rate` is not: a queue is drained at the link's rate; \
                 set a `rate` (e.g. 10gbit) or remove `queue`",
            ),
            ParamProblem::EcnWithoutRate => f.write_str(
                "`ecn` is set but `rate` is not: ECN marks packets when the queue drained at \
                 `rate` is at least this deep; set a `rate` (e.g. 10gbit) or remove `ecn`",
            ),
            ParamProblem::EcnAboveQueue {
                ecn,
                queue,
                default_queue,
            } => {
                let which = if *default_queue {
                    "the default queue limit"
                } else {
                    "the queue limit"
                };
                write!(
                    f,
                    "`ecn` threshold {ecn} is above {which} {queue}: nothing would ever be \
                     marked; set `ecn` to at most {queue} (e.g. a fifth of it) or raise `queue`"
                )
            }
        }
    }
}

/// Shape of the delay jitter. The jitter amount is the distribution's
/// spread: the half-width of the uniform distribution, the standard
/// deviation of the others (as in netem).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JitterDistribution {
    /// Uniform in `[-jitter, +jitter]`.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto (heavy tail), scaled to standard deviation `jitter`.
    Pareto,
    /// netem's blend of a normal and a Pareto value (iproute2's
    /// `paretonormal` table).
    ParetoNormal,
}

impl JitterDistribution {
    /// Every distribution, as written in scenarios.
    pub const ALL: [JitterDistribution; 4] = [
        JitterDistribution::Uniform,
        JitterDistribution::Normal,
        JitterDistribution::Pareto,
        JitterDistribution::ParetoNormal,
    ];

    /// The name used in scenario files.
    pub const fn as_str(self) -> &'static str {
        match self {
            JitterDistribution::Uniform => "uniform",
            JitterDistribution::Normal => "normal",
            JitterDistribution::Pareto => "pareto",
            JitterDistribution::ParetoNormal => "paretonormal",
        }
    }
}

impl fmt::Display for JitterDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JitterDistribution {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        JitterDistribution::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = JitterDistribution::ALL.iter().map(|d| d.as_str()).collect();
                UnitError::new(format!("unknown jitter distribution `{s}`"))
                    .help(crate::diag::choices_help(s, "distributions", &names))
            })
    }
}

impl Serialize for JitterDistribution {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JitterDistribution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|e: UnitError| de::Error::custom(e.full()))
    }
}

/// Packet loss model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Every frame is lost independently with this probability.
    /// Scenario syntax: `loss = "0.1%"`.
    Bernoulli(LossProb),
    /// Gilbert-Elliott two-state Markov chain (bursty loss). Before each
    /// frame the chain moves good->bad with probability `p` or bad->good
    /// with probability `r`; the frame is then lost with the probability of
    /// the state it is in. Scenario syntax:
    /// `loss = { p = "1%", r = "25%", bad = "100%", good = "0%" }`.
    GilbertElliott {
        /// Good -> bad transition probability, per frame.
        p: LossProb,
        /// Bad -> good transition probability, per frame (mean burst
        /// length `1/r` frames).
        r: LossProb,
        /// Loss probability in the bad state (default 100%).
        bad: LossProb,
        /// Loss probability in the good state (default 0%).
        good: LossProb,
    },
}

impl Loss {
    /// A Gilbert-Elliott chain with the default state losses (bad state
    /// loses everything, good state nothing): Gilbert's original model.
    pub const fn gilbert(p: LossProb, r: LossProb) -> Loss {
        Loss::GilbertElliott {
            p,
            r,
            bad: LossProb(1.0),
            good: LossProb::ZERO,
        }
    }

    /// Long-run fraction of frames lost.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::Bernoulli(p) => p.0,
            Loss::GilbertElliott { p, r, bad, good } => {
                if p.0 + r.0 == 0.0 {
                    // The chain never leaves the good state it starts in.
                    good.0
                } else {
                    let pi_bad = p.0 / (p.0 + r.0);
                    pi_bad * bad.0 + (1.0 - pi_bad) * good.0
                }
            }
        }
    }

    /// True when no frame can ever be lost.
    pub fn is_zero(&self) -> bool {
        match *self {
            Loss::Bernoulli(p) => p.0 == 0.0,
            Loss::GilbertElliott { p, bad, good, .. } => {
                good.0 == 0.0 && (p.0 == 0.0 || bad.0 == 0.0)
            }
        }
    }
}

impl From<LossProb> for Loss {
    fn from(p: LossProb) -> Loss {
        Loss::Bernoulli(p)
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loss::Bernoulli(p) => write!(f, "{p}"),
            Loss::GilbertElliott { p, r, bad, good } => write!(
                f,
                "{{ p = \"{p}\", r = \"{r}\", bad = \"{bad}\", good = \"{good}\" }}"
            ),
        }
    }
}

/// Keys of the Gilbert-Elliott `loss` table.
pub(crate) const GE_KEYS: &[&str] = &["p", "r", "bad", "good"];

impl FromStr for Loss {
    type Err = UnitError;

    /// A probability (`0.1%`) or a Gilbert-Elliott inline table
    /// (`{ p = "1%", r = "25%" }`), as [`fmt::Display`] prints them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if !t.starts_with('{') {
            return t.parse::<LossProb>().map(Loss::Bernoulli);
        }
        #[derive(Deserialize)]
        struct Wrap {
            v: Loss,
        }
        toml::from_str::<Wrap>(&format!("v = {t}"))
            .map(|w| w.v)
            .map_err(|e| {
                UnitError::new(format!("invalid loss `{t}`: {}", e.message().trim_end())).help(
                    "write a probability such as `0.1%` or a Gilbert-Elliott table such as \
                     `{ p = \"1%\", r = \"25%\", bad = \"100%\", good = \"0%\" }`",
                )
            })
    }
}

impl Serialize for Loss {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Loss::Bernoulli(p) => p.serialize(s),
            Loss::GilbertElliott { p, r, bad, good } => {
                let mut m = s.serialize_struct("GilbertElliott", 4)?;
                m.serialize_field("p", p)?;
                m.serialize_field("r", r)?;
                m.serialize_field("bad", bad)?;
                m.serialize_field("good", good)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Loss {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loss;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a probability or a Gilbert-Elliott table { p, r, bad, good }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Loss, E> {
                v.parse::<LossProb>()
                    .map(Loss::Bernoulli)
                    .map_err(|e| E::custom(e.full()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Loss, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Loss, A::Error> {
                let (mut p, mut r, mut bad, mut good) = (None, None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.as_str() {
                        "p" => &mut p,
                        "r" => &mut r,
                        "bad" => &mut bad,
                        "good" => &mut good,
                        other => return Err(de::Error::unknown_field(other, GE_KEYS)),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom(format!("duplicate key `{key}`")));
                    }
                    *slot = Some(map.next_value::<LossProb>()?);
                }
                Ok(Loss::GilbertElliott {
                    p: p.ok_or_else(|| de::Error::missing_field("p"))?,
                    r: r.ok_or_else(|| de::Error::missing_field("r"))?,
                    bad: bad.unwrap_or(LossProb(1.0)),
                    good: good.unwrap_or(LossProb::ZERO),
                })
            }
        }
        d.deserialize_any(V)
    }
}
