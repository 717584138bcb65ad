//! The Adj-RIBs-Out of one speaker's sessions (RFC 4271 §3.2), two bits
//! per prefix and session.
//!
//! A speaker only ever sends a prefix's current advertisement (a round
//! made before it changed skips it, see
//! [`Speaker::flush`](super::speaker::Speaker::flush)), and a prefix's
//! advertisement only changes to a newer [`Outgoing::version`]. So what a
//! session holds of a prefix is one of three things: the current version,
//! an older one, or nothing; and which version is current is the same for
//! every session. Per prefix, [`AdjRibsOut`] keeps the version the
//! sessions' bits refer to, and per session two bits: holds that version,
//! holds some advertisement. A version that is newer than the one the bits
//! refer to clears the first bit of every session.
//!
//! Keeping the version each session last sent instead takes four octets
//! per prefix and session: the HPN pod's aggregation switches have 128
//! sessions and thirty thousand prefixes each, 5 GB over the pod, where
//! the bits take 0.3 GB.
//!
//! [`Outgoing::version`]: super::rib::Outgoing::version

/// Sessions in one word of a prefix's bitmaps.
const BITS: usize = u64::BITS as usize;

/// What every session of a speaker holds of every prefix, by the prefix's
/// [`Rib::slot`](super::rib::Rib::slot).
#[derive(Debug, Clone)]
pub(super) struct AdjRibsOut {
    /// Words of a prefix's bitmap: one bit per session.
    words: usize,
    /// Per prefix: the version `current` refers to (0: none yet).
    version: Vec<u32>,
    /// Per prefix, `words` words: the sessions that hold `version`.
    current: Vec<u64>,
    /// Per prefix, `words` words: the sessions that hold some
    /// advertisement of it (and would need a withdrawal).
    advertised: Vec<u64>,
}

impl AdjRibsOut {
    /// Nothing sent yet, on `sessions` sessions.
    pub(super) fn new(sessions: usize) -> AdjRibsOut {
        AdjRibsOut {
            words: sessions.div_ceil(BITS).max(1),
            version: Vec::new(),
            current: Vec::new(),
            advertised: Vec::new(),
        }
    }

    /// Makes room for prefixes `0..slots`.
    pub(super) fn reserve(&mut self, slots: usize) {
        if slots > self.version.len() {
            self.version.resize(slots, 0);
            self.current.resize(slots * self.words, 0);
            self.advertised.resize(slots * self.words, 0);
        }
    }

    fn bit(&self, slot: usize, session: usize) -> (usize, u64) {
        (slot * self.words + session / BITS, 1 << (session % BITS))
    }

    /// Whether `session` holds `version` of prefix `slot`.
    pub(super) fn holds(&self, slot: usize, session: usize, version: u32) -> bool {
        let (word, mask) = self.bit(slot, session);
        self.version[slot] == version && self.current[word] & mask != 0
    }

    /// Records that `session` was sent `version` of prefix `slot`, the
    /// prefix's current advertisement.
    pub(super) fn announce(&mut self, slot: usize, session: usize, version: u32) {
        if self.version[slot] != version {
            debug_assert!(self.version[slot] < version, "versions only grow");
            self.version[slot] = version;
            let at = slot * self.words;
            self.current[at..at + self.words].fill(0);
        }
        let (word, mask) = self.bit(slot, session);
        self.current[word] |= mask;
        self.advertised[word] |= mask;
    }

    /// Records that `session` was sent a withdrawal of prefix `slot`;
    /// false (and nothing to send) if it held no advertisement of it.
    pub(super) fn withdraw(&mut self, slot: usize, session: usize) -> bool {
        let (word, mask) = self.bit(slot, session);
        let held = self.advertised[word] & mask != 0;
        self.current[word] &= !mask;
        self.advertised[word] &= !mask;
        held
    }

    /// `session` went down: it holds nothing.
    pub(super) fn clear(&mut self, session: usize) {
        let (first, mask) = self.bit(0, session);
        for word in (first..self.current.len()).step_by(self.words) {
            self.current[word] &= !mask;
            self.advertised[word] &= !mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_version_is_held_by_no_session_until_sent() {
        let mut out = AdjRibsOut::new(130);
        out.reserve(3);
        out.announce(1, 0, 5);
        out.announce(1, 129, 5);
        assert!(out.holds(1, 0, 5) && out.holds(1, 129, 5));
        assert!(!out.holds(1, 64, 5) && !out.holds(0, 0, 5) && !out.holds(2, 129, 5));
        out.announce(1, 64, 7);
        assert!(out.holds(1, 64, 7));
        assert!(!out.holds(1, 0, 7) && !out.holds(1, 0, 5) && !out.holds(1, 129, 5));
        // Session 0 still holds version 5: it needs a withdrawal.
        assert!(out.withdraw(1, 0));
        assert!(!out.withdraw(1, 0));
        assert!(!out.withdraw(1, 1));
    }

    #[test]
    fn a_session_that_went_down_holds_nothing() {
        let mut out = AdjRibsOut::new(70);
        out.reserve(4);
        for slot in 0..4 {
            out.announce(slot, 66, 1);
            out.announce(slot, 3, 1);
        }
        out.clear(66);
        for slot in 0..4 {
            assert!(!out.holds(slot, 66, 1));
            assert!(!out.withdraw(slot, 66));
            assert!(out.holds(slot, 3, 1));
        }
    }
}
