//! What `turbonet graph` draws of a running lab: the links and nodes that
//! are down and every link's load now, from two readings of the daemon's
//! counters.

use std::time::{Duration, Instant};

use turbonet_graph::State;

use crate::error::Result;
use crate::inspect::Running;
use crate::watch::Watcher;

/// How long to wait for the daemon's second reading of the counters.
const READING: Duration = Duration::from_secs(3);

/// The lab's state now: links down (as the daemon counts them), nodes
/// whose every link is down, and each link's load: its busier direction's
/// share of its rate, or of the busiest direction's bit rate when the link
/// has no rate.
pub fn state(running: &Running) -> Result<State> {
    let mut watcher = Watcher::new(running)?;
    let deadline = Instant::now() + READING;
    let frame = loop {
        if let Some(frame) = watcher.read()? {
            break frame;
        }
        if Instant::now() >= deadline {
            return Err(crate::Error::Failed(
                "the lab daemon did not count the links again within 3 s".to_owned(),
            ));
        }
        // The daemon counts every 100 ms.
        std::thread::sleep(Duration::from_millis(150));
    };
    Ok(state_of(&running.lab.fabric, &frame))
}

/// What a reading of the counters says of `fabric`'s links and nodes.
pub fn state_of(fabric: &turbonet_topo::Fabric, frame: &crate::watch::Frame) -> State {
    let busiest = frame
        .directions
        .iter()
        .map(|d| d.bits_per_second)
        .fold(0.0, f64::max);
    let mut state = State::default();
    for d in &frame.directions {
        let Some(link) = fabric.link_by_name(&d.link) else {
            continue;
        };
        if d.down {
            state.links_down.insert(link.id);
        }
        let load = match d.utilisation {
            Some(u) => u,
            None if busiest > 0.0 => d.bits_per_second / busiest,
            None => 0.0,
        };
        let entry = state.load.entry(link.id).or_insert(0.0);
        *entry = entry.max(load);
    }
    for node in &fabric.nodes {
        if !node.links.is_empty() && node.links.iter().all(|l| state.links_down.contains(l)) {
            state.nodes_down.insert(node.id);
        }
    }
    state
}
