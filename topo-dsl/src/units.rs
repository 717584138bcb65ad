//! Units as types: rates, delays, probabilities, queue limits, sizes, MTUs.
//!
//! Every type parses from scenario syntax ([`FromStr`]), prints scenario
//! syntax ([`fmt::Display`]) such that `s.parse::<T>()?.to_string()` parses
//! back to the same value, and (de)serializes as that syntax. Parsing works on
//! exact decimal arithmetic: `1.5gbit` is exactly 1 500 000 000 bit/s.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Why a unit value did not parse, with a hint at valid syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UnitError {
    message: String,
    help: Option<String>,
}

impl UnitError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        UnitError {
            message: message.into(),
            help: None,
        }
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// What is wrong with the value.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What would be valid.
    pub fn hint(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// The message and the hint in one line, for serde errors.
    pub(crate) fn full(&self) -> String {
        match &self.help {
            Some(h) => format!("{}; {h}", self.message),
            None => self.message.clone(),
        }
    }
}

// ---------------------------------------------------------------------------
// Exact decimal numbers

/// A non-negative decimal number `mantissa * 10^-scale`.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    mantissa: u128,
    scale: u32,
}

impl Decimal {
    /// Multiplies by `factor` and returns the result if it is a whole number.
    fn times(self, factor: u128) -> Option<Result<u128, ()>> {
        let product = self.mantissa.checked_mul(factor)?;
        let div = 10u128.checked_pow(self.scale)?;
        if product % div == 0 {
            Some(Ok(product / div))
        } else {
            Some(Err(()))
        }
    }
}

/// Splits `s` into a leading decimal number and the rest (the unit).
/// Returns `None` when there is no number.
fn split_number(s: &str) -> Option<(Decimal, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut mantissa: u128 = 0;
    let mut scale = 0u32;
    let mut digits = 0;
    let mut seen_dot = false;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_digit() {
            // Saturate instead of overflowing; callers reject huge values.
            mantissa = mantissa
                .saturating_mul(10)
                .saturating_add(u128::from(c - b'0'));
            if seen_dot {
                scale += 1;
                if scale > 30 {
                    return None;
                }
            }
            digits += 1;
        } else if c == b'_' && digits > 0 {
            // TOML-like digit separators: 1_000mbit
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    Some((Decimal { mantissa, scale }, s[i..].trim_start()))
}

/// Formats `value / unit` as a short exact decimal (`1.5`, `10`, `0.001`).
fn format_ratio(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn check_sign(s: &str, what: &str, example: &str) -> Result<(), UnitError> {
    if s.starts_with('-') {
        return Err(UnitError::new(format!("{what} cannot be negative: `{s}`"))
            .help(format!("write a non-negative value such as `{example}`")));
    }
    Ok(())
}

/// A suggestion for a mistyped unit, from a list of (unit, canonical) pairs.
fn unit_suggestion(unit: &str, candidates: &[&str]) -> Option<String> {
    let lower = unit.to_ascii_lowercase();
    // `gbps` -> `gbit`, `mbits` -> `mbit`
    for stem in [
        lower.strip_suffix("bps"),
        lower.strip_suffix("bits"),
        lower.strip_suffix("b/s"),
    ]
    .into_iter()
    .flatten()
    {
        let guess = format!("{stem}bit");
        if candidates.contains(&guess.as_str()) {
            return Some(guess);
        }
    }
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), *c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.to_owned())
}

// ---------------------------------------------------------------------------
// Rate

/// Bandwidth in bits per second. Scenario syntax: `10gbit`, `100mbit`, `400G`.
///
/// Units: `bit`, `kbit`, `mbit`, `gbit`, `tbit` (case-insensitive, powers of
/// 1000) and the short forms `K`, `M`, `G`, `T`. Fractions are allowed when
/// the result is a whole number of bits: `1.5gbit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

const RATE_UNITS: &[(&str, u64)] = &[
    ("tbit", 1_000_000_000_000),
    ("gbit", 1_000_000_000),
    ("mbit", 1_000_000),
    ("kbit", 1_000),
    ("bit", 1),
];

const RATE_HELP: &str =
    "valid units: bit, kbit, mbit, gbit, tbit (also K/M/G/T), e.g. `10gbit`, `400G`, `1.5mbit`";

