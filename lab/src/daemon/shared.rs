//! What the daemon's readers share: the control API's service, the
//! metrics endpoint and snapshots read the lab's state from here, and send
//! changes into the actor's queue.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use turbonet_topo::Lab;

use super::actor::Published;
use super::command::Queue;
use crate::carrier::Carrier;
use crate::dataplane::plane::Counted;
use crate::events::Events;
use crate::routes::bgp::BgpView;

/// Everything the service reads from and sends to.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The lab.
    pub lab: Arc<Lab>,
    /// The nodes that run here (all of them but on a lab over machines).
    pub share: Arc<turbonet_topo::machines::Share>,
    /// How each link is carried.
    pub carriers: Arc<Vec<Carrier>>,
    /// Into the actor.
    pub queue: Queue,
    /// What the actor published last.
    pub published: watch::Receiver<Published>,
    /// The data plane's counters, by link name (refreshed by the actor
    /// while someone reads them).
    pub counters: Arc<CounterCache>,
    /// The lab's events.
    pub events: Events,
    /// What the BGP agents published (BGP labs).
    pub bgp: Option<Arc<BgpView>>,
    /// Starts captures and mirrors (`None`: the target cannot).
    pub tapper: Option<Arc<dyn crate::dataplane::plane::Tapping>>,
    /// The filters' counters, read every second.
    pub filters: Arc<Mutex<Vec<crate::dataplane::netns::filters::FilterCounters>>>,
    /// The lab's workloads.
    pub workloads: Arc<crate::workload::Workloads>,
    /// This daemon's pid, and how many daemons came before it.
    pub pid: u32,
    /// How many times the daemon was restarted.
    pub restarts: u32,
}

/// The data plane's counters as the actor last read them. The actor reads
/// them every [`CounterCache::EVERY`] while someone asked for them in the
/// last [`CounterCache::WARM`] (reading every link of a 2,400-namespace
/// fabric ten times a second would keep a core busy for nobody); a read
/// after a quiet spell waits for a fresh sample.
#[derive(Debug)]
pub struct CounterCache {
    counted: Mutex<Counted>,
    fresh: tokio::sync::watch::Sender<u64>,
    /// When a reader last asked, milliseconds since `epoch` (0: never).
    wanted_ms: AtomicU64,
    epoch: Instant,
}

impl Default for CounterCache {
    fn default() -> Self {
        CounterCache {
            counted: Mutex::new(Counted::default()),
            fresh: tokio::sync::watch::Sender::new(0),
            wanted_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl CounterCache {
    /// How often the actor reads the counters while they are wanted.
    pub const EVERY: Duration = Duration::from_millis(100);
    /// How long after a read they stay wanted.
    pub const WARM: Duration = Duration::from_secs(10);

    /// Milliseconds since `epoch`, from 1.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).map_or(u64::MAX, |ms| ms.saturating_add(1))
    }

    /// The counters, no older than about [`Self::EVERY`] (after a quiet
    /// spell this waits for the actor's next sample, a second at most; for
    /// the very first sample, which a busy machine may take longer to read,
    /// ten).
    pub async fn read(&self) -> Counted {
        let mut fresh = self.fresh.subscribe();
        let warm = self.wanted();
        self.wanted_ms.store(self.now_ms(), Ordering::Relaxed);
        let never = *fresh.borrow() == 0;
        if !warm || never {
            let wait = Duration::from_secs(if never { 10 } else { 1 });
            let _ = tokio::time::timeout(wait, fresh.changed()).await;
        }
        self.counted.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Whether a reader asked within [`Self::WARM`] (the actor then reads).
    pub fn wanted(&self) -> bool {
        let at = self.wanted_ms.load(Ordering::Relaxed);
        at != 0 && self.now_ms() <= at.saturating_add(Self::WARM.as_millis() as u64)
    }

    /// A sample the actor read.
    pub fn store(&self, counted: Counted) {
        if let Ok(mut c) = self.counted.lock() {
            *c = counted;
        }
        self.fresh.send_modify(|n| *n += 1);
    }
}
