//! `turbonet capture LINK`: what a link's receiving ends get, streamed by
//! the lab's daemon, written as pcapng or handed over frame by frame; on a
//! link the engine carries, the frames it dropped too, with why.

use std::io::Write;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::inspect::Running;
use crate::pcapng;
use turbonet_api::{self as api, proto};

/// What to capture.
#[derive(Debug, Clone)]
pub struct Options {
    /// The link.
    pub link: String,
    /// `a-b`, `b-a` or `both`.
    pub direction: String,
    /// Bytes kept of each frame (0: 65,535).
    pub snaplen: u32,
    /// Stop after this many frames (0: no limit).
    pub count: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// One frame, as `turbonet capture` shows it.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// When, seconds since the fabric was ready.
    pub t: f64,
    /// Where it came from and went.
    pub from: &'a str,
    /// ...
    pub to: &'a str,
    /// The bytes captured.
    pub data: &'a [u8],
    /// Its length on the wire.
    pub original_len: u32,
    /// What the link did to it (`dropped: loss`, `corrupted`, ...).
    pub note: Option<String>,
}

/// What a capture saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// The link.
    pub link: String,
    /// Frames captured.
    pub frames: u64,
    /// Of them, frames the link dropped, by cause.
    pub dropped_loss: u64,
    /// ...
    pub dropped_queue: u64,
    /// Frames the capture lost because its reader was too slow.
    pub missed: u64,
    /// It ended on Ctrl-C.
    pub interrupted: bool,
}

/// The daemon that captures `link`: this machine's; on a lab over several
/// machines, this one's if it carries the link (of a link cut between two
/// machines with no engine, each end sees both directions at its port),
/// else the machine that taps it for the scenario's captures, through its
/// worker ([`crate::parts::Parts::machine_of_link`]: the one with both
/// ends, or a cut link's owner).
fn carrier(running: &Running, link: &str) -> Result<api::Client> {
    let Some(parts) = crate::parts::Parts::of(running)? else {
        return Ok(api::Client::connect(&running.dir)?);
    };
    let here = parts.here();
    let m = if parts.machines_of_link(&running.lab, link)?.contains(&here) {
        here
    } else {
        parts.machine_of_link(&running.lab, link)?
    };
    parts.client(running, m)
}

