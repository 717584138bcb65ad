//! `turbonet watch`: every link direction's rates now, from two readings of
//! the daemon's counters (it refreshes them every 100 ms), busiest first,
//! with the links that are down. On a lab over several machines each link
//! is read from the machine that carries it, its rates over that machine's
//! interval.

use serde::Serialize;

use crate::error::Result;
use crate::inspect::{LinkShow, Running, read_links};
use crate::parts::Parts;
use turbonet_api as api;

/// One link direction over the last interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionRate {
    /// The link.
    pub link: String,
    /// Where its frames come from.
    pub from: String,
    /// Where they go.
    pub to: String,
    /// Whether the link is down.
    pub down: bool,
    /// Bits per second passed on (Ethernet frames).
    pub bits_per_second: f64,
    /// Frames per second passed on.
    pub frames_per_second: f64,
    /// Frames per second dropped by the loss model.
    pub loss_per_second: f64,
    /// Frames per second dropped at a full queue.
    pub queue_drops_per_second: f64,
    /// Frames per second marked CE.
    pub ecn_per_second: f64,
    /// Frames in its queue now.
    pub queue_packets: u64,
    /// The link's rate in force, bits per second (`None`: no rate).
    pub rate: Option<f64>,
    /// `bits_per_second` as a share of `rate`.
    pub utilisation: Option<f64>,
}

impl DirectionRate {
    /// True when anything moved or was dropped, or the link is down.
    pub fn is_active(&self) -> bool {
        self.down
            || self.frames_per_second > 0.0
            || self.loss_per_second > 0.0
            || self.queue_drops_per_second > 0.0
            || self.queue_packets > 0
    }
}

/// One reading of `watch`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frame {
    /// The lab.
    pub lab: String,
    /// When the counters were read, seconds on the lab's clock.
    pub t: f64,
    /// Seconds since the reading before.
    pub interval: f64,
    /// Links in the lab, and how many are down.
    pub links: usize,
    /// Links down.
    pub down: usize,
    /// Every direction, busiest first (by bits per second), then the down
    /// links' directions, then the idle ones, by name.
    pub directions: Vec<DirectionRate>,
}

/// Reads the counters again and again, and gives rates between readings.
#[derive(Debug)]
pub struct Watcher {
    counters: Counters,
    lab: String,
    epoch: f64,
    /// The last reading: each machine's (one when the lab is whole here).
    last: Option<Vec<Reading>>,
}

/// One daemon's reading: when it counted, and the links it carries.
type Reading = (f64, Vec<LinkShow>);

/// Where a watcher reads the counters.
#[derive(Debug)]
enum Counters {
    /// The daemon here, which carries the whole lab.
    Here(Box<api::Client>),
    /// Every machine's daemon, each for the links it carries.
    Parts {
        parts: Box<Parts>,
        running: Box<Running>,
    },
}

impl Counters {
    fn read(&mut self) -> Result<Vec<Reading>> {
        match self {
            Counters::Here(client) => Ok(vec![read_links(client, None)?]),
            Counters::Parts { parts, running } => parts.carried_links(running, None),
        }
    }
}

impl Watcher {
    /// A watcher of the running lab.
    pub fn new(running: &Running) -> Result<Watcher> {
        let epoch = running
            .dir
            .load()?
            .and_then(|s| s.epoch_unix)
            .unwrap_or_else(crate::events::unix_now);
        let counters = match Parts::of(running)? {
            Some(parts) => Counters::Parts {
                parts: Box::new(parts),
                running: Box::new(running.clone()),
            },
            None => Counters::Here(Box::new(api::Client::connect(&running.dir)?)),
        };
        Ok(Watcher {
            counters,
            lab: running.lab.name.clone(),
            epoch,
            last: None,
        })
    }

    /// Reads the counters; the rates since the reading before (`None` on
    /// the first reading, or when a daemon has not counted again since).
    pub fn read(&mut self) -> Result<Option<Frame>> {
        let now = self.counters.read()?;
        let frame = match &self.last {
            Some(before)
                if before.len() == now.len()
                    && before.iter().zip(&now).all(|((was, _), (at, _))| at > was) =>
            {
                Some(frame(&self.lab, self.epoch, before, &now))
            }
            Some(_) => return Ok(None),
            None => None,
        };
        self.last = Some(now);
        Ok(frame)
    }
}

/// The rates from the readings `before` to `now` (one per daemon, in the
/// same order), each over its daemon's interval; the frame's time and
/// interval are the latest reading's and the longest interval.
fn frame(lab: &str, epoch: f64, before: &[Reading], now: &[Reading]) -> Frame {
    let mut directions = Vec::new();
    let (mut t, mut interval) = (0.0f64, 0.0f64);
    for ((was, previous), (at, links)) in before.iter().zip(now) {
        rates(at - was, previous, links, &mut directions);
        t = t.max(at - epoch);
        interval = interval.max(at - was);
    }
    directions.sort_by(|a, b| {
        b.bits_per_second
            .total_cmp(&a.bits_per_second)
            .then(b.down.cmp(&a.down))
            .then_with(|| (&a.link, &a.from).cmp(&(&b.link, &b.from)))
    });
    let links = now.iter().flat_map(|(_, links)| links);
    Frame {
        lab: lab.to_owned(),
        t,
        interval,
        links: links.clone().count(),
        down: links.filter(|l| l.down).count(),
        directions,
    }
}

