//! The scenario's `[[mirror]]`s and `[[capture]]`s, started on the link
//! engine when the daemon starts, each on the machine that taps its link:
//! mirrors send their copies out of their ports' near ends; captures write
//! pcapng files on threads of their own.

use std::sync::Arc;

use turbonet_injectors::Cause;
use turbonet_packetio::PacketSocket;

use crate::dataplane::plane::Tapping;
use crate::dataplane::taps::{Captured, Sink};

/// Starts the scenario's `[[mirror]]`s and `[[capture]]`s (`fresh`: the
/// daemon's first start; a restarted daemon appends to its captures' files
/// a new pcapng section). What cannot start is an event, not a failure of
/// the lab. Returns the threads writing the captures' files, which end
/// once the engine has stopped.
pub fn start_scenario(
    lab: &turbonet_topo::Lab,
    share: &turbonet_topo::machines::Share,
    carriers: &[crate::carrier::Carrier],
    state: &crate::state::LabState,
    tapper: &dyn Tapping,
    events: &crate::events::Events,
    fresh: bool,
) -> Vec<std::thread::JoinHandle<()>> {
    use crate::events::About;
    let report = |kind: &str, what: String, link: &str, result: Result<(), String>| {
        events.write_about(
            "daemon",
            kind,
            &what,
            result.as_ref().map(|_| ()).map_err(String::as_str),
            About::link(link),
        );
    };
    if !lab.mirrors.is_empty() {
        let engine = crate::names::engine_namespace(&lab.name);
        for (i, m) in lab.mirrors.iter().enumerate() {
            let link = lab.fabric.link(m.link);
            if !share.taps(link) {
                continue;
            }
            let (name, ifindex) = super::mirrors::near_end(carriers, i);
            let to = &lab.fabric.node(m.to).name;
            let started = turbonet_host::namespaces::open(&engine)
                .and_then(|ns| {
                    turbonet_host::namespaces::in_namespace(&ns, || PacketSocket::bind(ifindex))
                })
                .map_err(|e| format!("opening {name} in {engine}: {e}"))
                .and_then(|socket| {
                    tapper
                        .start(
                            link,
                            m.directions,
                            Sink::Mirror {
                                socket,
                                truncate: m.truncate.map(|t| t as usize),
                                pending: Vec::new(),
                            },
                        )
                        .map_err(|e| e.to_string())
                });
            report(
                "mirror",
                format!("mirror {} to {to} port {}", link.name, m.port),
                &link.name,
                started.map(drop),
            );
        }
    }
    let mut writers = Vec::new();
    for (c, path) in lab.captures.iter().zip(&state.captures) {
        let link = lab.fabric.link(c.link);
        if !share.taps(link) {
            continue;
        }
        let what = format!("capture {} into {}", link.name, path.display());
        let (tx, rx) = tokio::sync::mpsc::channel(65_536);
        let sink = Sink::Capture {
            tx,
            snaplen: c.snaplen as usize,
            missed: Arc::default(),
        };
        let names = link
            .ends
            .each_ref()
            .map(|e| lab.fabric.node(e.node).name.clone());
        let description = format!("turbonet lab {} link {}", lab.name, link.name);
        let opened = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(!fresh)
                    .truncate(fresh)
                    .open(path)
            });
        let started = opened
            .map_err(|e| format!("creating {}: {e}", path.display()))
            .and_then(|file| {
                let writer = crate::pcapng::Writer::new(
                    std::io::BufWriter::new(file),
                    &[
                        format!("{}->{}", names[0], names[1]),
                        format!("{}->{}", names[1], names[0]),
                    ],
                    &description,
                    c.snaplen,
                )
                .map_err(|e| e.to_string())?;
                let id = tapper
                    .start(link, c.directions, sink)
                    .map_err(|e| e.to_string())?;
                Ok((writer, id))
            });
        match started {
            Ok((writer, _)) => {
                writers.push(std::thread::spawn(move || write_capture(writer, rx)));
                report("capture", what, &link.name, Ok(()));
            }
            Err(e) => report("capture", what, &link.name, Err(e)),
        }
    }
    writers
}

/// Writes what a capture receives to its file until the engine lets go.
fn write_capture<W: std::io::Write>(
    mut writer: crate::pcapng::Writer<W>,
    mut rx: tokio::sync::mpsc::Receiver<Captured>,
) {
    while let Some(c) = rx.blocking_recv() {
        let comment = crate::pcapng::comment(
            c.dropped.map(Cause::name),
            c.marks.corrupted,
            c.marks.ecn_marked,
            c.marks.duplicate,
        );
        let record = crate::pcapng::Record {
            unix_ns: c.unix_ns,
            direction: u32::from(c.direction),
            data: &c.data,
            original_len: c.original_len,
            comment,
        };
        if writer.write(&record).is_err() {
            return;
        }
        // Flushed whenever the capture catches up, so the file is whole
        // between bursts.
        if rx.is_empty() && writer.flush().is_err() {
            return;
        }
    }
    let _ = writer.flush();
}
