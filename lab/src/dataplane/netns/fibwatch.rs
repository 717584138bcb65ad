//! Ground truth of every switch's forwarding table: the daemon listens to
//! the kernel's route and link notifications in each switch's namespace and
//! writes a `route-change` event whenever a prefix is added, withdrawn or
//! gets other next hops — whoever changed it (turbonet's static routes or
//! controller, the built-in BGP agents, FRR's zebra, BIRD), so every agent
//! is covered the same way.
//!
//! IPv4 says nothing when a port goes down and the kernel marks the next
//! hops through it dead or flushes the routes on it: a link notification
//! therefore makes the watcher read the whole table again and compare. A
//! route notification is applied as it comes. Notifications that arrive
//! together (an agent's burst, a read of the table) become one event per
//! switch, listing every prefix that changed; under a flood a burst is
//! gathered for longer (up to [`flood`]).
//!
//! It runs on a thread of its own, so that its events carry the time the
//! kernel told it, however busy the daemon's actor is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use std::os::fd::OwnedFd;

use ipnet::Ipv4Net;
use tokio::sync::oneshot;
use turbonet_routing::intern::Interner;
use turbonet_topo::machines::Share;
use turbonet_topo::{Lab, Node};

use crate::error::{Context, Result};
use crate::events::{About, Change, Events, NextHop, RouteChange};
use crate::names;
use turbonet_host::kernel::table::{
    Listener, Nexthops, Notice, ObjectChange, TableHop, TableRoute, read_table_with,
};
use turbonet_host::namespaces;

/// How long the watcher waits for more notifications of the same burst
/// before it writes what changed.
const QUIET: Duration = Duration::from_millis(1);
/// The longest a burst is gathered before its changes are written.
const BURST: Duration = Duration::from_millis(20);
/// Events a second a whole fabric converging at once writes, about.
const FLOOD_EVENTS_PER_SECOND: u32 = 100;

/// The longest a burst is gathered while a switch of a fabric of
/// `switches` stays busy: a burst that begins within a window of the last
/// one's end lasts twice as long, up to this. A switch converging for
/// minutes (rewriting thousands of routes a round, with pauses between)
/// then writes about one event a second rather than one a pause, and in a
/// fabric of more than a hundred switches one each few seconds, so that
/// its events stay about [`FLOOD_EVENTS_PER_SECOND`] (the HPN pod's
/// convergence logged 2 GB of route changes in ten minutes at one a
/// pause). A switch quiet for a window is back to [`BURST`].
fn flood(switches: usize) -> Duration {
    let switches = u32::try_from(switches).unwrap_or(u32::MAX);
    Duration::from_secs(1).max(Duration::from_secs(1) * switches / FLOOD_EVENTS_PER_SECOND)
}

/// Watches every switch's table until dropped.
#[derive(Debug)]
pub struct FibWatch {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for FibWatch {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A switch's ports by ifindex: the port's name and the node at its other
/// end.
pub(crate) type Ports = HashMap<u32, (String, Option<String>)>;

pub(crate) fn ports(lab: &Lab, node: &Node) -> Ports {
    let mut ports: Ports = lab
        .fabric
        .ports(node.id)
        .enumerate()
        .map(|(i, (_, local, remote))| {
            (
                names::port_ifindex(i),
                (
                    local.ifname.clone(),
                    Some(lab.fabric.node(remote.node).name.clone()),
                ),
            )
        })
        .collect();
    ports.insert(1, ("lo".to_owned(), None));
    ports
}

/// A switch's name, ports, namespace and a socket that hears its routes.
type Listening = (String, Ports, OwnedFd, OwnedFd);

/// Opens a listening socket in the namespace of every switch of `lab`
/// that runs here (`share`).
fn listen(lab: &Lab, share: &Share) -> Result<Vec<Listening>> {
    let mut sockets = Vec::new();
    for node in lab.fabric.switches().filter(|n| share.runs(n.id)) {
        let name = names::node_namespace(&lab.name, &node.name);
        let ns = namespaces::open(&name).with_context(|| format!("opening {name}"))?;
        let socket = namespaces::in_namespace(&ns, Listener::socket)
            .with_context(|| format!("listening to the routes of {}", node.name))?;
        sockets.push((node.name.clone(), ports(lab, node), ns, socket));
    }
    Ok(sockets)
}

impl FibWatch {
    /// Starts watching the tables of every switch of `lab` that runs here
    /// (`share`; a `netns` lab's switches each have a namespace): their
    /// sockets are opened before this returns, so no change made after it
    /// is missed.
    pub fn start(lab: Arc<Lab>, share: Share, events: Events) -> Result<FibWatch> {
        let sockets = listen(&lab, &share)?;
        let (tell, is_ready) = std::sync::mpsc::channel();
        let ready = Ready(Some(Box::new(move |r| {
            let _ = tell.send(r);
        })));
        let watch = Self::spawn(lab, share, events, Join::Now(sockets), ready)?;
        is_ready
            .recv()
            .map_err(|_| crate::Error::Failed("the route watcher's thread died".to_owned()))??;
        Ok(watch)
    }