impl Rate {
    /// A rate of `bps` bits per second.
    pub const fn from_bits_per_sec(bps: u64) -> Self {
        Rate(bps)
    }

    /// A rate of `n` kbit/s.
    pub const fn from_kbit(n: u64) -> Self {
        Rate(n.saturating_mul(1_000))
    }

    /// A rate of `n` Mbit/s.
    pub const fn from_mbit(n: u64) -> Self {
        Rate(n.saturating_mul(1_000_000))
    }

    /// A rate of `n` Gbit/s.
    pub const fn from_gbit(n: u64) -> Self {
        Rate(n.saturating_mul(1_000_000_000))
    }

    /// Bits per second.
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }

    /// Bytes per second (rounded down).
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }

    /// Time to serialize `bytes` onto a link of this rate (rounded up to the
    /// next nanosecond). `None` for a zero rate.
    pub fn transmit_time(self, bytes: u64) -> Option<Delay> {
        if self.0 == 0 {
            return None;
        }
        let bits = u128::from(bytes) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.0));
        Some(Delay(u64::try_from(ns).unwrap_or(u64::MAX)))
    }
}

impl FromStr for Rate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        check_sign(s, "a rate", "10gbit")?;
        let Some((num, unit)) = split_number(s) else {
            return Err(UnitError::new(format!("invalid rate `{s}`")).help(RATE_HELP));
        };
        if unit.is_empty() {
            return Err(
                UnitError::new(format!("rate `{s}` has no unit")).help(format!(
                    "write the unit explicitly, e.g. `{s}mbit` or `{s}gbit`; {RATE_HELP}"
                )),
            );
        }
        let factor = match unit {
            "K" => Some(1_000),
            "M" => Some(1_000_000),
            "G" => Some(1_000_000_000),
            "T" => Some(1_000_000_000_000),
            _ => RATE_UNITS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(unit))
                .map(|(_, f)| *f),
        };
        let Some(factor) = factor else {
            let mut help = String::new();
            let names: Vec<&str> = RATE_UNITS.iter().rev().map(|(n, _)| *n).collect();
            if let Some(guess) = unit_suggestion(unit, &names) {
                help.push_str(&format!("did you mean `{guess}`? "));
            }
            help.push_str(RATE_HELP);
            return Err(UnitError::new(format!("unknown unit `{unit}` in rate `{s}`")).help(help));
        };
        match num.times(u128::from(factor)) {
            Some(Ok(0)) => Err(UnitError::new("a rate must be greater than zero")
                .help("remove the key to leave the link unshaped")),
            Some(Ok(bits)) => u64::try_from(bits).map(Rate).map_err(|_| {
                UnitError::new(format!("rate `{s}` is too large"))
                    .help("the largest rate is about 18446744tbit")
            }),
            Some(Err(())) => Err(UnitError::new(format!(
                "rate `{s}` is not a whole number of bits per second"
            ))
            .help("use a smaller unit, e.g. `1500kbit` instead of `1.5mbit`")),
            None => Err(UnitError::new(format!("rate `{s}` is too large"))),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = u128::from(self.0);
        for (name, factor) in RATE_UNITS {
            let factor = u128::from(*factor);
            if bits >= factor {
                return write!(f, "{}{name}", format_ratio(bits, factor));
            }
        }
        write!(f, "{bits}bit")
    }
}

// ---------------------------------------------------------------------------
// Delay

/// A duration with nanosecond resolution. Scenario syntax: `5us`, `1.5ms`, `0`.
///
/// Units: `ns`, `us` (also `µs`), `ms`, `s`. A bare `0` needs no unit.
/// Negative durations are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Delay(pub u64);

const DELAY_UNITS: &[(&str, u64)] = &[
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

const DELAY_HELP: &str = "valid units: ns, us, ms, s, e.g. `5us`, `1.5ms`, `0`";

impl Delay {
    /// No delay.
    pub const ZERO: Delay = Delay(0);

    /// `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Delay(ns)
    }

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Delay(us.saturating_mul(1_000))
    }

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Delay(ms.saturating_mul(1_000_000))
    }

    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        Delay(s.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole microseconds (rounded down).
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// Whole milliseconds (rounded down).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// As a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// True for a zero delay.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl From<Delay> for Duration {
    fn from(d: Delay) -> Duration {
        d.as_duration()
    }
}

