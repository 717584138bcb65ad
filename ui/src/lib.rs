//! `turbonet ui`: a live web page of a running lab, served locally.
//!
//! The page (`index.html`, `app.js`, `app.css`, embedded in the binary:
//! no CDN, nothing fetched from elsewhere) draws the fabric as `turbonet
//! graph` does, then keeps it live from one Server-Sent Events stream
//! (`/api/stream`): the lab's events as they happen (a `fail` marks its
//! link at once) and, four times a second, every link's state and load
//! from the daemon's counters. Clicking a link shows its parameters and
//! counters (`/api/link/NAME`); a lab with tasks shows them, and grades
//! them on request (`/api/check`). The page only looks: nothing on it
//! changes the lab.
//!
//! The server is a client of the lab's daemon like the CLI: one thread
//! follows the events, one reads the counters; each page's stream is
//! served from what they last read, so many pages cost the daemon nothing
//! more.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};

use turbonet_api as api;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::events::LoggedEvent;
use turbonet_lab::inspect::Running;
use turbonet_lab::watch::{Frame, Watcher};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// Events a new page is sent first.
const BACKLOG: usize = 200;
/// How often the counters are read.
const READ_EVERY: Duration = Duration::from_millis(250);

/// Every link's state now, as the page colours it.
#[derive(Debug, Clone, Default, Serialize)]
struct Live {
    /// When the counters were read (the lab's clock); none: not yet.
    t: Option<f64>,
    /// Links down.
    down: Vec<String>,
    /// Nodes whose every link is down.
    nodes_down: Vec<String>,
    /// Each busy link's load (1% or more): its busier direction's share
    /// of its rate (or of the busiest direction's bit rate when it has
    /// none), 0 to 1...
    load: BTreeMap<String, f64>,
    /// ... and its colour, as `turbonet graph` draws it.
    colour: BTreeMap<String, String>,
    /// Why the lab cannot be read, if it cannot (it went down).
    error: Option<String>,
}

/// What every request shares.
#[derive(Clone)]
struct Ui {
    running: Arc<Running>,
    live: watch::Receiver<Arc<Live>>,
    /// The last reading of the counters, for a link's panel.
    frame: Arc<Mutex<Option<Frame>>>,
    events: broadcast::Sender<LoggedEvent>,
    backlog: Arc<Mutex<VecDeque<LoggedEvent>>>,
}

/// A secret for a page's address (`/TOKEN/`): 128 random bits, in hex.
pub fn token() -> Result<String> {
    Ok(turbonet_host::random_hex(16)?)
}

/// Serves the page of `running` on `listen` until Ctrl-C, under
/// `/TOKEN/` when given a token (every other path is not found: on a
/// shared machine, only who was handed the address sees the lab); `ready`
/// hears the page's address (a port 0 picked).
pub fn serve(
    running: Running,
    listen: SocketAddr,
    token: Option<&str>,
    ready: impl FnOnce(String),
) -> Result<()> {
    // The daemon must be there now; later failures show on the page.
    api::Client::connect(&running.dir)?;
    let running = Arc::new(running);
    let (live_tx, live) = watch::channel(Arc::new(Live::default()));
    let frame = Arc::new(Mutex::new(None));
    let (events, _) = broadcast::channel(1024);
    let backlog = Arc::new(Mutex::new(VecDeque::new()));
    let ui = Ui {
        running: running.clone(),
        live,
        frame: frame.clone(),
        events: events.clone(),
        backlog: backlog.clone(),
    };
    {
        let running = running.clone();
        std::thread::Builder::new()
            .name("ui-counters".into())
            .spawn(move || read_counters(&running, &live_tx, &frame))
            .context("starting the counters' reader")?;
    }
    std::thread::Builder::new()
        .name("ui-events".into())
        .spawn(move || follow_events(&running, &events, &backlog))
        .context("starting the events' follower")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ui")
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let base = token.map(|t| format!("/{t}")).unwrap_or_default();
        ready(format!("http://{}{base}/", listener.local_addr()?));
        axum::serve(listener, router(ui, &base))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    })
}

