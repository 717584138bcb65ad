//! Per-direction impairment parameters, resolved from a link's scenario
//! parameters.

use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

/// Shape of the jitter; the scenario language's `jitter_distribution`.
pub type Distribution = JitterDistribution;

/// The queue limit of a rate-limited link whose scenario sets none: 1000
/// packets, Linux's default `txqueuelen` and the limit netem and `pfifo`
/// fall back to.
pub const DEFAULT_QUEUE: QueueLimit = QueueLimit::Packets(1000);

/// Delay jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jitter {
    /// Spread: half-width of the uniform distribution, standard deviation
    /// (or netem's scale) of the others.
    pub amount: Delay,
    /// Shape.
    pub distribution: Distribution,
    /// Whether jitter may reorder frames. When false, a frame never leaves
    /// before one that arrived earlier (its due time is raised to the
    /// previous frame's), which is what a real link does; netem reorders.
    pub reorder: bool,
}

/// Per-direction parameters, resolved from a link's scenario parameters.
/// Both directions of a link get the same values (links are symmetric in
/// the scenario language) but separate random streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Impairment {
    /// Bandwidth; `None`: frames are not serialized and nothing queues.
    pub rate: Option<Rate>,
    /// Propagation delay added to every frame after transmission.
    pub delay: Delay,
    /// Per-frame delay variation.
    pub jitter: Option<Jitter>,
    /// Loss model.
    pub loss: Option<Loss>,
    /// Probability of flipping one bit after the Ethernet header.
    pub corrupt: Option<LossProb>,
    /// Probability of sending a second copy.
    pub duplicate: Option<LossProb>,
    /// Limit of the queue drained at `rate` (tail drop). Only used with a
    /// rate; [`DEFAULT_QUEUE`] when the scenario sets none.
    pub queue: QueueLimit,
    /// Queue depth at or above which ECN-capable frames are marked CE.
    /// Only used with a rate.
    pub ecn: Option<QueueLimit>,
}

impl Default for Impairment {
    /// No impairment at all.
    fn default() -> Self {
        Impairment {
            rate: None,
            delay: Delay::ZERO,
            jitter: None,
            loss: None,
            corrupt: None,
            duplicate: None,
            queue: DEFAULT_QUEUE,
            ecn: None,
        }
    }
}

impl Impairment {
    /// Resolves a link's scenario parameters. Total: `turbonet-topo` has
    /// already rejected inconsistent combinations (queue or ECN without a
    /// rate, ECN above the queue); if such a value reaches here anyway it is
    /// simply unused, since queue and ECN only act with a rate.
    pub fn from_params(p: &LinkParams) -> Impairment {
        let jitter = p.jitter.filter(|j| !j.is_zero()).map(|amount| Jitter {
            amount,
            distribution: p.jitter_distribution.unwrap_or_default(),
            reorder: p.reorder.unwrap_or(false),
        });
        Impairment {
            rate: p.rate,
            delay: p.delay.unwrap_or(Delay::ZERO),
            jitter,
            loss: p.loss,
            corrupt: p.corrupt,
            duplicate: p.duplicate,
            queue: p.queue.unwrap_or(DEFAULT_QUEUE),
            ecn: p.ecn,
        }
    }

    /// True when there is nothing to apply: every frame would leave
    /// unchanged at the instant it arrived, so the link needs no engine.
    pub fn is_noop(&self) -> bool {
        let zero = |p: Option<LossProb>| p.is_none_or(|p| p.probability() <= 0.0);
        self.rate.is_none()
            && self.delay.is_zero()
            && self.jitter.is_none_or(|j| j.amount.is_zero())
            && self.loss.is_none_or(|l| l.is_zero())
            && zero(self.corrupt)
            && zero(self.duplicate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_topo::units::LossProb;

    #[test]
    fn from_params_defaults() {
        let p = LinkParams {
            rate: Some(Rate::from_gbit(1)),
            jitter: Some(Delay::from_micros(3)),
            ..LinkParams::default()
        };
        let imp = Impairment::from_params(&p);
        assert_eq!(imp.queue, QueueLimit::Packets(1000));
        assert_eq!(imp.delay, Delay::ZERO);
        assert_eq!(
            imp.jitter,
            Some(Jitter {
                amount: Delay::from_micros(3),
                distribution: Distribution::Uniform,
                reorder: false
            })
        );
        assert!(!imp.is_noop());
    }

    #[test]
    fn noop() {
        assert!(Impairment::from_params(&LinkParams::default()).is_noop());
        let p = LinkParams {
            loss: Some(Loss::Bernoulli(LossProb::ZERO)),
            mtu: Some(turbonet_topo::units::Mtu(9000)),
            delay: Some(Delay::ZERO),
            ..LinkParams::default()
        };
        assert!(Impairment::from_params(&p).is_noop());
        let p = LinkParams {
            delay: Some(Delay::from_nanos(1)),
            ..LinkParams::default()
        };
        assert!(!Impairment::from_params(&p).is_noop());
    }
}