impl TryFrom<Duration> for Delay {
    type Error = UnitError;

    fn try_from(d: Duration) -> Result<Self, Self::Error> {
        u64::try_from(d.as_nanos())
            .map(Delay)
            .map_err(|_| UnitError::new("duration too long (more than 584 years)"))
    }
}

impl FromStr for Delay {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        check_sign(s, "a delay", "5us")?;
        let Some((num, unit)) = split_number(s) else {
            return Err(UnitError::new(format!("invalid delay `{s}`")).help(DELAY_HELP));
        };
        if unit.is_empty() {
            if num.mantissa == 0 {
                return Ok(Delay(0));
            }
            return Err(UnitError::new(format!("delay `{s}` has no unit"))
                .help(format!("write e.g. `{s}us` or `{s}ms`; {DELAY_HELP}")));
        }
        let factor = match unit {
            "µs" | "μs" => Some(1_000),
            _ => DELAY_UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, f)| *f),
        };
        let Some(factor) = factor else {
            let mut help = String::new();
            let names: Vec<&str> = DELAY_UNITS.iter().rev().map(|(n, _)| *n).collect();
            let guess = match unit.to_ascii_lowercase().as_str() {
                "sec" | "secs" | "second" | "seconds" => Some("s".to_owned()),
                "msec" | "msecs" | "millis" => Some("ms".to_owned()),
                "usec" | "usecs" | "micros" => Some("us".to_owned()),
                "nsec" | "nsecs" | "nanos" => Some("ns".to_owned()),
                "min" | "m" | "h" => None,
                other => names
                    .iter()
                    .find(|n| **n == other)
                    .map(std::string::ToString::to_string)
                    .or_else(|| unit_suggestion(unit, &names)),
            };
            if let Some(guess) = guess {
                help.push_str(&format!("did you mean `{guess}`? "));
            }
            help.push_str(DELAY_HELP);
            return Err(UnitError::new(format!("unknown unit `{unit}` in delay `{s}`")).help(help));
        };
        match num.times(u128::from(factor)) {
            Some(Ok(ns)) => u64::try_from(ns)
                .map(Delay)
                .map_err(|_| UnitError::new(format!("delay `{s}` is too long"))),
            Some(Err(())) => Err(UnitError::new(format!(
                "delay `{s}` is not a whole number of nanoseconds"
            ))
            .help("the resolution is 1ns")),
            None => Err(UnitError::new(format!("delay `{s}` is too long"))),
        }
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0");
        }
        let ns = u128::from(self.0);
        for (name, factor) in DELAY_UNITS {
            let factor = u128::from(*factor);
            if ns >= factor {
                return write!(f, "{}{name}", format_ratio(ns, factor));
            }
        }
        write!(f, "{ns}ns")
    }
}

// ---------------------------------------------------------------------------
// LossProb

/// A probability in [0, 1]. Scenario syntax: `0.1%`, `1e-9`.
///
/// A value with `%` is a percentage (`0..=100%`); a bare number is a
/// probability (`0..=1`). Tiny values such as `1e-9` are kept exactly.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct LossProb(pub f64);

const LOSS_HELP: &str =
    "write a percentage such as `0.01%` (0% to 100%) or a probability such as `1e-9` (0 to 1)";

impl LossProb {
    /// Never lose.
    pub const ZERO: LossProb = LossProb(0.0);

    /// A probability in [0, 1]; `None` outside that range or for NaN.
    pub fn new(p: f64) -> Option<Self> {
        (0.0..=1.0).contains(&p).then_some(LossProb(p))
    }

    /// A percentage in [0, 100]; `None` outside that range or for NaN.
    pub fn from_percent(pct: f64) -> Option<Self> {
        (0.0..=100.0)
            .contains(&pct)
            .then_some(LossProb(pct / 100.0))
    }

    /// The probability.
    pub const fn probability(self) -> f64 {
        self.0
    }

    /// The probability in percent.
    pub fn percent(self) -> f64 {
        self.0 * 100.0
    }
}