/// Captures `options.link` of the running lab: each frame is written to
/// `pcap` (if any) and handed to `each`.
pub fn capture(
    running: &Running,
    options: &Options,
    pcap: Option<Box<dyn Write>>,
    mut each: impl FnMut(&Frame<'_>) -> Result<()>,
) -> Result<Summary> {
    let link = crate::lookup::link(&running.lab, &options.link)?;
    let names = link
        .ends
        .each_ref()
        .map(|e| running.lab.fabric.node(e.node).name.clone());
    let directions = [
        format!("{}->{}", names[0], names[1]),
        format!("{}->{}", names[1], names[0]),
    ];
    let snaplen = if options.snaplen == 0 {
        65_535
    } else {
        options.snaplen
    };
    let mut writer = match pcap {
        Some(out) => Some(pcapng::Writer::new(
            out,
            &directions,
            &format!("turbonet lab {} link {}", running.lab.name, link.name),
            snaplen,
        )?),
        None => None,
    };
    let epoch = running
        .dir
        .load()?
        .and_then(|s| s.epoch_unix)
        .unwrap_or_else(crate::events::unix_now);
    let mut summary = Summary {
        link: link.name.clone(),
        ..Summary::default()
    };
    let until = options.duration.map(|d| Instant::now() + d);
    let request = proto::CaptureRequest {
        link: link.name.clone(),
        direction: options.direction.clone(),
        snaplen,
        count: options.count,
    };
    let mut client = carrier(running, &link.name)?;
    let interrupted = client.capture(request, until, |c| {
        let d = (c.direction as usize).min(1);
        let dropped = (!c.dropped.is_empty()).then_some(c.dropped.as_str());
        match dropped {
            Some("loss") => summary.dropped_loss += 1,
            Some(_) => summary.dropped_queue += 1,
            None => {}
        }
        summary.frames += 1;
        summary.missed = c.missed;
        let note = pcapng::comment(dropped, c.corrupted, c.ecn_marked, c.duplicate);
        if let Some(w) = &mut writer {
            w.write(&pcapng::Record {
                unix_ns: i128::from(c.unix_ns),
                direction: d as u32,
                data: &c.data,
                original_len: c.original_len,
                comment: note.clone(),
            })?;
            // Written as it comes: a reader on a pipe sees each frame.
            w.flush()?;
        }
        each(&Frame {
            t: c.unix_ns as f64 / 1e9 - epoch,
            from: &names[d],
            to: &names[1 - d],
            data: &c.data,
            original_len: c.original_len,
            note,
        })?;
        Ok::<_, Error>(true)
    })?;
    summary.interrupted = interrupted;
    if let Some(w) = &mut writer {
        w.flush()?;
    }
    Ok(summary)
}

/// A frame in a few words, as tcpdump would say it: `ARP who-has
/// 10.0.0.1 tell 10.0.0.2`, `10.0.0.2 > 10.0.0.1: ICMP echo request`,
/// `10.0.0.2.41000 > 10.0.0.1.5201: TCP [S]`, `... UDP 1472`.
pub fn describe(frame: &[u8]) -> String {
    use std::net::Ipv4Addr;
    let Some(ethertype) = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return format!("{} bytes", frame.len());
    };
    let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    match ethertype {
        0x0806 if frame.len() >= 42 => {
            let op = u16::from_be_bytes([frame[20], frame[21]]);
            let (sender, target) = (ip(&frame[28..32]), ip(&frame[38..42]));
            match op {
                1 => format!("ARP who-has {target} tell {sender}"),
                2 => format!("ARP {sender} is-at {}", mac(&frame[22..28])),
                _ => format!("ARP op {op}"),
            }
        }
        0x0800 if frame.len() >= 34 => {
            let header = usize::from(frame[14] & 0x0f) * 4;
            let (src, dst) = (ip(&frame[26..30]), ip(&frame[30..34]));
            let l4 = frame.get(14 + header..).unwrap_or_default();
            let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
            let port =
                |b: &[u8], at: usize| b.get(at..at + 2).map(|p| u16::from_be_bytes([p[0], p[1]]));
            match frame[23] {
                1 => {
                    let kind = match l4.first() {
                        Some(0) => "echo reply".to_owned(),
                        Some(8) => "echo request".to_owned(),
                        Some(3) => "unreachable".to_owned(),
                        Some(11) => "time exceeded".to_owned(),
                        Some(t) => format!("type {t}"),
                        None => String::new(),
                    };
                    format!("{src} > {dst}: ICMP {kind}")
                }
                6 => {
                    let flags = l4.get(13).copied().unwrap_or(0);
                    let names: String = [
                        (0x02, 'S'),
                        (0x10, '.'),
                        (0x01, 'F'),
                        (0x04, 'R'),
                        (0x08, 'P'),
                    ]
                    .iter()
                    .filter(|(bit, _)| flags & bit != 0)
                    .map(|(_, c)| *c)
                    .collect();
                    let data = total.saturating_sub(
                        header + usize::from(l4.get(12).copied().unwrap_or(0) >> 4) * 4,
                    );
                    format!(
                        "{src}.{} > {dst}.{}: TCP [{names}] {data}",
                        port(l4, 0).unwrap_or(0),
                        port(l4, 2).unwrap_or(0)
                    )
                }
                17 => format!(
                    "{src}.{} > {dst}.{}: UDP {}",
                    port(l4, 0).unwrap_or(0),
                    port(l4, 2).unwrap_or(0),
                    total.saturating_sub(header + 8)
                ),
                p => format!("{src} > {dst}: IP protocol {p}"),
            }
        }
        0x86dd => "IPv6".to_owned(),
        other => format!("ethertype 0x{other:04x}, {} bytes", frame.len()),
    }
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Summary {
    /// In a line, for people.
    pub fn line(&self) -> String {
        let mut parts = vec![format!("{} frames captured on {}", self.frames, self.link)];
        if self.dropped_loss + self.dropped_queue > 0 {
            parts.push(format!(
                "{} of them dropped by the link ({} loss, {} queue)",
                self.dropped_loss + self.dropped_queue,
                self.dropped_loss,
                self.dropped_queue
            ));
        }
        if self.missed > 0 {
            parts.push(format!(
                "{} frames missed: the capture's reader was too slow",
                self.missed
            ));
        }
        parts.join("; ")
    }
}

/// The error for an output file that cannot be created.
pub fn output_error(path: &std::path::Path, e: &std::io::Error) -> Error {
    Error::Invalid(format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_described_as_tcpdump_would() {
        // Ethernet + IPv4 (20 bytes) + ICMP echo request.
        let mut icmp = vec![0u8; 14 + 20 + 8];
        icmp[12..14].copy_from_slice(&[0x08, 0x00]);
        icmp[14] = 0x45;
        icmp[16..18].copy_from_slice(&28u16.to_be_bytes());
        icmp[23] = 1;
        icmp[26..30].copy_from_slice(&[10, 0, 0, 2]);
        icmp[30..34].copy_from_slice(&[10, 0, 0, 1]);
        icmp[34] = 8;
        assert_eq!(describe(&icmp), "10.0.0.2 > 10.0.0.1: ICMP echo request");
        let mut udp = icmp.clone();
        udp[23] = 17;
        udp[16..18].copy_from_slice(&(20u16 + 8 + 100).to_be_bytes());
        udp[34..36].copy_from_slice(&5000u16.to_be_bytes());
        udp[36..38].copy_from_slice(&5201u16.to_be_bytes());
        assert_eq!(describe(&udp), "10.0.0.2.5000 > 10.0.0.1.5201: UDP 100");
        assert_eq!(describe(&[0u8; 4]), "4 bytes");
    }
}
