//! Where a lab's fabric is mapped, and which engine impairs its links.

use std::fmt;

use serde::Serialize;

/// Which impairment engine carries the impaired links of a lab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineChoice {
    /// Per link: the kernel's token bucket (`tbf`) for a link that only
    /// has a rate; the kernel engine (turbonet's BPF program with `fq`)
    /// where the kernel has `sch_fq` and the program can honour the link;
    /// else the userspace link engine.
    #[default]
    Auto,
    /// The userspace link engine for every impaired link (works on every
    /// kernel).
    Userspace,
    /// netem for every impaired link; refused when the kernel has no
    /// `sch_netem` or a link declares what netem cannot do.
    Kernel,
    /// The kernel engine (BPF and `fq`) for every impaired link; refused
    /// when the kernel has no `sch_fq` or a link declares what the program
    /// cannot do.
    Bpf,
}

impl EngineChoice {
    /// Every choice, as written in scenarios.
    pub const NAMES: &'static [&'static str] = &["auto", "userspace", "kernel", "bpf"];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Userspace => "userspace",
            EngineChoice::Kernel => "kernel",
            EngineChoice::Bpf => "bpf",
        }
    }
}

impl fmt::Display for EngineChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The target a fabric is mapped onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// One Linux network namespace per node, veth links.
    Netns,
    /// P4 switches over P4Runtime.
    P4rt,
    /// turbonet's own userspace P4Runtime switch.
    Soft,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Netns => "netns",
            Target::P4rt => "p4rt",
            Target::Soft => "soft",
        })
    }
}