impl FromStr for LossProb {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (number, percent) = match s.strip_suffix('%') {
            Some(n) => (n.trim_end(), true),
            None => (s, false),
        };
        if number.starts_with('-') {
            return Err(UnitError::new(format!("a loss cannot be negative: `{s}`")).help(LOSS_HELP));
        }
        let valid_chars = !number.is_empty()
            && number
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
        let value = valid_chars
            .then(|| number.parse::<f64>().ok())
            .flatten()
            .filter(|v| v.is_finite());
        let Some(value) = value else {
            return Err(UnitError::new(format!("invalid loss `{s}`")).help(LOSS_HELP));
        };
        if percent {
            // Divide by 100 in decimal (exponent - 2) so that `0.01%` is the
            // f64 nearest to 0.0001, exactly like `1e-4`.
            let (mantissa, exp) = match number.find(['e', 'E']) {
                Some(i) => (&number[..i], number[i + 1..].parse::<i32>().unwrap_or(0)),
                None => (number, 0),
            };
            let scaled = format!("{mantissa}e{}", exp.saturating_sub(2))
                .parse::<f64>()
                .unwrap_or(value / 100.0);
            LossProb::new(scaled)
                .ok_or_else(|| UnitError::new(format!("loss `{s}` is above 100%")).help(LOSS_HELP))
        } else {
            LossProb::new(value).ok_or_else(|| {
                UnitError::new(format!(
                    "loss `{s}` is above 1 (a bare number is a probability)"
                ))
                .help(format!("did you mean `{number}%`? {LOSS_HELP}"))
            })
        }
    }
}

impl fmt::Display for LossProb {
    /// A percentage (`0.1%`) that reads back as the same value, unless the
    /// probability (`1e-6`) is much shorter (what `1e-6 * 100` prints,
    /// `0.00009999999999999999%`, is not what anyone wrote).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = format!("{}%", self.0 * 100.0);
        let sci = format!("{:e}", self.0);
        if pct.len() <= sci.len() + 3 && pct.parse::<LossProb>().ok() == Some(*self) {
            f.write_str(&pct)
        } else {
            f.write_str(&sci)
        }
    }
}

// ---------------------------------------------------------------------------
// QueueLimit

/// A queue limit. Scenario syntax: `1000p` (packets), `64KiB`, `1MB` (bytes).
///
/// Packets: `p`, `pkt`, `pkts`, `packets`. Bytes: `B`, `KB`/`kB`, `MB`, `GB`
/// (powers of 1000) and `KiB`, `MiB`, `GiB` (powers of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes.
    Bytes(u64),
}

const QUEUE_HELP: &str =
    "write packets as `1000p` or bytes as `1500B`, `64KiB`, `1MiB`, `64KB`, `1MB`";

const QUEUE_BYTE_UNITS: &[(&str, u64)] = &[
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

impl QueueLimit {
    /// The limit in packets, if it is one.
    pub const fn packets(self) -> Option<u32> {
        match self {
            QueueLimit::Packets(n) => Some(n),
            QueueLimit::Bytes(_) => None,
        }
    }

    /// The limit in bytes, if it is one.
    pub const fn bytes(self) -> Option<u64> {
        match self {
            QueueLimit::Bytes(n) => Some(n),
            QueueLimit::Packets(_) => None,
        }
    }
}

impl FromStr for QueueLimit {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        check_sign(s, "a queue limit", "1000p")?;
        let Some((num, unit)) = split_number(s) else {
            return Err(UnitError::new(format!("invalid queue limit `{s}`")).help(QUEUE_HELP));
        };
        if unit.is_empty() {
            return Err(UnitError::new(format!("queue limit `{s}` has no unit"))
                .help(format!("write `{s}p` for packets or `{s}B` for bytes")));
        }
        let not_whole =
            || UnitError::new(format!("queue limit `{s}` is not a whole number")).help(QUEUE_HELP);
        let too_large = || UnitError::new(format!("queue limit `{s}` is too large"));
        let limit = if matches!(unit, "p" | "pkt" | "pkts" | "packet" | "packets") {
            match num.times(1) {
                Some(Ok(n)) => QueueLimit::Packets(u32::try_from(n).map_err(|_| too_large())?),
                Some(Err(())) => return Err(not_whole()),
                None => return Err(too_large()),
            }
        } else {
            let factor = if unit == "kB" {
                Some(1_000)
            } else {
                QUEUE_BYTE_UNITS
                    .iter()
                    .find(|(name, _)| *name == unit)
                    .map(|(_, f)| *f)
            };
            let Some(factor) = factor else {
                let names: Vec<&str> = ["p"]
                    .into_iter()
                    .chain(QUEUE_BYTE_UNITS.iter().map(|(n, _)| *n))
                    .collect();
                let mut help = String::new();
                if let Some(guess) = names.iter().find(|n| n.eq_ignore_ascii_case(unit)) {
                    help.push_str(&format!("did you mean `{guess}`? "));
                }
                help.push_str(QUEUE_HELP);
                return Err(
                    UnitError::new(format!("unknown unit `{unit}` in queue limit `{s}`"))
                        .help(help),
                );
            };
            match num.times(u128::from(factor)) {
                Some(Ok(n)) => QueueLimit::Bytes(u64::try_from(n).map_err(|_| too_large())?),
                Some(Err(())) => return Err(not_whole()),
                None => return Err(too_large()),
            }
        };
        if matches!(limit, QueueLimit::Packets(0) | QueueLimit::Bytes(0)) {
            return Err(UnitError::new("a queue limit must be at least 1")
                .help("remove the key for the default queue"));
        }
        Ok(limit)
    }
}

