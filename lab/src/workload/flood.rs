//! Attack traffic (`kind = "flood"`): every rank sends UDP datagrams or TCP
//! SYNs to the target at a rate, from source addresses drawn (seeded) from
//! the declared `spoof` network, through a raw socket in its namespace;
//! the target counts what arrives with a raw socket of its own. Each
//! rank's flood is a flow of the report: packets sent, packets that got
//! through, and the fraction lost, which with filters at the edge is what
//! source-address validation stopped.
//!
//! A rank's packets all leave from source port `FIRST_PORT + rank` and
//! carry the workload's tag (the first four bytes of a datagram's payload,
//! a SYN's sequence number), so the target knows whose they are whatever
//! their source address, and floods running at once are told apart.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::task::JoinSet;
use turbonet_topo::experiment::{FloodProtocol, WorkloadKind};

use super::{Context, FlowReport, sockets};
use crate::error::{Error, Result};

/// The source port of rank 0's packets.
const FIRST_PORT: u16 = 40_000;
/// How long the target keeps counting after the last sender stopped.
const GRACE: Duration = Duration::from_millis(300);
/// Packets a sender writes before it yields.
const BURST: usize = 256;

/// An IPv4 header, then UDP or TCP, for one packet of a flood.
fn packet(
    protocol: FloodProtocol,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    (sport, dport): (u16, u16),
    size: u32,
    tag: u32,
) -> Vec<u8> {
    let l4 = match protocol {
        FloodProtocol::Udp => 8 + size as usize,
        FloodProtocol::Syn => 20,
    };
    let mut p = vec![0u8; 20 + l4];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + l4) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = match protocol {
        FloodProtocol::Udp => 17,
        FloodProtocol::Syn => 6,
    };
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    match protocol {
        FloodProtocol::Udp => {
            p[24..26].copy_from_slice(&(l4 as u16).to_be_bytes());
            // Checksum 0: none (RFC 768), as a flood tool would send.
            if size >= 4 {
                p[28..32].copy_from_slice(&tag.to_be_bytes());
            }
        }
        FloodProtocol::Syn => {
            p[24..28].copy_from_slice(&tag.to_be_bytes());
            p[32] = 5 << 4;
            p[33] = 0x02;
            p[34..36].copy_from_slice(&64_240u16.to_be_bytes());
            // The TCP checksum over the pseudo-header (RFC 793 §3.1).
            let mut pseudo = Vec::with_capacity(12 + 20);
            pseudo.extend_from_slice(&src.octets());
            pseudo.extend_from_slice(&dst.octets());
            pseudo.extend_from_slice(&[0, 6, 0, 20]);
            pseudo.extend_from_slice(&p[20..40]);
            let sum = turbonet_packetio::checksum::internet_checksum(&pseudo);
            p[36..38].copy_from_slice(&sum.to_be_bytes());
        }
    }
    // The kernel fills the IPv4 checksum and identification of a raw
    // socket's packets.
    p
}

/// A source address of `net` (or `own`), drawn from `rng`.
fn source(net: Option<ipnet::Ipv4Net>, own: Ipv4Addr, rng: &mut ChaCha8Rng) -> Ipv4Addr {
    match net {
        None => own,
        Some(net) => {
            let hosts = 1u64 << (32 - net.prefix_len());
            let offset = (u64::from(rng.next_u32()) % hosts) as u32;
            Ipv4Addr::from(u32::from(net.network()) | offset)
        }
    }
}