    /// Starts watching once `join` is ready: what changes before is not
    /// an event. A listening socket in a switch's namespace makes the
    /// kernel's every route notification, in every namespace, walk it
    /// (`netlink_broadcast` walks one list of every listening socket of
    /// the protocol): a thousand of them while a fabric's first two million
    /// routes are written cost 35 s of a 90 s `up`. When it joins, the
    /// watcher writes a `route-watch` event; a failure to, too.
    /// `joined` is called once the tables are read (or the watcher gave
    /// up).
    pub fn start_when(
        lab: Arc<Lab>,
        share: Share,
        events: Events,
        join: impl Future<Output = ()> + Send + 'static,
        joined: impl FnOnce() + Send + 'static,
    ) -> Result<FibWatch> {
        let ready = Ready(Some(Box::new(move |_| joined())));
        Self::spawn(lab, share, events, Join::When(Box::pin(join)), ready)
    }

    fn spawn(
        lab: Arc<Lab>,
        share: Share,
        events: Events,
        join: Join,
        mut ready: Ready,
    ) -> Result<FibWatch> {
        let flood = flood(lab.fabric.switches().count());
        let (stop, mut stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("fib-watch".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        ready.say(Err(e.into()));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // A watcher that joins late says why it could not;
                    // `start`'s caller says it for the others.
                    let late = matches!(join, Join::When(_));
                    let sockets = match join {
                        Join::Now(sockets) => sockets,
                        Join::When(join) => {
                            tokio::select! {
                                () = join => {}
                                _ = &mut stopped => return,
                            }
                            let what = format!(
                                "watching the routes of {} switches",
                                lab.fabric.switches().count()
                            );
                            match listen(&lab, &share) {
                                Ok(sockets) => {
                                    events.write("daemon", "route-watch", &what, Ok(()));
                                    sockets
                                }
                                Err(e) => {
                                    events.write(
                                        "daemon",
                                        "route-watch",
                                        &what,
                                        Err(&e.to_string()),
                                    );
                                    return;
                                }
                            }
                        }
                    };
                    // Every switch's table as it is, before the first
                    // change, one at a time (a converged pod's 376 tables
                    // dumped at once held gigabytes of answers).
                    let switches = async {
                        let mut switches = Vec::with_capacity(sockets.len());
                        for (node, ports, ns, socket) in sockets {
                            let (nexthops, routes) = read(&ns).await?;
                            let listener = Listener::new(socket, nexthops)?;
                            let switch = Switch {
                                node,
                                ports,
                                ns,
                                table: Table::from_routes(routes),
                                events: events.clone(),
                                flood,
                            };
                            switches.push((switch, listener));
                        }
                        Ok::<_, crate::Error>(switches)
                    }
                    .await;
                    let tasks: Vec<_> = match switches {
                        Ok(switches) => switches
                            .into_iter()
                            .map(|(switch, listener)| tokio::spawn(switch.watch(listener)))
                            .collect(),
                        Err(e) => {
                            if late {
                                events.write(
                                    "daemon",
                                    "route-watch",
                                    "reading the switches' tables",
                                    Err(&e.to_string()),
                                );
                            }
                            ready.say(Err(e));
                            return;
                        }
                    };
                    ready.say(Ok(()));
                    let _ = stopped.await;
                    for task in tasks {
                        task.abort();
                    }
                });
            })?;
        Ok(FibWatch {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// Told once whether the watcher holds every table: by the watcher's
/// thread, or, should it end first, when dropped.
struct Ready(Option<Box<dyn FnOnce(Result<()>) + Send>>);

impl Ready {
    fn say(&mut self, result: Result<()>) {
        if let Some(tell) = self.0.take() {
            tell(result);
        }
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        self.say(Err(crate::Error::Failed(
            "the route watcher's thread ended".to_owned(),
        )));
    }
}

/// When the watcher starts listening.
enum Join {
    /// At once, on sockets opened already.
    Now(Vec<Listening>),
    /// When this is ready.
    When(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>),
}

/// A switch's nexthop objects and main table, read from its namespace
/// `ns` (the objects first: a route to an object made after is told again
/// with the object known).
async fn read(ns: &OwnedFd) -> Result<(Nexthops, Vec<TableRoute>)> {
    let nexthops = Nexthops::read_in(ns)?;
    let handle =
        turbonet_host::kernel::connect(namespaces::in_namespace(ns, namespaces::route_socket)?)?;
    let routes = read_table_with(&handle, &nexthops).await?;
    Ok((nexthops, routes))
}

/// What a route says besides its prefix and metric: the next hops, who
/// installed it and the object it points at. Routes that say the same
/// share one (a converged ToR of the HPN pod holds sixteen thousand routes
/// and a handful of these), so that the watcher's copy of the pod's 376
/// tables costs a tree entry a route rather than a route a route.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Via {
    hops: Arc<[TableHop]>,
    /// Who installed it (`RouteProtocol` as the kernel numbers it).
    protocol: u8,
    object: Option<u32>,
}

impl Via {
    /// The next hops packets can take, as the kernel names them,
    /// ascending.
    fn raw_hops(&self) -> Vec<RawHop> {
        raw_hops(self.hops.iter())
    }

    fn forwards(&self) -> bool {
        self.hops.iter().any(|h| !h.down)
    }
}

/// Routes by prefix and metric.
type Routes = BTreeMap<(Ipv4Net, u32), Arc<Via>>;

/// One switch's table as the watcher knows it: every route by prefix and
/// metric, equal [`Via`]s and equal lists of next hops shared, and how
/// many routes point at each nexthop object.
#[derive(Debug, Default)]
struct Table {
    routes: Routes,
    vias: Interner<Via>,
    sets: Interner<[TableHop]>,
    uses: HashMap<u32, u32>,
}

impl Table {
    fn from_routes(routes: Vec<TableRoute>) -> Table {
        let mut table = Table::default();
        table.reload(routes);
        table
    }

    /// Makes the table `routes` (as read again), keeping what it shares;
    /// the routes it held.
    fn reload(&mut self, routes: Vec<TableRoute>) -> Routes {
        self.uses.clear();
        let before = std::mem::take(&mut self.routes);
        for route in routes {
            self.insert(route);
        }
        before
    }

    fn insert(&mut self, route: TableRoute) {
        let via = Via {
            hops: self.sets.intern(&route.hops),
            protocol: route.protocol.into(),
            object: route.object,
        };
        let via = self.vias.intern_with(&via, |v| Arc::new(v.clone()));
        self.put((route.prefix, route.metric), via);
    }

    fn put(&mut self, key: (Ipv4Net, u32), via: Arc<Via>) {
        if let Some(id) = via.object {
            *self.uses.entry(id).or_default() += 1;
        }
        let old = self.routes.insert(key, via);
        self.unuse(old);
    }

    fn remove(&mut self, key: &(Ipv4Net, u32)) {
        let old = self.routes.remove(key);
        self.unuse(old);
    }

    fn unuse(&mut self, via: Option<Arc<Via>>) {
        if let Some(id) = via.and_then(|v| v.object)
            && let std::collections::hash_map::Entry::Occupied(mut e) = self.uses.entry(id)
        {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// Applies `updates` (a route, or `None`: gone); the routes they
    /// replaced, and the prefixes they touched.
    fn update(
        &mut self,
        updates: BTreeMap<(Ipv4Net, u32), Option<TableRoute>>,
    ) -> (Routes, BTreeSet<Ipv4Net>) {
        let (mut before, mut touched) = (Routes::new(), BTreeSet::new());
        for (prefix, _) in updates.keys() {
            self.remember(*prefix, &mut before, &mut touched);
        }
        for (key, route) in updates {
            match route {
                Some(r) => self.insert(r),
                None => self.remove(&key),
            }
        }
        (before, touched)
    }

    /// Keeps `prefix`'s routes as they are in `before`, the first time it
    /// is `touched`: only compared, or put back by [`Table::restore`].
    fn remember(&self, prefix: Ipv4Net, before: &mut Routes, touched: &mut BTreeSet<Ipv4Net>) {
        if touched.insert(prefix) {
            for (k, via) in of_prefix(&self.routes, prefix) {
                before.insert(*k, Arc::clone(via));
            }
        }
    }

    /// Undoes [`Table::update`]: the `touched` prefixes' routes back to
    /// `before`.
    fn restore(&mut self, before: Routes, touched: &BTreeSet<Ipv4Net>) {
        for prefix in touched {
            let keys: Vec<_> = of_prefix(&self.routes, *prefix).map(|(k, _)| *k).collect();
            for key in keys {
                self.remove(&key);
            }
        }
        for (key, via) in before {
            self.put(key, via);
        }
    }

    /// Some route points at object `id`.
    fn uses(&self, id: u32) -> bool {
        self.uses.contains_key(&id)
    }

    /// Gives the routes that point at an `altered` object its next hops
    /// as `nexthops` has them now (a group given other members in place:
    /// the kernel names none of its routes), adding their prefixes to
    /// `touched` and their routes as they were to `before`. False, and
    /// nothing done, if an object is not known.
    fn follow(
        &mut self,
        altered: &BTreeSet<u32>,
        nexthops: &Nexthops,
        before: &mut Routes,
        touched: &mut BTreeSet<Ipv4Net>,
    ) -> bool {
        let mut hops: HashMap<u32, Arc<[TableHop]>> = HashMap::new();
        for &id in altered {
            if !self.uses(id) {
                continue;
            }
            let Some(now) = nexthops.hops(id) else {
                return false;
            };
            hops.insert(id, self.sets.intern(&now));
        }
        if hops.is_empty() {
            return true;
        }
        // Each via that moves, once: its routes share what it becomes.
        let mut moved: HashMap<*const Via, Arc<Via>> = HashMap::new();
        let mut routes = Vec::new();
        for (key, via) in &self.routes {
            let Some(now) = via.object.and_then(|id| hops.get(&id)) else {
                continue;
            };
            let to = moved.entry(Arc::as_ptr(via)).or_insert_with(|| {
                let to = Via {
                    hops: Arc::clone(now),
                    ..Via::clone(via)
                };
                self.vias.intern_with(&to, |v| Arc::new(v.clone()))
            });
            routes.push((*key, Arc::clone(to)));
        }
        for (key, via) in routes {
            self.remember(key.0, before, touched);
            self.put(key, via);
        }
        true
    }
}

/// `prefix`'s routes in `routes`, by metric.
fn of_prefix(
    routes: &Routes,
    prefix: Ipv4Net,
) -> impl Iterator<Item = (&(Ipv4Net, u32), &Arc<Via>)> {
    routes.range((prefix, 0)..=(prefix, u32::MAX))
}

/// What forwards packets to `prefix` in `routes`: its route with the
/// lowest metric that has a usable next hop.
fn effective(routes: &Routes, prefix: Ipv4Net) -> Option<&Via> {
    of_prefix(routes, prefix)
        .map(|(_, via)| &**via)
        .find(|via| via.forwards())
}

/// The prefixes `routes` has routes to.
fn prefixes(routes: &Routes) -> BTreeSet<Ipv4Net> {
    routes.keys().map(|(p, _)| *p).collect()
}

/// What a burst's notifications did to the table.
enum Applied {
    /// The routes of the prefixes they touched as they were, and those
    /// prefixes.
    Changed(Routes, BTreeSet<Ipv4Net>),
    /// Nothing: only a read of the table says what changed.
    Relist,
}

/// One switch being watched.
struct Switch {
    node: String,
    ports: Ports,
    /// Its namespace.
    ns: OwnedFd,
    table: Table,
    events: Events,
    /// Its longest burst while busy ([`flood`]).
    flood: Duration,
}

impl Switch {
    async fn watch(mut self, mut listener: Listener) {
        use tokio::time::Instant;
        let mut window = BURST;
        let mut last_end: Option<Instant> = None;
        while let Ok(first) = listener.next().await {
            let (began, start) = (crate::events::unix_now(), Instant::now());
            // A switch back within a window of its last burst is still
            // busy (converging): its burst is gathered for the whole
            // window, twice as long as the last, so that it writes about
            // one event a second however its writes pause. One that was
            // quiet for a window is back to short bursts that end at the
            // first pause.
            let busy = last_end.is_some_and(|end| start.duration_since(end) < window);
            window = if busy {
                (window * 2).min(self.flood)
            } else {
                BURST
            };
            let mut burst = Burst::default();
            burst.take(first);
            let deadline = start + window;
            loop {
                let until = if busy {
                    deadline
                } else {
                    deadline.min(Instant::now() + QUIET)
                };
                match tokio::time::timeout_at(until, listener.next()).await {
                    Ok(Ok(notices)) => burst.take(notices),
                    Ok(Err(_)) => return,
                    Err(_) => break,
                }
            }
            self.apply(burst, began, &mut listener).await;
            last_end = Some(Instant::now());
        }
    }

    /// Brings the table up to date with a burst whose first notification
    /// came at Unix time `began`, and writes what changed (as of then).
    async fn apply(&mut self, burst: Burst, began: f64, listener: &mut Listener) {
        let (before, touched) = match self.take(burst, listener.nexthops()) {
            Applied::Changed(before, touched) => (before, touched),
            Applied::Relist => {
                // The kernel changed routes without saying (a port went
                // down, an object in use changed): read the table again.
                let Ok((nexthops, routes)) = read(&self.ns).await else {
                    return;
                };
                listener.relearn(nexthops);
                let before = self.table.reload(routes);
                let mut touched = prefixes(&before);
                touched.extend(prefixes(&self.table.routes));
                (before, touched)
            }
        };
        self.write(&before, touched, began);
    }

    /// Applies a burst's route notifications and the objects they point
    /// at as `nexthops` has them now, unless only a read of the table can
    /// say what changed.
    fn take(&mut self, burst: Burst, nexthops: &Nexthops) -> Applied {
        if burst.relist {
            return Applied::Relist;
        }
        let (mut before, mut touched) = self.table.update(burst.updates);
        // An object that routes point at went, and the kernel named none of
        // its routes; or one changed that the listener does not know.
        if burst.removed.iter().any(|id| self.table.uses(*id))
            || !self
                .table
                .follow(&burst.altered, nexthops, &mut before, &mut touched)
        {
            self.table.restore(before, &touched);
            return Applied::Relist;
        }
        Applied::Changed(before, touched)
    }

    /// Writes what changed for the `touched` prefixes, whose routes were
    /// `before`, in an event of Unix time `began`.
    fn write(&self, before: &Routes, touched: BTreeSet<Ipv4Net>, began: f64) {
        // Grouped by what the kernel says (gateways and port indexes),
        // named once a group: a converging ToR compares and groups
        // thousands of sixty-hop routes a burst.
        let mut alike: HashMap<(Change, Vec<RawHop>, u8), Vec<Ipv4Net>> = HashMap::new();
        for p in touched {
            if let Some(how) = change(effective(before, p), effective(&self.table.routes, p)) {
                alike.entry(how).or_default().push(p);
            }
        }
        let mut changes: Vec<RouteChange> = alike
            .into_iter()
            .map(|((change, hops, protocol), prefixes)| RouteChange {
                prefixes,
                change,
                next_hops: named(&self.ports, hops.iter().copied()),
                protocol: protocol_name(protocol.into()),
            })
            .collect();
        changes.sort_by_key(|c| c.prefixes[0]);
        if changes.is_empty() {
            return;
        }
        let text = describe(&self.node, &changes);
        self.events.write_at(
            began,
            "kernel",
            "route-change",
            &text,
            Ok(()),
            About {
                routes: changes,
                ..About::node(&self.node)
            },
        );
    }
}

/// A next hop as the kernel names it: the gateway and the port's index.
type RawHop = (Option<std::net::Ipv4Addr>, u32);

/// Of `hops`, those that forward, ascending.
fn raw_hops<'a>(hops: impl Iterator<Item = &'a TableHop>) -> Vec<RawHop> {
    let mut hops: Vec<RawHop> = hops
        .filter(|h| !h.down)
        .map(|h| (h.via, h.ifindex))
        .collect();
    hops.sort_unstable();
    hops.dedup();
    hops
}

/// What happened to a prefix whose route was `before` and is `after`, if
/// anything: the change, the next hops it has now, and who installed it.
fn change(before: Option<&Via>, after: Option<&Via>) -> Option<(Change, Vec<RawHop>, u8)> {
    let (change, via) = match (before, after) {
        (None, None) => return None,
        (None, Some(a)) => (Change::Added, a),
        (Some(b), None) => (Change::Withdrawn, b),
        (Some(b), Some(a)) => {
            if b.raw_hops() == a.raw_hops() {
                return None;
            }
            (Change::Changed, a)
        }
    };
    let hops = if change == Change::Withdrawn {
        Vec::new()
    } else {
        via.raw_hops()
    };
    Some((change, hops, via.protocol))
}

/// Next hops named by a switch's `ports`, in order.
fn named(ports: &Ports, hops: impl IntoIterator<Item = RawHop>) -> Vec<NextHop> {
    let mut named: Vec<NextHop> = hops
        .into_iter()
        .map(|(via, ifindex)| {
            let (ifname, node) = ports
                .get(&ifindex)
                .cloned()
                .unwrap_or_else(|| (format!("if{ifindex}"), None));
            NextHop {
                gateway: via,
                ifname,
                node,
            }
        })
        .collect();
    named.sort();
    named.dedup();
    named
}

/// The next hops of `route` that forward, named by a switch's `ports`.
pub(crate) fn next_hops(ports: &Ports, route: &TableRoute) -> BTreeSet<NextHop> {
    named(ports, raw_hops(route.hops.iter()))
        .into_iter()
        .collect()
}

/// The notifications of one burst.
#[derive(Debug, Default)]
struct Burst {
    /// Routes as the last notification of each left them (`None`: gone).
    updates: BTreeMap<(Ipv4Net, u32), Option<TableRoute>>,
    /// Their lists of next hops, shared while the burst gathers (a ToR of
    /// the HPN pod hears thousands of routes over the same sixty in one).
    sets: Interner<[TableHop]>,
    /// Objects that forward otherwise now (the routes that point at them
    /// with them).
    altered: BTreeSet<u32>,
    /// Objects that went (with the routes that pointed at them).
    removed: Vec<u32>,
    /// A link changed, or notifications were lost: the table must be read
    /// again.
    relist: bool,
}

impl Burst {
    fn take(&mut self, notices: Vec<Notice>) {
        for notice in notices {
            match notice {
                // A route to an object the listener has not heard of: only
                // the table says where it leads.
                Notice::Route(r) if r.unresolved() => self.relist = true,
                Notice::Route(mut r) => {
                    r.hops = self.sets.intern(&r.hops);
                    self.updates.insert((r.prefix, r.metric), Some(r));
                }
                Notice::Removed(r) => {
                    self.updates.insert((r.prefix, r.metric), None);
                }
                Notice::Object(ObjectChange::Altered(id)) => {
                    self.altered.insert(id);
                }
                Notice::Object(ObjectChange::Removed(id)) => {
                    self.removed.push(id);
                }
                Notice::Object(ObjectChange::Made(_)) => {}
                Notice::Link | Notice::Overrun => self.relist = true,
            }
        }
    }
}

/// How events name who installed a route.
pub fn protocol_name(protocol: rtnetlink::packet_route::route::RouteProtocol) -> String {
    use rtnetlink::packet_route::route::RouteProtocol as P;
    match protocol {
        P::Other(n) => n.to_string(),
        p => p.to_string(),
    }
}

/// A line for people: the switch, how many prefixes changed, and the
/// first few changes.
fn describe(node: &str, changes: &[RouteChange]) -> String {
    const SHOWN: usize = 3;
    const HOPS_SHOWN: usize = 4;
    let count: usize = changes.iter().map(|c| c.prefixes.len()).sum();
    let mut parts: Vec<String> = changes
        .iter()
        .take(SHOWN)
        .map(|c| {
            let prefixes = match c.prefixes.len() {
                1 => c.prefixes[0].to_string(),
                n => format!("{} and {} more", c.prefixes[0], n - 1),
            };
            if c.change == Change::Withdrawn {
                return format!("{prefixes} withdrawn");
            }
            let mut hops: Vec<String> = c
                .next_hops
                .iter()
                .take(HOPS_SHOWN)
                .map(|h| h.node.clone().unwrap_or_else(|| h.ifname.clone()))
                .collect();
            if c.next_hops.len() > HOPS_SHOWN {
                hops.push(format!("{} more", c.next_hops.len() - HOPS_SHOWN));
            }
            format!("{prefixes} {} via {}", c.change.name(), hops.join(", "))
        })
        .collect();
    if changes.len() > SHOWN {
        let rest: usize = changes[SHOWN..].iter().map(|c| c.prefixes.len()).sum();
        parts.push(format!("and {rest} more"));
    }
    format!(
        "{node}: {count} route{} changed: {}",
        if count == 1 { "" } else { "s" },
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::RouteProtocol;
    use turbonet_host::kernel::table::TableHop;

    #[test]
    fn a_busy_switch_of_a_large_fabric_gathers_for_longer() {
        assert_eq!(flood(20), Duration::from_secs(1));
        assert_eq!(flood(100), Duration::from_secs(1));
        assert_eq!(flood(376), Duration::from_millis(3_760));
    }

    fn route(prefix: &str, metric: u32, hops: &[(&str, u32, bool)]) -> TableRoute {
        TableRoute {
            prefix: prefix.parse().unwrap(),
            hops: hops
                .iter()
                .map(|(via, ifindex, down)| TableHop {
                    via: Some(via.parse().unwrap()),
                    ifindex: *ifindex,
                    down: *down,
                })
                .collect(),
            protocol: RouteProtocol::Bgp,
            metric,
            object: None,
        }
    }

    impl Switch {
        /// Applies and writes a burst that needs no read of the table.
        fn apply_notified(&mut self, burst: Burst, nexthops: &Nexthops) {
            match self.take(burst, nexthops) {
                Applied::Changed(before, touched) => {
                    self.write(&before, touched, crate::events::unix_now());
                }
                Applied::Relist => panic!("the burst asks for a read of the table"),
            }
        }
    }

    fn switch(table: Vec<TableRoute>) -> Switch {
        let ports = [
            (2, ("agg0-0".to_owned(), Some("agg0-0".to_owned()))),
            (3, ("agg0-1".to_owned(), Some("agg0-1".to_owned()))),
        ]
        .into_iter()
        .collect();
        // A namespace that is never read: these tests apply notifications
        // only.
        let ns = std::fs::File::open("/proc/self/ns/net").unwrap().into();
        Switch {
            node: "edge0-0".to_owned(),
            ports,
            ns,
            table: Table::from_routes(table),
            events: Events::scratch(),
            flood: flood(20),
        }
    }

    #[test]
    fn a_burst_becomes_one_event_of_every_prefix_that_changed_and_only_those() {
        let mut sw = switch(vec![
            route(
                "10.0.1.0/24",
                20,
                &[("10.1.0.1", 2, false), ("10.1.0.3", 3, false)],
            ),
            route("10.0.2.0/24", 20, &[("10.1.0.1", 2, false)]),
            route("10.0.3.0/24", 20, &[("10.1.0.3", 3, false)]),
        ]);
        let mut burst = Burst::default();
        // Next hops changed (one is down now), one withdrawn, one added,
        // one written again as it was.
        for (key, r) in [
            (
                "10.0.1.0/24",
                Some(route(
                    "10.0.1.0/24",
                    20,
                    &[("10.1.0.1", 2, true), ("10.1.0.3", 3, false)],
                )),
            ),
            ("10.0.2.0/24", None),
            (
                "10.0.4.0/24",
                Some(route("10.0.4.0/24", 20, &[("10.1.0.1", 2, false)])),
            ),
            (
                "10.0.3.0/24",
                Some(route("10.0.3.0/24", 20, &[("10.1.0.3", 3, false)])),
            ),
        ] {
            burst.updates.insert((key.parse().unwrap(), 20), r);
        }
        sw.apply_notified(burst, &Nexthops::default());
        let all = sw.events.all();
        assert_eq!(all.len(), 1, "{all:?}");
        let e = &all[0];
        assert_eq!(
            (e.kind.as_str(), e.source.as_str()),
            ("route-change", "kernel")
        );
        assert_eq!(e.about.node.as_deref(), Some("edge0-0"));
        let changes: Vec<(Vec<String>, Change, Vec<Option<String>>)> = e
            .about
            .routes
            .iter()
            .map(|c| {
                (
                    c.prefixes.iter().map(ToString::to_string).collect(),
                    c.change,
                    c.next_hops.iter().map(|h| h.node.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            changes,
            vec![
                (
                    vec!["10.0.1.0/24".into()],
                    Change::Changed,
                    vec![Some("agg0-1".into())]
                ),
                (vec!["10.0.2.0/24".into()], Change::Withdrawn, vec![]),
                (
                    vec!["10.0.4.0/24".into()],
                    Change::Added,
                    vec![Some("agg0-0".into())]
                ),
            ]
        );
        assert!(
            e.event
                .starts_with("edge0-0: 3 routes changed: 10.0.1.0/24 changed via agg0-1"),
            "{}",
            e.event
        );
        // A route whose every next hop is down forwards nothing: withdrawn.
        let mut burst = Burst::default();
        burst.updates.insert(
            ("10.0.3.0/24".parse().unwrap(), 20),
            Some(route("10.0.3.0/24", 20, &[("10.1.0.3", 3, true)])),
        );
        sw.apply_notified(burst, &Nexthops::default());
        let last = sw.events.all().pop().unwrap();
        assert_eq!(last.about.routes[0].change, Change::Withdrawn);
    }

    #[test]
    fn prefixes_that_change_alike_are_listed_once() {
        let mut sw = switch(vec![]);
        let mut burst = Burst::default();
        let hops = [("10.1.0.1", 2, false), ("10.1.0.3", 3, false)];
        for prefix in ["10.0.3.0/24", "10.0.1.0/24", "10.0.2.0/24"] {
            burst.updates.insert(
                (prefix.parse().unwrap(), 20),
                Some(route(prefix, 20, &hops)),
            );
        }
        burst.updates.insert(
            ("10.0.9.0/24".parse().unwrap(), 20),
            Some(route("10.0.9.0/24", 20, &hops[..1])),
        );
        sw.apply_notified(burst, &Nexthops::default());
        let e = sw.events.all().pop().unwrap();
        let groups: Vec<(Vec<String>, usize)> = e
            .about
            .routes
            .iter()
            .map(|c| {
                (
                    c.prefixes.iter().map(ToString::to_string).collect(),
                    c.next_hops.len(),
                )
            })
            .collect();
        assert_eq!(
            groups,
            vec![
                (
                    vec![
                        "10.0.1.0/24".into(),
                        "10.0.2.0/24".into(),
                        "10.0.3.0/24".into()
                    ],
                    2
                ),
                (vec!["10.0.9.0/24".into()], 1),
            ]
        );
        assert_eq!(
            e.event,
            "edge0-0: 4 routes changed: 10.0.1.0/24 and 2 more added via agg0-0, agg0-1; \
             10.0.9.0/24 added via agg0-0"
        );
    }

    /// `route` pointing at object `id`.
    fn to_object(mut route: TableRoute, id: u32) -> TableRoute {
        route.object = Some(id);
        route
    }

    /// Objects as a listener would know them: hops 1 to 3 (agg0-0 by
    /// port 2, agg0-1 by port 3, and agg0-1 again by another gateway), and
    /// `groups`.
    fn nexthops(groups: &[(u32, &[u32])]) -> Nexthops {
        let mut nexthops = Nexthops::default();
        for (id, via, ifindex) in [(1, "10.1.0.1", 2), (2, "10.1.0.3", 3), (3, "10.1.0.5", 3)] {
            let via = Some(via.parse().unwrap());
            let down = false;
            nexthops.put_hop(id, TableHop { via, ifindex, down });
        }
        for (id, members) in groups {
            nexthops.put_group(*id, members.to_vec());
        }
        nexthops
    }

    #[test]
    fn a_group_changed_in_place_changes_its_routes_and_one_that_goes_reads_the_table() {
        let hops = [("10.1.0.1", 2, false), ("10.1.0.3", 3, false)];
        let before = vec![
            to_object(route("10.0.1.0/24", 20, &hops), 7),
            to_object(route("10.0.2.0/24", 20, &hops), 7),
        ];
        let mut sw = switch(before.clone());
        let objects = nexthops(&[(8, &[1, 2])]);
        // Both routes move to group 8 and group 7 goes: said by the kernel,
        // route by route.
        let mut burst = Burst::default();
        burst.take(
            before
                .iter()
                .map(|r| Notice::Route(to_object(r.clone(), 8)))
                .chain([Notice::Object(ObjectChange::Removed(7))])
                .collect(),
        );
        assert!(matches!(sw.take(burst, &objects), Applied::Changed(..)));
        assert_eq!(sw.table.uses.get(&8), Some(&2));
        assert!(!sw.table.uses(7));
        // Group 8 is given a third member in place: the kernel says so of
        // the group alone, and both routes forward by three hops.
        let objects = nexthops(&[(8, &[1, 2, 3])]);
        let mut burst = Burst::default();
        burst.take(vec![Notice::Object(ObjectChange::Altered(8))]);
        sw.apply_notified(burst, &objects);
        let e = sw.events.all().pop().unwrap();
        assert_eq!(e.about.routes.len(), 1, "{:?}", e.about.routes);
        let change = &e.about.routes[0];
        assert_eq!(change.change, Change::Changed);
        assert_eq!(change.prefixes.len(), 2);
        assert_eq!(change.next_hops.len(), 3);
        assert_eq!(sw.table.uses.get(&8), Some(&2));
        // A group in use that goes took its routes unsaid; one changed that
        // the listener does not know: the table is left as it was, to be
        // read again.
        for notice in [ObjectChange::Removed(8), ObjectChange::Altered(8)] {
            let mut burst = Burst::default();
            burst.take(vec![
                Notice::Removed(to_object(route("10.0.1.0/24", 20, &[]), 8)),
                Notice::Object(notice),
            ]);
            assert!(matches!(sw.take(burst, &nexthops(&[])), Applied::Relist));
            assert_eq!(sw.table.routes.len(), 2);
            assert_eq!(sw.table.uses.get(&8), Some(&2));
        }
        // A new object is no change; a route to one the listener does not
        // know is only known from the table.
        let mut burst = Burst::default();
        burst.take(vec![Notice::Object(ObjectChange::Made(9))]);
        assert!(matches!(sw.take(burst, &objects), Applied::Changed(_, t) if t.is_empty()));
        let mut burst = Burst::default();
        burst.take(vec![Notice::Route(to_object(
            route("10.0.3.0/24", 20, &[]),
            10,
        ))]);
        assert!(matches!(sw.take(burst, &objects), Applied::Relist));
    }

    #[test]
    fn routes_that_say_the_same_share_one_description() {
        let hops = [("10.1.0.1", 2, false), ("10.1.0.3", 3, false)];
        let table = Table::from_routes(vec![
            route("10.0.1.0/24", 20, &hops),
            route("10.0.2.0/24", 20, &hops),
            route("10.0.3.0/24", 20, &hops),
            route("10.0.9.0/24", 20, &hops[..1]),
        ]);
        let vias: Vec<&Arc<Via>> = table.routes.values().collect();
        assert!(Arc::ptr_eq(vias[0], vias[1]) && Arc::ptr_eq(vias[1], vias[2]));
        assert!(!Arc::ptr_eq(vias[2], vias[3]));
        assert_eq!(table.vias.len(), 2);
    }

    #[test]
    fn the_lowest_metric_with_a_usable_hop_is_what_forwards() {
        let table = Table::from_routes(vec![
            route("10.0.1.0/24", 10, &[("10.1.0.1", 2, true)]),
            route("10.0.1.0/24", 20, &[("10.1.0.3", 3, false)]),
        ]);
        let forwards = effective(&table.routes, "10.0.1.0/24".parse().unwrap()).unwrap();
        assert_eq!(
            forwards.raw_hops(),
            [(Some("10.1.0.3".parse().unwrap()), 3)]
        );
        assert!(effective(&table.routes, "10.0.2.0/24".parse().unwrap()).is_none());
    }
}