impl fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueLimit::Packets(n) => write!(f, "{n}p"),
            QueueLimit::Bytes(n) => {
                let (name, factor) = QUEUE_BYTE_UNITS
                    .iter()
                    .find(|(_, factor)| n >= *factor && n % *factor == 0)
                    .copied()
                    .unwrap_or(("B", 1));
                write!(f, "{}{name}", n / factor)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Bytes

/// An amount of data: a workload's message or flow size. Scenario syntax:
/// `1500` or `1500B`, `64KiB`, `16MiB`, `1GiB` (powers of 1024), `10KB`,
/// `10MB`, `1GB` (powers of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

const BYTES_HELP: &str = "write e.g. `1500`, `64KiB`, `16MiB`, `1GiB` or `10MB`";

impl FromStr for Bytes {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        check_sign(s, "a size", "16MiB")?;
        let Some((num, unit)) = split_number(s) else {
            return Err(UnitError::new(format!("invalid size `{s}`")).help(BYTES_HELP));
        };
        let factor = match unit {
            "" => Some(1),
            "kB" => Some(1_000),
            _ => QUEUE_BYTE_UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, f)| *f),
        };
        let Some(factor) = factor else {
            let mut help = String::new();
            if let Some((guess, _)) = QUEUE_BYTE_UNITS
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(unit))
            {
                help.push_str(&format!("did you mean `{guess}`? "));
            }
            help.push_str(BYTES_HELP);
            return Err(UnitError::new(format!("unknown unit `{unit}` in size `{s}`")).help(help));
        };
        match num.times(u128::from(factor)) {
            Some(Ok(n)) => u64::try_from(n)
                .map(Bytes)
                .map_err(|_| UnitError::new(format!("size `{s}` is too large"))),
            Some(Err(())) => Err(UnitError::new(format!(
                "size `{s}` is not a whole number of bytes"
            ))
            .help(BYTES_HELP)),
            None => Err(UnitError::new(format!("size `{s}` is too large"))),
        }
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let (name, factor) = QUEUE_BYTE_UNITS
            .iter()
            .find(|(_, factor)| n >= *factor && n.is_multiple_of(*factor))
            .copied()
            .unwrap_or(("B", 1));
        write!(f, "{}{name}", n / factor)
    }
}

// ---------------------------------------------------------------------------
// Mtu

/// Interface MTU in bytes (68..=65535).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mtu(pub u16);

impl Mtu {
    /// The smallest IPv4 MTU (RFC 791).
    pub const MIN: u16 = 68;
    /// Ethernet's default.
    pub const ETHERNET: Mtu = Mtu(1500);

    /// An MTU; `None` below 68.
    pub const fn new(bytes: u16) -> Option<Self> {
        if bytes >= Self::MIN {
            Some(Mtu(bytes))
        } else {
            None
        }
    }

    /// Bytes.
    pub const fn bytes(self) -> u16 {
        self.0
    }
}

impl FromStr for Mtu {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let help = "an MTU is a whole number of bytes from 68 to 65535, e.g. `1500` or `9000`";
        let digits = s.strip_suffix('B').unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(UnitError::new(format!("invalid MTU `{s}`")).help(help));
        }
        match digits.parse::<u64>() {
            Ok(n) if (u64::from(Mtu::MIN)..=65535).contains(&n) => Ok(Mtu(n as u16)),
            _ => Err(UnitError::new(format!("MTU `{s}` is out of range")).help(help)),
        }
    }
}

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

