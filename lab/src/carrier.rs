//! How each link of a lab is carried: a plain veth, the kernel's token
//! bucket, the kernel engine (turbonet's BPF program with `fq`), the
//! userspace link engine, netem, or a P4 pipeline. Decided once per lab
//! from the scenario and the machine, never dropping an impairment
//! silently.

use turbonet_injectors::Impairment;
use turbonet_topo::{EngineChoice, Lab, Shaping};

/// True when this kernel has `sch_netem` (loaded, built in, or as a
/// module on disk): the kernel impairment engine could then carry links.
pub fn kernel_has_netem() -> bool {
    turbonet_host::kernel::kernel_has_module("sch_netem")
}

/// The environment variable that keeps the kernel engine out of `auto`
/// (`off`).
pub const KERNEL_ENGINE_ENV: &str = "TURBONET_KERNEL_ENGINE";

/// What the kernel engines need, as this machine has it.
#[derive(Debug, Clone)]
pub struct Qdiscs {
    /// `sch_netem` (for `engine = "kernel"`).
    pub netem: bool,
    /// The kernel engine: `sch_fq`, and a kernel that loads the program;
    /// or why not. Found out the first time a link asks (loading the
    /// program costs milliseconds a lab with no impaired link need not
    /// pay).
    kernel_engine: std::cell::OnceCell<Result<(), String>>,
}

impl Qdiscs {
    /// Neither: links go to the userspace engine (and the token bucket).
    pub fn none() -> Qdiscs {
        Qdiscs::known(false, Err("no kernel engine asked for".to_owned()))
    }

    /// A machine that has netem or not, and the kernel engine or why not.
    pub fn known(netem: bool, kernel_engine: Result<(), String>) -> Qdiscs {
        Qdiscs {
            netem,
            kernel_engine: std::cell::OnceCell::from(kernel_engine),
        }
    }

    /// What this machine's kernel has. `TURBONET_KERNEL_ENGINE=off` in
    /// `up`'s environment keeps the kernel engine out of `auto` on this
    /// machine (the test suite runs so, for the same engines on every
    /// kernel).
    pub fn of_this_machine() -> Qdiscs {
        Qdiscs {
            netem: kernel_has_netem(),
            kernel_engine: std::cell::OnceCell::new(),
        }
    }

    /// The same machine without the kernel engine, for `why`.
    pub fn without_kernel_engine(self, why: &str) -> Qdiscs {
        Qdiscs::known(self.netem, Err(why.to_owned()))
    }

    /// Whether the kernel engine can run here, or why not (the program
    /// is loaded once to know).
    fn kernel_engine(&self) -> Result<(), String> {
        self.kernel_engine
            .get_or_init(|| {
                if std::env::var(KERNEL_ENGINE_ENV).is_ok_and(|v| v == "off") {
                    Err(format!("{KERNEL_ENGINE_ENV}=off"))
                } else if !turbonet_host::kernel::fq::kernel_has_fq() {
                    Err(
                        "this kernel has no sch_fq (the kernel engine holds frames in fq)"
                            .to_owned(),
                    )
                } else {
                    turbonet_kernel_engine::Program::load(1, turbonet_kernel_engine::Mode::Link)
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
            })
            .clone()
    }
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
    /// The kernel engine: turbonet's BPF program at the engine-side ports
    /// of the spliced link, `fq` holding each frame until its due time.
    Bpf,
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

    /// True for links spliced through the engine namespace: the userspace
    /// engine's and the kernel engine's.
    pub fn is_spliced(&self) -> bool {
        matches!(self, Carrier::Userspace(_) | Carrier::Bpf)
    }

    /// The engine's name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Carrier::Veth => "none (veth)",
            Carrier::Userspace(_) => "userspace",
            Carrier::Kernel => "kernel (netem)",
            Carrier::Bpf => "kernel (bpf+fq)",
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
            Carrier::Bpf => {
                "the kernel engine's program honours every parameter; fq holds the frames"
            }
            Carrier::Shaper => "only a rate: the kernel's token bucket shapes it",
            Carrier::Pipeline => "the switch's pipeline carries every link",
        }
    }
}

/// Decides, per link, which engine carries it: `engine = "userspace"`
/// splices every impaired link; otherwise a link that only declares a
/// rate (and a queue) is shaped by the kernel's token bucket, on every
/// kernel; `"kernel"` puts every other impaired link on netem and `"bpf"`
/// on the kernel engine, each failing (naming the link and the reason)
/// when the kernel lacks its qdisc or the engine cannot honour a link;
/// `"auto"` picks the kernel engine per link when it can, the userspace
/// engine otherwise (netem only when asked for). Never drops a parameter
/// silently.
pub fn carriers(lab: &Lab, qdiscs: &Qdiscs) -> Result<Vec<Carrier>, String> {
    if lab.target != turbonet_topo::Target::Netns {
        return Ok(vec![Carrier::Pipeline; lab.fabric.links.len()]);
    }
    lab.fabric
        .links
        .iter()
        .map(|link| {
            let imp = Impairment::from_params(&link.params);
            match link.params.shaping() {
                Shaping::None => return Ok(Carrier::Veth),
                Shaping::Rate if lab.engine != EngineChoice::Userspace => {
                    return Ok(Carrier::Shaper);
                }
                Shaping::Rate | Shaping::Engine => {}
            }
            let netem = || {
                if qdiscs.netem {
                    turbonet_host::kernel::netem::netem_supports(&imp).map_err(|e| e.to_string())
                } else {
                    Err("this kernel has no sch_netem".to_owned())
                }
            };
            let bpf = || {
                qdiscs.kernel_engine()?;
                turbonet_kernel_engine::honours(&imp)
                    .map_err(|e| format!("the kernel engine cannot: {e}"))
            };
            let refuse = |why: String| {
                Err(format!(
                    "link {}: engine = \"{}\", but {why}; use engine = \"auto\" or \"userspace\"",
                    link.name, lab.engine
                ))
            };
            match lab.engine {
                EngineChoice::Userspace => {
                    Ok(Carrier::Userspace("engine = \"userspace\"".to_owned()))
                }
                EngineChoice::Kernel => netem().map_or_else(refuse, |()| Ok(Carrier::Kernel)),
                EngineChoice::Bpf => bpf().map_or_else(refuse, |()| Ok(Carrier::Bpf)),
                EngineChoice::Auto => Ok(bpf().map_or_else(Carrier::Userspace, |()| Carrier::Bpf)),
            }
        })
        .collect()
}