/// Runs a flood: every rank against the target.
pub(crate) async fn run(cx: &Context) -> Result<()> {
    let WorkloadKind::Flood {
        target,
        protocol,
        pps,
        duration,
        spoof,
        port,
        size,
    } = cx.workload.kind.clone()
    else {
        unreachable!("a flood workload")
    };
    let fabric = &cx.lab.fabric;
    let dst = fabric
        .ports(target)
        .next()
        .map(|(_, local, _)| local.addr.addr())
        .ok_or_else(|| Error::Invalid(format!("{} has no port", fabric.node(target).name)))?;
    let ranks = cx.workload.ranks.len();
    if ranks > usize::from(u16::MAX - FIRST_PORT) {
        return Err(Error::Invalid(format!(
            "a flood from {ranks} hosts: at most {}",
            u16::MAX - FIRST_PORT
        )));
    }
    let target_name = fabric.node(target).name.clone();
    let tag = (cx.workload.seed >> 32) as u32 ^ cx.workload.seed as u32;
    cx.update(|r| {
        r.flows = cx
            .workload
            .ranks
            .iter()
            .enumerate()
            .map(|(i, rank)| FlowReport {
                id: i,
                src: fabric.node(rank.host).name.clone(),
                dst: target_name.clone(),
                sport: FIRST_PORT + i as u16,
                dport: port,
                spoofed: spoof.map(|s| s.to_string()),
                ..FlowReport::default()
            })
            .collect();
    });

    // The target's counter first, listening before anything is sent.
    let ip_protocol = match protocol {
        FloodProtocol::Udp => libc::IPPROTO_UDP,
        FloodProtocol::Syn => libc::IPPROTO_TCP,
    };
    let receiver = sockets::in_host(cx, target, move || {
        let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(ip_protocol)))?;
        s.set_recv_buffer_size(16 << 20)?;
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        // Read through std's socket: plain byte buffers.
        Ok(std::net::UdpSocket::from(s))
    })
    .await?;
    let end = Instant::now() + duration.as_duration();
    let counting = tokio::task::spawn_blocking(move || {
        let mut got = vec![0u64; ranks];
        let mut buf = [0u8; 2048];
        let stop = end + GRACE;
        while Instant::now() < stop {
            let Ok(n) = receiver.recv(&mut buf) else {
                continue;
            };
            let p = &buf[..n];
            let header = usize::from(p.first().copied().unwrap_or(0) & 0x0f) * 4;
            let Some(l4) = p.get(header..header + 4) else {
                continue;
            };
            let (sport, dport) = (
                u16::from_be_bytes([l4[0], l4[1]]),
                u16::from_be_bytes([l4[2], l4[3]]),
            );
            if dport != port || sport < FIRST_PORT {
                continue;
            }
            let ours = match protocol {
                FloodProtocol::Udp => {
                    p.get(header + 8..header + 12) == Some(&tag.to_be_bytes()[..])
                }
                FloodProtocol::Syn => {
                    p.get(header + 4..header + 8) == Some(&tag.to_be_bytes()[..])
                        && p.get(header + 13).is_some_and(|f| f & 0x12 == 0x02)
                }
            };
            if let Some(c) = got.get_mut(usize::from(sport - FIRST_PORT))
                && ours
            {
                *c += 1;
            }
        }
        got
    });

    let mut sending = JoinSet::new();
    for (i, rank) in cx.workload.ranks.iter().enumerate() {
        let cx = cx.clone();
        let (host, own) = (rank.host, rank.addr);
        sending.spawn(async move {
            let socket = sockets::in_host(&cx, host, || {
                let s = Socket::new(
                    Domain::IPV4,
                    Type::RAW,
                    Some(Protocol::from(libc::IPPROTO_RAW)),
                )?;
                s.set_send_buffer_size(4 << 20)?;
                s.set_nonblocking(true)?;
                Ok(s)
            })
            .await?;
            let seed = turbonet_topo::seed::for_name(cx.workload.seed, &format!("flood/{i}"));
            let mut rng = ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed));
            let to = SockAddr::from(SocketAddrV4::new(dst, 0));
            let gap = Duration::from_secs_f64(1.0 / f64::from(pps));
            let start = cx.now();
            cx.update(|r| r.flows[i].start = start);
            let begin = Instant::now();
            let mut due = begin;
            let (mut sent, mut failed) = (0u64, 0u64);
            while due < end {
                let now = Instant::now();
                let mut burst = 0;
                while due <= now && due < end && burst < BURST {
                    let src = source(spoof, own, &mut rng);
                    let p = packet(protocol, src, dst, (FIRST_PORT + i as u16, port), size, tag);
                    match socket.send_to(&p, &to) {
                        Ok(_) => sent += 1,
                        Err(_) => failed += 1,
                    }
                    burst += 1;
                    due += gap;
                }
                if due <= Instant::now() {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep_until(due.min(end).into()).await;
                }
            }
            Ok::<_, Error>((i, sent, failed, begin.elapsed().as_secs_f64()))
        });
    }
    let mut warnings = Vec::new();
    let mut results = Vec::new();
    while let Some(done) = sending.join_next().await {
        let (i, sent, failed, seconds) =
            done.map_err(|e| Error::Failed(format!("a flood sender died: {e}")))??;
        if failed > 0 {
            warnings.push(format!(
                "{}: {failed} packets could not be sent (a full socket buffer on this machine)",
                cx.workload
                    .ranks
                    .get(i)
                    .map_or_else(String::new, |r| fabric.node(r.host).name.clone())
            ));
        }
        results.push((i, sent, seconds));
    }
    let got = counting
        .await
        .map_err(|e| Error::Failed(format!("the flood's counter died: {e}")))?;
    let length = match protocol {
        FloodProtocol::Udp => 20 + 8 + u64::from(size),
        FloodProtocol::Syn => 40,
    };
    cx.update(|r| {
        for &(i, sent, seconds) in &results {
            let f = &mut r.flows[i];
            let received = got[i].min(sent);
            f.sent = Some(sent);
            f.received = Some(received);
            f.loss = (sent > 0).then(|| 1.0 - received as f64 / sent as f64);
            f.bytes = received * length;
            f.seconds = seconds;
            f.goodput = if seconds > 0.0 {
                f.bytes as f64 * 8.0 / seconds
            } else {
                0.0
            };
        }
        r.warnings.extend(warnings);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syn_carries_its_checksum_and_spoofed_sources_stay_in_their_network() {
        let mut rng = ChaCha8Rng::from_seed([7; 32]);
        let src: Ipv4Addr = "10.200.1.2".parse().unwrap();
        let dst: Ipv4Addr = "10.128.0.3".parse().unwrap();
        let p = packet(FloodProtocol::Syn, src, dst, (40_001, 80), 0, 7);
        assert_eq!(p.len(), 40);
        assert_eq!(p[33], 0x02);
        // The pseudo-header and segment sum to 0xffff with the checksum in.
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.octets());
        pseudo.extend_from_slice(&dst.octets());
        pseudo.extend_from_slice(&[0, 6, 0, 20]);
        pseudo.extend_from_slice(&p[20..40]);
        assert_eq!(turbonet_packetio::checksum::internet_checksum(&pseudo), 0);
        let net: ipnet::Ipv4Net = "10.200.0.0/16".parse().unwrap();
        for _ in 0..1000 {
            assert!(net.contains(&source(Some(net), dst, &mut rng)));
        }
        assert_eq!(source(None, dst, &mut rng), dst);
        let udp = packet(FloodProtocol::Udp, src, dst, (40_000, 9), 18, 7);
        assert_eq!(
            (udp.len(), udp[9], &udp[28..32]),
            (20 + 8 + 18, 17, &7u32.to_be_bytes()[..])
        );
    }
}
