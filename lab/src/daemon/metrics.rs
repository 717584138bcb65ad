//! The lab's OpenMetrics endpoint (`[metrics]`): `GET /metrics` answers
//! what the daemon knows at that moment, in the OpenMetrics text format
//! (which Prometheus scrapes): every link direction's counters (frames and
//! bytes offered and passed, drops by cause, corruptions, duplicates, ECN
//! marks, the engine's own shortfalls) and queue depth, the impairments in
//! force, what is down, every BGP speaker's sessions and routes, and the
//! events so far by kind. Every series carries the lab; a direction's
//! carry the link, the sending node and its port, and the receiving node.
//!
//! It is served on this machine (`[metrics] address`, by default
//! 127.0.0.1) and, when the lab has a management network, on the lab's
//! address there, so a monitor in a host reaches it at `mgmt:PORT`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use super::shared::Shared;
use crate::dataplane::plane::LinkCounters;
use crate::routes::bgp::BgpReport;

/// The content type of what `/metrics` answers.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of one series.
type Labels = Vec<(&'static str, String)>;

/// What one scrape reports, read from the daemon at once.
#[derive(Debug)]
struct Scrape {
    lab: String,
    target: String,
    routing: String,
    links: Vec<LinkScrape>,
    /// Nodes, and whether each is up.
    nodes: Vec<(String, String, bool)>,
    bgp: Option<BgpReport>,
    /// Events so far, by kind.
    events: BTreeMap<String, u64>,
    /// The filters' counters.
    filters: Vec<crate::dataplane::netns::filters::FilterCounters>,
}

#[derive(Debug)]
struct LinkScrape {
    name: String,
    /// Each end's node and port.
    ends: [(String, String); 2],
    down: bool,
    params: turbonet_topo::LinkParams,
    engine: &'static str,
    counters: Option<LinkCounters>,
}

/// Reads what a scrape reports from the daemon's shared state.
async fn scrape(shared: &Shared) -> Scrape {
    let lab = &shared.lab;
    let fabric = &lab.fabric;
    let published = shared.published.borrow().clone();
    let counted = shared.counters.read().await.links;
    let mut by_name: BTreeMap<String, LinkCounters> =
        counted.into_iter().map(|c| (c.link.clone(), c)).collect();
    let links = fabric
        .links
        .iter()
        .map(|l| LinkScrape {
            name: l.name.clone(),
            ends: l
                .ends
                .each_ref()
                .map(|e| (fabric.node(e.node).name.clone(), e.ifname.clone())),
            down: published.failures.blocks(l),
            params: published
                .params
                .get(l.id.0 as usize)
                .unwrap_or(&l.params)
                .clone(),
            engine: shared.carriers[l.id.0 as usize].name(),
            counters: by_name.remove(&l.name),
        })
        .collect();
    let nodes = fabric
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.role.to_string(),
                !published.failures.nodes.contains(&n.id),
            )
        })
        .collect();
    let bgp = match &shared.bgp {
        Some(view) => Some(view.report(None, false).await),
        None => None,
    };
    let events = shared.events.kinds();
    Scrape {
        filters: shared.filters.lock().map(|f| f.clone()).unwrap_or_default(),
        lab: lab.name.clone(),
        target: lab.target.to_string(),
        routing: lab.routing.mode.to_string(),
        links,
        nodes,
        bgp,
        events,
    }
}

/// The text of one scrape.
pub async fn render(shared: &Shared) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Arc::new(scrape(shared).await)));
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        text.clear();
        let _ = writeln!(text, "# EOF");
    }
    text
}

