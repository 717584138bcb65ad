//! `turbonet check`: every host reaches every other host.
//!
//! One raw ICMP socket per host, created inside the host's namespace. Echo
//! requests to every address of every other host go out in rounds; replies
//! are matched by identifier and a payload that names the pair, so thousands
//! of probes share a few sockets. Pairs still unanswered are retried each
//! round (the first packets to a neighbour may be dropped while ARP
//! resolves).

use std::collections::HashSet;
use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

use turbonet_packetio::checksum::internet_checksum;

use crate::render::{count, table};
use crate::{fabric, lab, netns};

const ROUNDS: u32 = 4;
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// `ICMP_FILTER` option of `SOL_RAW` sockets (linux/icmp.h).
const ICMP_FILTER: libc::c_int = 1;

/// One probe: from a host to one address of another host.
struct Probe {
    from: usize,
    to: usize,
    addr: Ipv4Addr,
}

#[derive(Debug, Serialize)]
struct Failure {
    from: String,
    to: String,
    address: Ipv4Addr,
}

#[derive(Debug, Serialize)]
struct Report {
    lab: String,
    hosts: usize,
    probes: usize,
    reachable: usize,
    seconds: f64,
    failures: Vec<Failure>,
}

/// `turbonet check`.
pub fn check(lab_name: Option<&str>, timeout: f64, json: bool) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    let lab = lab::saved_lab(&dir)?;
    if lab.target == turbonet_topo::Target::P4rt && !crate::p4rt::switches::local(&lab) {
        anyhow::bail!(
            "`check` pings between the hosts' namespaces; on target \"p4rt\" the hosts are the \
             servers cabled to the switches' host ports (`turbonet plan` lists them): ping \
             from those"
        );
    }
    let hosts: Vec<_> = lab.fabric.hosts().collect();
    let addrs: Vec<Vec<Ipv4Addr>> = hosts
        .iter()
        .map(|h| {
            let mut a: Vec<Ipv4Addr> = lab
                .fabric
                .ports(h.id)
                .map(|(_, local, _)| local.addr.addr())
                .collect();
            a.sort();
            a.dedup();
            a
        })
        .collect();
    let probes: Vec<Probe> = (0..hosts.len())
        .flat_map(|from| {
            let addrs = &addrs;
            (0..hosts.len())
                .filter(move |&to| to != from)
                .flat_map(move |to| addrs[to].iter().map(move |&addr| Probe { from, to, addr }))
        })
        .collect();

    let start = Instant::now();
    let sockets = hosts
        .iter()
        .map(|h| {
            let ns_name = fabric::ns_name(&lab.name, &h.name);
            let ns =
                netns::open(&ns_name).with_context(|| format!("opening namespace {ns_name}"))?;
            netns::in_namespace(&ns, icmp_socket)
                .with_context(|| format!("ICMP socket in {}", h.name))
        })
        .collect::<Result<Vec<_>>>()?;

    let ident = (std::process::id() & 0xffff) as u16;
    let mut answered = vec![false; probes.len()];
    let wait = Duration::from_secs_f64(timeout.max(0.05));
    let per_host: Vec<Vec<usize>> = {
        let mut v = vec![Vec::new(); hosts.len()];
        for (i, p) in probes.iter().enumerate() {
            v[p.from].push(i);
        }
        v
    };
    let mut send_errors = 0usize;
    for round in 0..ROUNDS {
        for (host, list) in per_host.iter().enumerate() {
            for chunk in list.chunks(128) {
                for &i in chunk.iter().filter(|&&i| !answered[i]) {
                    let packet = echo_request(ident, round as u16, i as u32);
                    let to = SocketAddrV4::new(probes[i].addr, 0);
                    // A full send buffer is a lost probe; the next round retries.
                    if let Err(e) = sockets[host].send_to(&packet, &to.into()) {
                        tracing::debug!("probe from {}: {e}", hosts[host].name);
                        send_errors += 1;
                    }
                }
                // Replies come back to the sender: keep its buffer drained.
                drain(&sockets[host..=host], ident, &mut answered);
            }
        }
        // Wait for stragglers: later rounds wait longer.
        let round_end = Instant::now() + wait.mul_f64(f64::from(round + 1) / f64::from(ROUNDS));
        while Instant::now() < round_end && answered.iter().any(|a| !a) {
            wait_readable(
                &sockets,
                round_end.saturating_duration_since(Instant::now()),
            )?;
            drain(&sockets, ident, &mut answered);
        }
        tracing::info!(
            round,
            send_errors,
            answered = answered.iter().filter(|a| **a).count(),
            "round done"
        );
        if answered.iter().all(|a| *a) {
            break;
        }
    }

    let failures: Vec<Failure> = probes
        .iter()
        .zip(&answered)
        .filter(|(_, ok)| !**ok)
        .map(|(p, _)| Failure {
            from: hosts[p.from].name.clone(),
            to: hosts[p.to].name.clone(),
            address: p.addr,
        })
        .collect();
    let report = Report {
        lab: lab.name.clone(),
        hosts: hosts.len(),
        probes: probes.len(),
        reachable: probes.len() - failures.len(),
        seconds: start.elapsed().as_secs_f64(),
        failures,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(report: &Report) {
    let verdict = if report.failures.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    println!(
        "check {verdict}: {}/{} probes answered between {} hosts of lab {} in {:.2} s",
        count(report.reachable),
        count(report.probes),
        count(report.hosts),
        report.lab,
        report.seconds
    );
    if !report.failures.is_empty() {
        let shown = report.failures.iter().take(20);
        println!(
            "{}",
            table(
                &["from", "to", "address"],
                shown.map(|f| vec![f.from.clone(), f.to.clone(), f.address.to_string()]),
                &[],
            )
        );
        if report.failures.len() > 20 {
            println!(
                "... and {} more (--json lists all)",
                report.failures.len() - 20
            );
        }
        let unreachable: HashSet<&str> = report.failures.iter().map(|f| f.to.as_str()).collect();
        println!(
            "{} hosts could not be reached from somewhere",
            unreachable.len()
        );
    }
}

/// A non-blocking raw ICMP socket in the calling thread's namespace.
fn icmp_socket() -> io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    socket.set_nonblocking(true)?;
    // A raw ICMP socket also sees the echo requests other hosts send to this
    // one; filter everything but echo replies so they cannot crowd ours out
    // of the receive buffer (ICMP_FILTER: a set bit drops that type).
    let filter: u32 = !(1 << ECHO_REPLY);
    // SAFETY: setsockopt with a valid fd and a correctly sized u32 option.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_RAW,
            ICMP_FILTER,
            (&filter as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Room for a reply from every other host of a large fabric.
    let _ =
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20));
    Ok(socket)
}

