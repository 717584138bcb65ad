//! turbonet-injectors: impairment models (delay, jitter, loss, rate, queues,
//! ECN, corruption, duplication, reordering) and the sans-I/O core of the
//! userspace link engine.
//!
//! The core does no I/O, reads no clock and uses no global random generator:
//! the caller (the lab's link engine) passes the time in as nanoseconds
//! and seeds each link direction with [`direction_seed`], so that the same
//! scenario seed and the same arrivals give the same drops, corruptions and
//! due times, packet for packet.
//!
//! ```
//! use turbonet_injectors::{Direction, Impairment, direction_seed};
//! use turbonet_injectors::units::Delay;
//!
//! let imp = Impairment { delay: Delay::from_micros(5), ..Impairment::default() };
//! let mut dir = Direction::new(imp, direction_seed(1, "h0--s0", 0));
//! dir.offer(1_000, vec![0u8; 64]);
//! assert_eq!(dir.next_due(), Some(6_000));
//! assert!(dir.pop_due(5_999).is_none());
//! assert_eq!(dir.pop_due(6_000).map(|f| f.len()), Some(64));
//! ```

pub mod counters;
pub mod direction;
pub mod impairment;
pub mod packet;
pub mod seed;
pub mod shard;
pub mod watch;

mod random;

pub use counters::Counters;
pub use direction::{Direction, Marks};
pub use impairment::{Distribution, Impairment, Jitter};
pub use random::Chance;
pub use seed::direction_seed;
pub use shard::{Shard, shard_of};
pub use turbonet_topo::{JitterDistribution, Loss};
pub use watch::{Cause, Note, Watch};

/// The unit types of the scenario language, re-exported for callers that
/// build an [`Impairment`] by hand (e.g. from `turbonet link set`).
pub mod units {
    pub use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate};
}