/// Each direction's rates from `before` to `now`, `interval` seconds
/// apart, into `directions`.
fn rates(
    interval: f64,
    before: &[LinkShow],
    now: &[LinkShow],
    directions: &mut Vec<DirectionRate>,
) {
    for link in now {
        let previous = before.iter().find(|b| b.link == link.link);
        let rate = link.params.rate.map(|r| r.0 as f64);
        for (d, dir) in link.directions.iter().enumerate() {
            let old = previous
                .and_then(|p| p.directions.get(d))
                .map(|o| &o.counters);
            let per_second = |f: fn(&turbonet_injectors::Counters) -> u64| {
                let was = old.map_or(0, f);
                f(&dir.counters).saturating_sub(was) as f64 / interval
            };
            let bits = per_second(|c| c.tx_bytes) * 8.0;
            directions.push(DirectionRate {
                link: link.link.clone(),
                from: dir.from.clone(),
                to: dir.to.clone(),
                down: link.down,
                bits_per_second: bits,
                frames_per_second: per_second(|c| c.tx_packets),
                loss_per_second: per_second(|c| c.dropped_loss),
                queue_drops_per_second: per_second(|c| c.dropped_queue),
                ecn_per_second: per_second(|c| c.ecn_marked),
                queue_packets: dir.counters.queue_packets,
                rate,
                utilisation: rate.filter(|r| *r > 0.0).map(|r| bits / r),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::DirectionView;
    use turbonet_topo::LinkParams;

    fn link(name: &str, down: bool, bytes: [u64; 2], rate: Option<&str>) -> LinkShow {
        let (a, b) = name.split_once("--").unwrap();
        let params = LinkParams {
            rate: rate.map(|r| r.parse().unwrap()),
            ..LinkParams::default()
        };
        LinkShow {
            link: name.to_owned(),
            engine: "userspace".to_owned(),
            why: String::new(),
            down,
            params: params.clone(),
            scenario: params,
            filters: Vec::new(),
            directions: (0..2)
                .map(|d| DirectionView {
                    from: if d == 0 { a } else { b }.to_owned(),
                    to: if d == 0 { b } else { a }.to_owned(),
                    counters: turbonet_injectors::Counters {
                        tx_bytes: bytes[d],
                        tx_packets: bytes[d] / 1000,
                        ..Default::default()
                    },
                    shortfall: crate::dataplane::plane::Shortfall::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn directions_come_busiest_first_then_down_links_and_rates_are_shares_of_the_link() {
        let before = vec![
            link("a--b", false, [0, 0], Some("10mbit")),
            link("c--d", false, [0, 0], None),
            link("e--f", false, [0, 0], None),
        ];
        let now = vec![
            link("a--b", false, [500_000, 0], Some("10mbit")),
            link("c--d", false, [0, 1_000_000], None),
            link("e--f", true, [0, 0], None),
        ];
        let f = frame("x", 7.5, &[(10.0, before)], &[(10.5, now)]);
        assert_eq!((f.t, f.interval), (3.0, 0.5));
        let order: Vec<(&str, &str)> = f
            .directions
            .iter()
            .map(|d| (d.link.as_str(), d.from.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("c--d", "d"),
                ("a--b", "a"),
                ("e--f", "e"),
                ("e--f", "f"),
                ("a--b", "b"),
                ("c--d", "c")
            ]
        );
        assert_eq!(f.directions[0].bits_per_second, 16e6);
        assert_eq!(f.directions[1].utilisation, Some(0.8));
        assert_eq!(f.directions[1].frames_per_second, 1000.0);
        assert_eq!((f.links, f.down), (3, 1));
        assert!(f.directions[2].is_active() && !f.directions[4].is_active());
    }

    #[test]
    fn each_machine_s_links_are_rated_over_its_own_interval() {
        let reading = |bytes| vec![link("a--b", false, [bytes, 0], None)];
        let other = |bytes| vec![link("c--d", false, [bytes, 0], None)];
        let f = frame(
            "x",
            0.0,
            &[(1.0, reading(0)), (1.25, other(0))],
            &[(1.5, reading(1_000)), (2.25, other(1_000))],
        );
        let bits = |name: &str| {
            (f.directions.iter())
                .find(|d| d.link == name && d.from == name[..1])
                .unwrap()
                .bits_per_second
        };
        assert_eq!((bits("a--b"), bits("c--d")), (16_000.0, 8_000.0));
        assert_eq!((f.t, f.interval, f.links), (2.25, 1.0, 2));
    }
}