/// An ICMP echo request whose payload carries the probe index.
fn echo_request(ident: u16, seq: u16, probe: u32) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[0] = ECHO_REQUEST;
    p[4..6].copy_from_slice(&ident.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..12].copy_from_slice(&probe.to_be_bytes());
    p[12..16].copy_from_slice(b"tnet");
    let sum = internet_checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// Reads every pending reply on every socket and marks its probe answered.
fn drain(sockets: &[Socket], ident: u16, answered: &mut [bool]) {
    let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
    for socket in sockets {
        while let Ok((n, _)) = socket.recv_from(&mut buf) {
            // SAFETY: recv_from initialised the first n bytes.
            let packet: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), n) };
            if let Some(probe) = parse_reply(packet, ident)
                && let Some(a) = answered.get_mut(probe as usize)
            {
                *a = true;
            }
        }
    }
}

/// The probe index of an echo reply to us (raw sockets see the IP header).
fn parse_reply(packet: &[u8], ident: u16) -> Option<u32> {
    let ihl = usize::from(packet.first()? & 0x0f) * 4;
    let icmp = packet.get(ihl..)?;
    if icmp.len() < 16
        || icmp[0] != ECHO_REPLY
        || icmp[4..6] != ident.to_be_bytes()
        || &icmp[12..16] != b"tnet"
    {
        return None;
    }
    Some(u32::from_be_bytes(icmp[8..12].try_into().ok()?))
}

fn wait_readable(sockets: &[Socket], timeout: Duration) -> Result<()> {
    let mut fds: Vec<PollFd<'_>> = sockets
        .iter()
        .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
        .collect();
    let ms = timeout.as_millis().clamp(1, 1000) as u16;
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request_checksum_verifies() {
        let p = echo_request(0x1234, 2, 77);
        assert_eq!(
            internet_checksum(&p),
            0,
            "a packet with its checksum sums to zero"
        );
        let mut reply = vec![0x45u8; 20];
        reply[0] = 0x45;
        let mut icmp = p.to_vec();
        icmp[0] = ECHO_REPLY;
        reply.extend_from_slice(&icmp);
        assert_eq!(parse_reply(&reply, 0x1234), Some(77));
        assert_eq!(parse_reply(&reply, 0x1235), None);
        assert_eq!(parse_reply(&reply[..25], 0x1234), None);
    }
}