/// Encodes one family: its descriptor, then every series.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: Vec<(Labels, M)>,
) -> std::fmt::Result {
    let Some(first) = series.first() else {
        return Ok(());
    };
    let kind = first.1.metric_type();
    let mut family = encoder.encode_descriptor(name, help, unit, kind)?;
    for (labels, metric) in &series {
        metric.encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn gauge(v: f64) -> ConstGauge<f64> {
    ConstGauge::new(v)
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let lab = || ("lab", self.lab.clone());
        family(
            &mut encoder,
            "turbonet_lab_info",
            "The lab: its target and routing mode",
            None,
            vec![(
                vec![
                    lab(),
                    ("target", self.target.clone()),
                    ("routing", self.routing.clone()),
                ],
                gauge(1.0),
            )],
        )?;

        // Per link.
        let link = |l: &LinkScrape| vec![lab(), ("link", l.name.clone())];
        family(
            &mut encoder,
            "turbonet_link_up",
            "1 while the link is up, 0 while it (or a node at its end) is failed",
            None,
            self.links
                .iter()
                .map(|l| {
                    let mut labels = link(l);
                    labels.push(("engine", l.engine.to_owned()));
                    (labels, gauge(if l.down { 0.0 } else { 1.0 }))
                })
                .collect(),
        )?;
        let param =
            |f: fn(&turbonet_topo::LinkParams) -> Option<f64>| -> Vec<(Labels, ConstGauge<f64>)> {
                self.links
                    .iter()
                    .filter_map(|l| f(&l.params).map(|v| (link(l), gauge(v))))
                    .collect()
            };
        family(
            &mut encoder,
            "turbonet_link_rate_bits_per_second",
            "The link's rate in force (links with a rate)",
            None,
            param(|p| p.rate.map(|r| r.0 as f64)),
        )?;
        family(
            &mut encoder,
            "turbonet_link_delay",
            "The link's one-way delay in force (links with a delay)",
            Some(&Unit::Seconds),
            param(|p| p.delay.map(|d| d.as_nanos() as f64 / 1e9)),
        )?;
        family(
            &mut encoder,
            "turbonet_link_loss_ratio",
            "The link's long-run loss probability in force (links with loss)",
            None,
            param(|p| p.loss.map(|l| l.mean())),
        )?;

        // Per direction: the sending node and port, the receiving node.
        let mut series: BTreeMap<&str, Vec<(Labels, ConstCounter<u64>)>> = BTreeMap::new();
        let mut queues: Vec<(Labels, ConstGauge<f64>)> = Vec::new();
        let mut queue_bytes: Vec<(Labels, ConstGauge<f64>)> = Vec::new();
        for l in &self.links {
            let Some(c) = &l.counters else {
                continue;
            };
            for d in 0..2 {
                let labels = vec![
                    lab(),
                    ("link", l.name.clone()),
                    ("node", l.ends[d].0.clone()),
                    ("port", l.ends[d].1.clone()),
                    ("peer", l.ends[1 - d].0.clone()),
                ];
                let k = &c.directions[d];
                let s = &c.shortfall[d];
                for (name, value) in [
                    ("offered_frames", k.rx_packets),
                    ("offered_bytes", k.rx_bytes),
                    ("passed_frames", k.tx_packets),
                    ("passed_bytes", k.tx_bytes),
                    ("corrupted_frames", k.corrupted),
                    ("duplicated_frames", k.duplicated),
                    ("ecn_marked_frames", k.ecn_marked),
                    ("engine_socket_dropped_frames", s.socket_drops),
                    ("engine_late_frames", s.late),
                ] {
                    series
                        .entry(name)
                        .or_default()
                        .push((labels.clone(), counter(value)));
                }
                for (cause, value) in [("loss", k.dropped_loss), ("queue", k.dropped_queue)] {
                    let mut labels = labels.clone();
                    labels.push(("cause", cause.to_owned()));
                    series
                        .entry("dropped_frames")
                        .or_default()
                        .push((labels, counter(value)));
                }
                queues.push((labels.clone(), gauge(k.queue_packets as f64)));
                queue_bytes.push((labels, gauge(k.queue_bytes as f64)));
            }
        }
        for (name, help) in [
            ("offered_frames", "Frames offered to the link direction"),
            ("offered_bytes", "Bytes offered to the link direction"),
            ("passed_frames", "Frames the link direction passed on"),
            ("passed_bytes", "Bytes the link direction passed on"),
            (
                "dropped_frames",
                "Frames the link direction dropped, by cause (loss model, full queue)",
            ),
            ("corrupted_frames", "Frames that got a bit flipped"),
            ("duplicated_frames", "Extra copies made by duplication"),
            (
                "ecn_marked_frames",
                "Frames marked CE above the ECN threshold",
            ),
            (
                "engine_socket_dropped_frames",
                "Frames the kernel dropped at the link engine's socket before it read them (this machine's shortfall, not the link's model)",
            ),
            (
                "engine_late_frames",
                "Frames the link engine sent more than a millisecond after their due time (this machine's shortfall)",
            ),
        ] {
            family(
                &mut encoder,
                &format!("turbonet_link_{name}"),
                help,
                None,
                series.remove(name).unwrap_or_default(),
            )?;
        }
        family(
            &mut encoder,
            "turbonet_link_queue_frames",
            "Frames in the link direction's queue now",
            None,
            queues,
        )?;
        family(
            &mut encoder,
            "turbonet_link_queue_bytes",
            "Bytes in the link direction's queue now",
            None,
            queue_bytes,
        )?;

        family(
            &mut encoder,
            "turbonet_node_up",
            "1 while the node is up, 0 while it is failed",
            None,
            self.nodes
                .iter()
                .map(|(name, role, up)| {
                    (
                        vec![lab(), ("node", name.clone()), ("role", role.clone())],
                        gauge(if *up { 1.0 } else { 0.0 }),
                    )
                })
                .collect(),
        )?;

        if let Some(bgp) = &self.bgp {
            let speaker = |node: &str, agent: &str| {
                vec![
                    lab(),
                    ("node", node.to_owned()),
                    ("agent", agent.to_owned()),
                ]
            };
            family(
                &mut encoder,
                "turbonet_bgp_routes",
                "Prefixes the switch's FIB holds from BGP",
                None,
                bgp.speakers
                    .iter()
                    .map(|s| (speaker(&s.node, &s.agent), gauge(s.routes as f64)))
                    .collect(),
            )?;
            family(
                &mut encoder,
                "turbonet_bgp_routes_expected",
                "Prefixes the switch's FIB holds once converged (the BGP plan)",
                None,
                bgp.speakers
                    .iter()
                    .map(|s| (speaker(&s.node, &s.agent), gauge(s.expected as f64)))
                    .collect(),
            )?;
            family(
                &mut encoder,
                "turbonet_bgp_converged",
                "1 when the switch's FIB is what the plan says",
                None,
                bgp.speakers
                    .iter()
                    .map(|s| {
                        (
                            speaker(&s.node, &s.agent),
                            gauge(if s.converged { 1.0 } else { 0.0 }),
                        )
                    })
                    .collect(),
            )?;
            family(
                &mut encoder,
                "turbonet_bgp_session_up",
                "1 while the BGP session is Established",
                None,
                bgp.speakers
                    .iter()
                    .flat_map(|s| {
                        s.sessions.iter().map(move |x| {
                            (
                                vec![
                                    ("lab", self.lab.clone()),
                                    ("node", s.node.clone()),
                                    ("peer", x.peer.clone()),
                                    ("state", x.state.clone()),
                                ],
                                gauge(if x.state == "established" { 1.0 } else { 0.0 }),
                            )
                        })
                    })
                    .collect(),
            )?;
        }

        family(
            &mut encoder,
            "turbonet_filter_frames",
            "Frames a filter (`[[filter]]`) passed and dropped, by verdict",
            None,
            self.filters
                .iter()
                .flat_map(|f| {
                    [("passed", f.passed()), ("dropped", f.dropped)].map(|(verdict, n)| {
                        (
                            vec![
                                lab(),
                                ("filter", f.name.clone()),
                                ("node", f.node.clone()),
                                ("port", f.port.clone()),
                                ("link", f.link.clone()),
                                ("hook", f.hook.clone()),
                                ("kind", f.kind.clone()),
                                ("verdict", verdict.to_owned()),
                            ],
                            counter(n),
                        )
                    })
                })
                .collect(),
        )?;
        family(
            &mut encoder,
            "turbonet_events",
            "Events the lab logged, by kind (turbonet events)",
            None,
            self.events
                .iter()
                .map(|(kind, n)| (vec![lab(), ("kind", kind.clone())], counter(*n)))
                .collect(),
        )?;
        Ok(())
    }
}

/// Serves `/metrics` on `listener` until `stop` resolves.
pub async fn serve(
    shared: Shared,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(
                |axum::extract::State(shared): axum::extract::State<Shared>| async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
                        render(&shared).await,
                    )
                },
            ),
        )
        .with_state(shared);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
}