/// How every link is carried on this machine (see [`carriers`]). A lab
/// whose `engine = "kernel"` or `"bpf"` this machine cannot honour was
/// refused by `up`; should one get here anyway, its impaired links go to
/// the userspace engine, which honours everything.
pub fn link_carriers(lab: &Lab) -> Vec<Carrier> {
    carriers(lab, &Qdiscs::of_this_machine()).unwrap_or_else(|why| {
        lab.fabric
            .links
            .iter()
            .map(|l| {
                if l.params.shaping() == Shaping::None {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-host lab with `engine` and the default links' `params`.
    fn lab(engine: &str, params: &str) -> Lab {
        let text = format!(
            "[lab]\nname = \"t\"\nengine = \"{engine}\"\n[topology]\nkind = \"custom\"\n\
             [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n\
             [[topology.nodes]]\nname = \"h1\"\nrole = \"host\"\n\
             [[topology.links]]\na = \"h1\"\nb = \"s1\"\n\
             [routing]\nmode = \"static\"\n[links.default]\n{params}\n"
        );
        turbonet_topo::parse("t.toml", &text).unwrap()
    }

    fn with_fq() -> Qdiscs {
        Qdiscs::known(false, Ok(()))
    }

    #[test]
    fn auto_puts_what_the_program_honours_on_the_kernel_engine() {
        let c = carriers(&lab("auto", "delay = \"5ms\"\nloss = \"1%\""), &with_fq()).unwrap();
        assert_eq!(c, [Carrier::Bpf]);
        // A rate alone stays with the token bucket.
        let c = carriers(&lab("auto", "rate = \"1gbit\""), &with_fq()).unwrap();
        assert_eq!(c, [Carrier::Shaper]);
        // Normal jitter needs floating point: the userspace engine, saying why.
        let normal = "delay = \"5ms\"\njitter = \"1ms\"\njitter_distribution = \"normal\"";
        let c = carriers(&lab("auto", normal), &with_fq()).unwrap();
        assert!(
            matches!(&c[0], Carrier::Userspace(why) if why.contains("floating point")),
            "{c:?}"
        );
        // No fq: the userspace engine, saying why; netem is never chosen
        // unasked.
        let machine = Qdiscs::known(true, Err("this kernel has no sch_fq".to_owned()));
        let c = carriers(&lab("auto", "delay = \"5ms\""), &machine).unwrap();
        assert_eq!(
            c,
            [Carrier::Userspace("this kernel has no sch_fq".to_owned())]
        );
    }

    #[test]
    fn asking_for_the_kernel_engine_where_it_cannot_run_is_refused_naming_the_link() {
        let e = carriers(&lab("bpf", "delay = \"5ms\""), &Qdiscs::none()).unwrap_err();
        assert!(e.starts_with("link h1--s1: engine = \"bpf\", but"), "{e}");
        let normal = "delay = \"5ms\"\njitter = \"1ms\"\njitter_distribution = \"normal\"";
        let e = carriers(&lab("bpf", normal), &with_fq()).unwrap_err();
        assert!(e.contains("floating point"), "{e}");
        assert_eq!(
            carriers(&lab("bpf", "delay = \"5ms\""), &with_fq()).unwrap(),
            [Carrier::Bpf]
        );
    }

    /// The engines' own view of a link (nothing to do; what the token
    /// bucket can shape) is the scenario's rule that `up` and the machine
    /// plan decide by, parameters written as zero included.
    #[test]
    fn the_engines_agree_with_the_scenarios_rule() {
        use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate};
        use turbonet_topo::{LinkParams, Loss};
        let delays = [None, Some(Delay::ZERO), Some(Delay::from_micros(5))];
        let probs = [None, Some(LossProb(0.0)), Some(LossProb(0.01))];
        let mut seen = std::collections::BTreeSet::new();
        for rate in [None, Some(Rate::from_gbit(1))] {
            for ecn in [None, Some(QueueLimit::Packets(10))] {
                for delay in delays {
                    for jitter in delays {
                        for loss in probs {
                            for corrupt in probs {
                                for duplicate in probs {
                                    let p = LinkParams {
                                        rate,
                                        ecn: ecn.filter(|_| rate.is_some()),
                                        delay,
                                        jitter,
                                        loss: loss.map(Loss::Bernoulli),
                                        corrupt,
                                        duplicate,
                                        ..LinkParams::default()
                                    };
                                    let imp = Impairment::from_params(&p);
                                    let shaping = p.shaping();
                                    assert_eq!(imp.is_noop(), shaping == Shaping::None, "{p:?}");
                                    assert_eq!(
                                        turbonet_host::kernel::tbf::shaper_supports(&imp).is_ok(),
                                        shaping == Shaping::Rate,
                                        "{p:?}"
                                    );
                                    seen.insert(format!("{shaping:?}"));
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(seen.len(), 3, "every kind of link was tried");
    }
}