/// The page's routes under `base` (`""`, or `/TOKEN`).
fn router(ui: Ui, base: &str) -> axum::Router {
    let asset = |kind: &'static str, body: &'static str| {
        get(move || async move { ([(header::CONTENT_TYPE, kind)], body) })
    };
    let at = |path: &str| format!("{base}{path}");
    axum::Router::new()
        .route(&at("/"), get(|| async { Html(INDEX) }))
        .route(
            &at("/app.js"),
            asset("text/javascript; charset=utf-8", SCRIPT),
        )
        .route(&at("/app.css"), asset("text/css; charset=utf-8", STYLE))
        .route(&at("/graph.svg"), get(graph))
        .route(&at("/api/lab"), get(lab))
        .route(&at("/api/stream"), get(stream))
        .route(&at("/api/link/{name}"), get(link))
        .route(&at("/api/check"), post(check))
        .with_state(ui)
}

/// Reads the counters every [`READ_EVERY`] into `live` (and `frame`),
/// until no page could want them (the server is gone).
fn read_counters(running: &Running, live: &watch::Sender<Arc<Live>>, frame: &Mutex<Option<Frame>>) {
    let mut watcher = None;
    loop {
        if live.is_closed() {
            return;
        }
        let read = match watcher.as_mut() {
            Some(w) => Watcher::read(w),
            None => Watcher::new(running).map(|w| {
                watcher = Some(w);
                None
            }),
        };
        match read {
            Ok(Some(read)) => {
                live.send_replace(Arc::new(state_of(running, &read)));
                *frame
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(read);
            }
            Ok(None) => {}
            Err(e) => {
                watcher = None;
                live.send_replace(Arc::new(Live {
                    error: Some(e.to_string()),
                    ..Live::default()
                }));
            }
        }
        std::thread::sleep(READ_EVERY);
    }
}

/// What the page colours, from a reading of the counters (the same as
/// `turbonet graph` draws of a running lab).
fn state_of(running: &Running, frame: &Frame) -> Live {
    let fabric = &running.lab.fabric;
    let state = turbonet_lab::graph::state_of(fabric, frame);
    let name = |id: turbonet_topo::LinkId| fabric.link(id).name.clone();
    let mut down: Vec<String> = state.links_down.iter().map(|l| name(*l)).collect();
    down.sort();
    let mut nodes_down: Vec<String> = (state.nodes_down.iter())
        .map(|n| fabric.node(*n).name.clone())
        .collect();
    nodes_down.sort();
    // Below 1% a link is idle (keepalives, ARP).
    let busy: Vec<(String, f64)> = (state.load.iter())
        .filter(|(_, load)| **load >= 0.01)
        .map(|(l, load)| (name(*l), *load))
        .collect();
    Live {
        t: Some(frame.t),
        down,
        nodes_down,
        colour: (busy.iter())
            .map(|(l, load)| (l.clone(), turbonet_graph::load_colour(*load)))
            .collect(),
        load: (busy.into_iter())
            .map(|(l, load)| (l, (load * 1000.0).round() / 1000.0))
            .collect(),
        error: None,
    }
}

