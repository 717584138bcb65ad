//! How each link of a lab is carried: a plain veth, the userspace link
//! engine, netem in the kernel, or a P4 pipeline. Decided once per lab
//! from the scenario and the machine, never dropping an impairment
//! silently.

use turbonet_injectors::Impairment;
use turbonet_topo::{EngineChoice, Lab};

/// True when this kernel has `sch_netem` (loaded, built in, or as a
/// module on disk): the kernel impairment engine could then carry links.
pub fn kernel_has_netem() -> bool {
    if std::path::Path::new("/sys/module/sch_netem").exists() {
        return true;
    }
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    ["modules.dep", "modules.builtin"].iter().any(|f| {
        std::fs::read_to_string(format!("/lib/modules/{release}/{f}"))
            .is_ok_and(|text| text.contains("sch_netem.ko"))
    })
}

/// How a link is carried: decided by `up` and recorded in the lab's state,
/// which the daemon reads (the machine may change while the lab is up).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Carrier {
    /// A plain veth pair: nothing to emulate.
    Veth,
    /// Spliced through the userspace link engine; why not the kernel.
    Userspace(String),
    /// netem on both ends.
    Kernel,
    /// A rate (and a queue) only: the kernel's token bucket (`tbf`) on
    /// both ends.
    Shaper,
    /// In a P4 pipeline (targets `soft` and `p4rt`): the queue mapper's
    /// delay and loss, the egress queue's rate.
    Pipeline,
}

impl Carrier {
    /// True for links spliced through the userspace engine.
    pub fn is_userspace(&self) -> bool {
        matches!(self, Carrier::Userspace(_))
    }

    /// The engine's name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Carrier::Veth => "none (veth)",
            Carrier::Userspace(_) => "userspace",
            Carrier::Kernel => "kernel (netem)",
            Carrier::Shaper => "kernel (tbf)",
            Carrier::Pipeline => "pipeline",
        }
    }

    /// Why, for tables.
    pub fn why(&self) -> &str {
        match self {
            Carrier::Veth => "no impairment declared",
            Carrier::Userspace(why) => why,
            Carrier::Kernel => "netem can apply every parameter",
            Carrier::Shaper => "only a rate: the kernel's token bucket shapes it",
            Carrier::Pipeline => "the switch's pipeline carries every link",
        }
    }
}

/// Decides, per link, which engine carries it: `engine = "userspace"`
/// splices every impaired link; otherwise a link that only declares a
/// rate (and a queue) is shaped by the kernel's token bucket, on every
/// kernel; `"kernel"` puts every other impaired link on netem and fails
/// (naming the link and the parameter) when netem is missing or cannot
/// honour a link; `"auto"` picks netem per link when it can, the userspace
/// engine otherwise. Never drops a parameter silently.
pub fn carriers(lab: &Lab, netem: bool) -> Result<Vec<Carrier>, String> {
    if lab.target != turbonet_topo::Target::Netns {
        return Ok(vec![Carrier::Pipeline; lab.fabric.links.len()]);
    }
    lab.fabric
        .links
        .iter()
        .map(|link| {
            let imp = Impairment::from_params(&link.params);
            if imp.is_noop() {
                return Ok(Carrier::Veth);
            }
            if lab.engine != EngineChoice::Userspace
                && turbonet_host::kernel::tbf::shaper_supports(&imp).is_ok()
            {
                return Ok(Carrier::Shaper);
            }
            let kernel = if netem {
                turbonet_host::kernel::netem::netem_supports(&imp).map_err(|e| e.to_string())
            } else {
                Err("this kernel has no sch_netem".to_owned())
            };
            match (lab.engine, kernel) {
                (EngineChoice::Userspace, _) => Ok(Carrier::Userspace("engine = \"userspace\"".to_owned())),
                (_, Ok(())) => Ok(Carrier::Kernel),
                (EngineChoice::Auto, Err(why)) => Ok(Carrier::Userspace(why)),
                (EngineChoice::Kernel, Err(why)) => Err(format!(
                    "link {}: engine = \"kernel\", but {why}; use engine = \"auto\" or \"userspace\"",
                    link.name
                )),
            }
        })
        .collect()
}

/// How every link is carried on this machine (see [`engine::carriers`]).
/// A lab whose `engine = "kernel"` this machine cannot honour was refused
/// by `up`; should one get here anyway, its impaired links go to the
/// userspace engine, which honours everything.
pub fn link_carriers(lab: &Lab) -> Vec<Carrier> {
    let netem = kernel_has_netem();
    carriers(lab, netem).unwrap_or_else(|why| {
        lab.fabric
            .links
            .iter()
            .map(|l| {
                if Impairment::from_params(&l.params).is_noop() {
                    Carrier::Veth
                } else {
                    Carrier::Userspace(why.clone())
                }
            })
            .collect()
    })
}

/// How every link is carried, as `up` recorded it (`recorded`, from the
/// lab's state); decided again only for a state that has no record.
pub fn recorded(lab: &Lab, recorded: &[Carrier]) -> Vec<Carrier> {
    if recorded.len() == lab.fabric.links.len() {
        recorded.to_vec()
    } else {
        link_carriers(lab)
    }
}
