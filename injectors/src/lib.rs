//! turbonet-injectors: impairment models (delay, jitter, loss, rate, queues)
//! and the userspace link engine core.
//!
//! The link engine splices impaired links through the per-lab daemon. Until
//! it lands, the emulator refuses scenarios whose links declare impairments
//! rather than ignoring them.
