//! How long commands (`up`, `run`, `bench`) report as they go: a trait
//! the command line implements (a terminal's progress lines) and a quiet
//! one.

use crate::state::Timing;

/// What a long command reports as it goes: phases starting, progress
/// within one, phases done (with their time), and notes.
pub trait Progress {
    /// A phase is starting.
    fn start(&self, _phase: &str) {}
    /// How far a long phase has come.
    fn update(&self, _phase: &str, _detail: &str) {}
    /// A phase is done.
    fn done(&self, _timing: &Timing) {}
    /// Something the user should know.
    fn note(&self, _text: &str) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Progress for Quiet {}
