//! What the daemon's readers share: the control API's service, the
//! metrics endpoint and snapshots read the lab's state from here, and send
//! changes into the actor's queue.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use turbonet_topo::Lab;

use super::actor::Published;
use super::command::Queue;
use crate::dataplane::Carrier;
use crate::dataplane::plane::Counted;
use crate::events::Events;
use crate::routes::bgp::BgpView;

/// Everything the service reads from and sends to.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The lab.
    pub lab: Arc<Lab>,
    /// How each link is carried.
    pub carriers: Arc<Vec<Carrier>>,
    /// Into the actor.
    pub queue: Queue,
    /// What the actor published last.
    pub published: watch::Receiver<Published>,
    /// The data plane's counters, by link name (refreshed by the actor).
    pub counters: Arc<Mutex<Counted>>,
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