// ---------------------------------------------------------------------------
// serde: scenario syntax in both directions

/// Text of a scalar TOML/JSON value, for parsing with [`FromStr`].
struct ScalarText(String);

impl<'de> Deserialize<'de> for ScalarText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ScalarText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string in scenario syntax or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarText, E> {
                Ok(ScalarText(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

macro_rules! serde_via_text {
    ($($ty:ty),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = ScalarText::deserialize(d)?;
                text.0.parse().map_err(|e: UnitError| match e.hint() {
                    Some(h) => de::Error::custom(format!("{}; {h}", e.message())),
                    None => de::Error::custom(e.message()),
                })
            }
        }
    )*};
}

serde_via_text!(Rate, Delay, LossProb, QueueLimit, Bytes);

impl Serialize for Mtu {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u16(self.0)
    }
}

impl<'de> Deserialize<'de> for Mtu {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = ScalarText::deserialize(d)?;
        text.0.parse().map_err(|e: UnitError| match e.hint() {
            Some(h) => de::Error::custom(format!("{}; {h}", e.message())),
            None => de::Error::custom(e.message()),
        })
    }
}

// Switch chips.

/// The port speed a chip given only by its capacity has (`51.2t` is
/// 128 x 400G, the chip of HPN's ToRs and aggregation switches).
pub const DEFAULT_PORT_SPEED_BPS: u64 = 400_000_000_000;

/// Most ports a chip may declare.
const MAX_PORTS: u32 = 4096;

/// A switch chip: `ports` ports of `speed`. A port breaks out into
/// several slower ports whose speeds add up to its own (a 400G port
/// carries two 200G or four 100G links).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Chip {
    /// Its ports.
    pub ports: u32,
    /// The speed of each.
    pub speed: Rate,
}

impl Chip {
    /// Its switching capacity, bit/s.
    pub fn capacity(&self) -> u64 {
        u64::from(self.ports).saturating_mul(self.speed.bits_per_sec())
    }
}

/// Scenario syntax: `128x400gbit`.
impl fmt::Display for Chip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.ports, self.speed)
    }
}

/// Parses a rate, taking a one-letter unit in either case (`400g`,
/// `51.2T`) as that many bits per second, as chips are named.
fn rate(s: &str) -> Result<Rate, String> {
    let s = s.trim();
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[digits.len()..];
    let spelled = match unit.to_ascii_lowercase().as_str() {
        u @ ("k" | "m" | "g" | "t") => format!("{digits}{u}bit"),
        _ => s.to_owned(),
    };
    spelled
        .parse()
        .map_err(|e: UnitError| e.message().to_owned())
}

impl FromStr for Chip {
    type Err = String;

