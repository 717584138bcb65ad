//! The link engine's notes as the lab's events: a queue building up past
//! its threshold (`queue-high`) and draining (`queue-low`), drops beginning
//! (`drops-begin`) and a burst of them ending (`drops-end`), per link
//! direction, stamped with the engine's time (when it happened, not when
//! the daemon wrote it down).

use turbonet_injectors::Note;
use turbonet_injectors::units::QueueLimit;

use turbonet_packetio::Clock;

use super::engine::EngineNote;
use crate::events::{About, Events};

/// Writes one note of the engine whose clock is `clock`; `ends` names
/// each engine link and the nodes at its ends.
pub(super) fn write(
    events: &Events,
    ends: &[(String, [String; 2])],
    clock: Clock,
    note: &EngineNote,
) {
    let Some((link, nodes)) = ends.get(note.link) else {
        return;
    };
    let (from, to) = (&nodes[note.direction], &nodes[1 - note.direction]);
    let about = About {
        from: Some(from.clone()),
        to: Some(to.clone()),
        ..About::link(link)
    };
    let limit = |t: QueueLimit| match t {
        QueueLimit::Packets(n) => (u64::from(n), "packets"),
        QueueLimit::Bytes(n) => (n, "bytes"),
    };
    let unix = |ns: u64| clock.unix_nanos(ns) as f64 / 1e9;
    let (kind, text, about) = match note.note {
        Note::QueueHigh { depth, threshold } | Note::QueueLow { depth, threshold } => {
            let high = matches!(note.note, Note::QueueHigh { .. });
            let (threshold, unit) = limit(threshold);
            (
                if high { "queue-high" } else { "queue-low" },
                format!(
                    "{link} {from}->{to}: queue {} {depth} {unit} (threshold {threshold})",
                    if high { "up to" } else { "down to" }
                ),
                About {
                    value: Some(depth),
                    threshold: Some(threshold),
                    unit: Some(unit.to_owned()),
                    ..about
                },
            )
        }
        Note::DropsBegin { cause } => (
            "drops-begin",
            format!("{link} {from}->{to}: frames dropped ({})", cause.name()),
            About {
                cause: Some(cause.name().to_owned()),
                ..about
            },
        ),
        Note::DropsEnd {
            cause,
            count,
            since,
            last,
        } => (
            "drops-end",
            format!(
                "{link} {from}->{to}: {count} frame{} dropped ({}) over {:.3} s",
                if count == 1 { "" } else { "s" },
                cause.name(),
                (last - since) as f64 / 1e9
            ),
            About {
                cause: Some(cause.name().to_owned()),
                value: Some(count),
                unit: Some("frames".to_owned()),
                since: Some(unix(since) - events.ready()),
                ..about
            },
        ),
    };
    events.write_at(unix(note.at), "engine", kind, &text, Ok(()), about);
}