/// Follows the lab's events into `events` (and the last [`BACKLOG`] into
/// `backlog`), reconnecting while the lab is up.
fn follow_events(
    running: &Running,
    events: &broadcast::Sender<LoggedEvent>,
    backlog: &Mutex<VecDeque<LoggedEvent>>,
) {
    loop {
        // A reconnect gets every event again: only the new ones are news.
        let mut skip = lock(backlog).back().map(|e| e.unix);
        // Every machine's, on a lab over several.
        let followed = turbonet_lab::parts::events(running, true, |event| {
            if let Some(last) = skip {
                if event.unix <= last {
                    return true;
                }
                skip = None;
            }
            let mut kept = lock(backlog);
            kept.push_back(event.clone());
            if kept.len() > BACKLOG {
                kept.pop_front();
            }
            // Sent under the lock: a new page gets each event once, in its
            // backlog or on the bus.
            let _ = events.send(event);
            true
        });
        if let Err(e) = followed {
            tracing::debug!("following the events: {e}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Which part of the fabric to draw (`?pod=0&segment=1&plane=0`).
#[derive(Debug, Default, Deserialize)]
struct GraphQuery {
    pod: Option<u32>,
    segment: Option<u32>,
    plane: Option<u32>,
}

async fn graph(State(ui): State<Ui>, Query(q): Query<GraphQuery>) -> Response {
    let lab = &ui.running.lab;
    let filter = turbonet_graph::Filter {
        pod: q.pod,
        segment: q.segment,
        plane: q.plane,
    };
    let picture = turbonet_graph::layout(&lab.fabric, &filter, turbonet_graph::MAX_PER_ROW);
    if picture.shown == 0 {
        return problem(StatusCode::NOT_FOUND, "no node matches the filter");
    }
    let svg = turbonet_graph::svg(
        &picture,
        &lab.fabric,
        &turbonet_graph::State::default(),
        &lab.name,
    );
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}

/// The lab as the page's header and task list show it.
#[derive(Debug, Serialize)]
struct LabSummary {
    name: String,
    nodes: usize,
    switches: usize,
    hosts: usize,
    links: usize,
    routing: String,
    tasks: Vec<TaskSummary>,
    points: u32,
}

#[derive(Debug, Serialize)]
struct TaskSummary {
    name: String,
    title: String,
    points: u32,
}

async fn lab(State(ui): State<Ui>) -> Json<LabSummary> {
    let lab = &ui.running.lab;
    let tasks: Vec<TaskSummary> = (lab.tasks.iter())
        .map(|t| TaskSummary {
            name: t.name.clone(),
            title: t.title.clone(),
            points: t.points,
        })
        .collect();
    Json(LabSummary {
        name: lab.name.clone(),
        nodes: lab.fabric.nodes.len(),
        switches: lab.fabric.switches().count(),
        hosts: lab.fabric.hosts().count(),
        links: lab.fabric.links.len(),
        routing: lab.routing.mode.to_string(),
        points: tasks.iter().map(|t| t.points).sum(),
        tasks,
    })
}

/// One stream per page: the last events, then each new event (`event`)
/// and each reading of the links (`live`).
async fn stream(State(ui): State<Ui>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (backlog, news) = {
        let kept = lock(&ui.backlog);
        (
            kept.iter().cloned().collect::<Vec<_>>(),
            ui.events.subscribe(),
        )
    };
    fn event(e: &LoggedEvent) -> Option<Event> {
        Event::default().event("event").json_data(e).ok()
    }
    let first = tokio_stream::iter(backlog).filter_map(|e| event(&e));
    let news = BroadcastStream::new(news).filter_map(|e| e.ok().as_ref().and_then(event));
    let live = WatchStream::new(ui.live.clone())
        .filter_map(|live| Event::default().event("live").json_data(&*live).ok());
    Sse::new(first.chain(news.merge(live)).map(Ok)).keep_alive(KeepAlive::default())
}

/// A link's panel: its parameters and counters (the daemon's), and its
/// rates at the last reading.
#[derive(Debug, Serialize)]
struct LinkPanel {
    show: turbonet_lab::inspect::LinkShow,
    rates: Vec<turbonet_lab::watch::DirectionRate>,
}

async fn link(State(ui): State<Ui>, Path(name): Path<String>) -> Response {
    if ui.running.lab.fabric.link_by_name(&name).is_none() {
        return problem(StatusCode::NOT_FOUND, &format!("no link {name}"));
    }
    let running = ui.running.clone();
    let only = name.clone();
    // From the machine that carries it, on a lab over several.
    let read =
        tokio::task::spawn_blocking(move || turbonet_lab::parts::link_show(&running, Some(&only)))
            .await;
    let show = match read {
        Ok(Ok(mut links)) if !links.is_empty() => links.swap_remove(0),
        Ok(Ok(_)) => return problem(StatusCode::NOT_FOUND, &format!("no link {name}")),
        Ok(Err(e)) => return problem(StatusCode::BAD_GATEWAY, &e.to_string()),
        Err(e) => return problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let rates = lock(&ui.frame)
        .as_ref()
        .map(|f| {
            (f.directions.iter())
                .filter(|d| d.link == name)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Json(LinkPanel { show, rates }).into_response()
}

/// Grades the lab's tasks, as `turbonet lab check` does.
async fn check(State(ui): State<Ui>) -> Response {
    if ui.running.lab.tasks.is_empty() {
        return problem(StatusCode::NOT_FOUND, "this lab has no tasks");
    }
    let running = ui.running.clone();
    match tokio::task::spawn_blocking(move || turbonet_course::grade(&running, None)).await {
        Ok(Ok(grade)) => Json(grade).into_response(),
        Ok(Err(e)) => problem(StatusCode::BAD_GATEWAY, &e.to_string()),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// An error as JSON: `{"error": "..."}`.
fn problem(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}