    /// `PORTSxSPEED` (`128x400g`, `64x800gbit`), or a capacity alone
    /// (`51.2t`, `12.8tbit`), which means ports of 400G.
    fn from_str(s: &str) -> Result<Chip, String> {
        let s = s.trim();
        if let Some((ports, speed)) = s.split_once(['x', 'X']) {
            let ports: u32 = ports
                .trim()
                .parse()
                .map_err(|_| format!("port count `{ports}` is not a whole number"))?;
            if ports == 0 || ports > MAX_PORTS {
                return Err(format!("{ports} ports: give 1 to {MAX_PORTS}"));
            }
            let speed = rate(speed).map_err(|e| format!("port speed: {e}"))?;
            if speed.bits_per_sec() == 0 {
                return Err("a port speed of 0".to_owned());
            }
            return Ok(Chip { ports, speed });
        }
        let capacity = rate(s)?;
        let bps = capacity.bits_per_sec();
        if bps == 0 || !bps.is_multiple_of(DEFAULT_PORT_SPEED_BPS) {
            return Err(format!(
                "a capacity alone means 400G ports, and {capacity} is not a whole number of them; \
                 write PORTSxSPEED, e.g. 64x800g"
            ));
        }
        let ports = bps / DEFAULT_PORT_SPEED_BPS;
        if ports > u64::from(MAX_PORTS) {
            return Err(format!("{capacity} is more than {MAX_PORTS} ports of 400G"));
        }
        Ok(Chip {
            ports: ports as u32,
            speed: Rate::from_bits_per_sec(DEFAULT_PORT_SPEED_BPS),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt<T: FromStr<Err = UnitError> + fmt::Display + PartialEq + fmt::Debug>(s: &str) -> T {
        let v: T = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        let again: T = v.to_string().parse().unwrap();
        assert_eq!(v, again, "{s} -> {v}");
        v
    }

    #[test]
    fn rates() {
        assert_eq!(rt::<Rate>("10gbit"), Rate(10_000_000_000));
        assert_eq!(rt::<Rate>("400G"), Rate(400_000_000_000));
        assert_eq!(rt::<Rate>("1.5mbit"), Rate(1_500_000));
        assert_eq!(rt::<Rate>("100Mbit"), Rate(100_000_000));
        assert_eq!(rt::<Rate>("1_000kbit"), Rate(1_000_000));
        assert_eq!(rt::<Rate>("7bit"), Rate(7));
        assert_eq!(rt::<Rate>("2T"), Rate(2_000_000_000_000));
        assert_eq!(Rate(10_000_000_000).to_string(), "10gbit");
        assert_eq!(Rate(1_500_000_000).to_string(), "1.5gbit");
        assert_eq!(Rate(1_234_567).to_string(), "1.234567mbit");
        assert_eq!(Rate::from_gbit(200).bits_per_sec(), 200_000_000_000);
        assert_eq!(Rate::from_mbit(8).bytes_per_sec(), 1_000_000);
        assert_eq!(
            Rate::from_gbit(10).transmit_time(1500),
            Some(Delay::from_nanos(1200))
        );
        for u in [1u64, 999, 1000, 1001, 123_456_789_012, u64::MAX] {
            assert_eq!(Rate(u).to_string().parse::<Rate>().unwrap(), Rate(u));
        }
    }

    #[test]
    fn rate_errors() {
        let e = "10gbps".parse::<Rate>().unwrap_err();
        assert_eq!(e.message(), "unknown unit `gbps` in rate `10gbps`");
        assert!(
            e.hint().unwrap().starts_with("did you mean `gbit`?"),
            "{e:?}"
        );
        assert!(
            e.hint()
                .unwrap()
                .contains("bit, kbit, mbit, gbit, tbit (also K/M/G/T)")
        );
        for bad in [
            "",
            "gbit",
            "-1gbit",
            "0gbit",
            "10",
            "1.5bit",
            "99999999tbit",
            "1..2gbit",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn delays() {
        assert_eq!(rt::<Delay>("5us"), Delay::from_micros(5));
        assert_eq!(rt::<Delay>("1.5ms"), Delay(1_500_000));
        assert_eq!(rt::<Delay>("0"), Delay::ZERO);
        assert_eq!(rt::<Delay>("0ms"), Delay::ZERO);
        assert_eq!(rt::<Delay>("2s"), Delay::from_secs(2));
        assert_eq!(rt::<Delay>("250ns"), Delay(250));
        assert_eq!(rt::<Delay>("3µs"), Delay(3_000));
        assert_eq!(Delay(1_500_000).to_string(), "1.5ms");
        assert_eq!(Delay(1_000_001).to_string(), "1.000001ms");
        assert_eq!(Delay::from_millis(3).as_nanos(), 3_000_000);
        assert_eq!(Delay::from_millis(3).as_micros(), 3_000);
        assert_eq!(
            Delay::from_micros(7).as_duration(),
            Duration::from_micros(7)
        );
        for u in [1u64, 999, 1_000, 1_001, 987_654_321_012, u64::MAX] {
            assert_eq!(Delay(u).to_string().parse::<Delay>().unwrap(), Delay(u));
        }
    }

    #[test]
    fn delay_errors() {
        let e = "-5us".parse::<Delay>().unwrap_err();
        assert!(e.message().contains("negative"), "{e}");
        let e = "5sec".parse::<Delay>().unwrap_err();
        assert!(e.hint().unwrap().starts_with("did you mean `s`?"), "{e:?}");
        for bad in ["", "5", "1.5ns", "us", "5 hours", "99999999999s"] {
            assert!(bad.parse::<Delay>().is_err(), "{bad}");
        }
    }

    #[test]
    fn losses() {
        assert_eq!(rt::<LossProb>("0.01%"), LossProb(0.0001));
        assert_eq!(rt::<LossProb>("1e-9"), LossProb(1e-9));
        assert_eq!(rt::<LossProb>("1e-7%"), LossProb(1e-9));
        assert_eq!(rt::<LossProb>("100%"), LossProb(1.0));
        assert_eq!(rt::<LossProb>("0"), LossProb(0.0));
        assert_eq!(rt::<LossProb>("0.5"), LossProb(0.5));
        assert_eq!(LossProb(0.0001).to_string(), "0.01%");
        for bad in ["", "%", "-1%", "101%", "1.5", "nan", "inf", "abc", "1e400"] {
            assert!(bad.parse::<LossProb>().is_err(), "{bad}");
        }
        for p in [1e-9, 3e-7, 0.123456789, 1.0 / 3.0, 0.07] {
            let v = LossProb(p);
            assert_eq!(v.to_string().parse::<LossProb>().unwrap(), v, "{p}");
        }
    }

    #[test]
    fn queues() {
        assert_eq!(rt::<QueueLimit>("1000p"), QueueLimit::Packets(1000));
        assert_eq!(rt::<QueueLimit>("64KiB"), QueueLimit::Bytes(65536));
        assert_eq!(rt::<QueueLimit>("1MB"), QueueLimit::Bytes(1_000_000));
        assert_eq!(rt::<QueueLimit>("1500B"), QueueLimit::Bytes(1500));
        assert_eq!(rt::<QueueLimit>("64kB"), QueueLimit::Bytes(64_000));
        assert_eq!(QueueLimit::Bytes(65536).to_string(), "64KiB");
        assert_eq!(QueueLimit::Bytes(2_000_000).to_string(), "2MB");
        for bad in ["", "0p", "1000", "1.5p", "10 apples", "99999999999p", "-3p"] {
            assert!(bad.parse::<QueueLimit>().is_err(), "{bad}");
        }
        let e = "64kib".parse::<QueueLimit>().unwrap_err();
        assert!(
            e.hint().unwrap().starts_with("did you mean `KiB`?"),
            "{e:?}"
        );
    }

    #[test]
    fn mtus() {
        assert_eq!(rt::<Mtu>("9000"), Mtu(9000));
        assert_eq!(rt::<Mtu>("68"), Mtu(68));
        assert_eq!(rt::<Mtu>("65535"), Mtu(65535));
        for bad in ["", "67", "65536", "-1", "1500.5", "abc", "0"] {
            assert!(bad.parse::<Mtu>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_parse_in_both_powers_and_print_back() {
        assert_eq!(rt::<Bytes>("1500"), Bytes(1500));
        assert_eq!(rt::<Bytes>("16MiB"), Bytes(16 << 20));
        assert_eq!(rt::<Bytes>("1.5KiB"), Bytes(1536));
        assert_eq!(rt::<Bytes>("10MB"), Bytes(10_000_000));
        assert_eq!(Bytes(1 << 30).to_string(), "1GiB");
        assert_eq!(Bytes(1001).to_string(), "1001B");
        let e = "4mib".parse::<Bytes>().unwrap_err();
        assert!(e.hint().unwrap().contains("did you mean `MiB`"), "{e:?}");
        for bad in ["-1", "0.5", "x", "1QB"] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_uses_scenario_syntax() {
        #[derive(Deserialize, Serialize, PartialEq, Debug)]
        struct P {
            rate: Rate,
            delay: Delay,
            loss: LossProb,
            queue: QueueLimit,
            mtu: Mtu,
        }
        let p: P = toml::from_str(
            "rate = \"10gbit\"\ndelay = \"5us\"\nloss = 0.001\nqueue = \"100p\"\nmtu = 9000\n",
        )
        .unwrap();
        assert_eq!(p.rate, Rate::from_gbit(10));
        assert_eq!(p.loss, LossProb(0.001));
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            json,
            r#"{"rate":"10gbit","delay":"5us","loss":"0.1%","queue":"100p","mtu":9000}"#
        );
        let back: P = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        let err = toml::from_str::<P>(
            "rate = \"10gbps\"\ndelay = \"5us\"\nloss = 0\nqueue = \"1p\"\nmtu = 1500\n",
        )
        .unwrap_err();
        assert!(err.message().contains("unknown unit `gbps`"), "{err}");
    }
}
