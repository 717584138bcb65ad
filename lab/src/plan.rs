//! `turbonet plan`: the port mapper and queue mapper of the P4 targets, as a
//! planner. Maps a scenario's virtual fabric onto physical programmable
//! switches ([`turbonet_topo::mapper`]): what runs where and what a person
//! must cable, or what is short; and with `--program`, writes the plan into
//! switches that run the turbonet pipeline.

use std::path::PathBuf;

use turbonet_topo::Lab;
use turbonet_topo::mapper::{MapConfig, MapError, Mapping, PhysicalSwitch};
use turbonet_topo::units::Rate;

use crate::error::{Context, Error, Result};
use crate::up;

/// Targets that run the turbonet pipeline on (real or emulated) switches.
const TARGETS: [&str; 2] = ["p4rt", "soft"];

/// What to plan.
#[derive(Debug, Clone)]
pub struct Request {
    /// The scenario file.
    pub file: PathBuf,
    /// `p4rt` or `soft`.
    pub target: String,
    /// Physical switches, `NAME=PORTSxSPEED`; none: the scenario's own.
    pub switches: Vec<String>,
    /// Egress queues per physical port.
    pub queues: u32,
    /// The rate a link without one counts as.
    pub default_rate: String,
    /// Switches to program, `NAME=HOST:PORT`.
    pub program: Vec<String>,
    /// With `program`: the P4Info the switches run (default turbonet's).
    pub p4info: Option<PathBuf>,
    /// With `program`: the compiled pipeline sent with the P4Info.
    pub device_config: Option<PathBuf>,
    /// With `program`: the file holding the token the switches require.
    pub token_file: Option<PathBuf>,
}

/// A plan.
#[derive(Debug)]
pub struct Plan {
    /// The lab planned.
    pub lab: Lab,
    /// The target planned for.
    pub target: String,
    /// The physical switches and queues.
    pub config: MapConfig,
    /// The mapping, or why the fabric does not fit.
    pub mapping: Result<Mapping, MapError>,
    /// Switches to program: (name, address).
    pub targets: Vec<(String, String)>,
}

/// One switch `program` wrote.
#[derive(Debug, Clone)]
pub struct Programmed {
    /// Its name in the plan.
    pub switch: String,
    /// Its P4Runtime address.
    pub addr: String,
    /// Entities written.
    pub entities: usize,
    /// Table entries read back.
    pub tables: usize,
}

/// The arguments as a mapper configuration, or what is wrong with them.
fn config(args: &Request) -> Result<MapConfig, String> {
    match args.target.as_str() {
        t if TARGETS.contains(&t) => {}
        "netns" => {
            return Err(
                "`plan` maps onto programmable switches: --target must be p4rt or \
                 soft (on netns every virtual port is its own veth; nothing to plan)"
                    .into(),
            );
        }
        other => {
            return Err(format!(
                "unknown target `{other}` for --target: valid targets are {}",
                TARGETS.join(", ")
            ));
        }
    }
    if args.switches.is_empty() {
        return Err(format!(
            "{} (or plan a scenario whose target is soft or p4rt: it has its own)",
            MapError::NoSwitch
        ));
    }
    let switches = args
        .switches
        .iter()
        .map(|s| s.parse::<PhysicalSwitch>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--switch: {e}"))?;
    let default_rate: Rate =
        args.default_rate
            .parse()
            .map_err(|e: turbonet_topo::units::UnitError| match e.hint() {
                Some(h) => format!("--default-rate {}: {}; {h}", args.default_rate, e.message()),
                None => format!("--default-rate {}: {}", args.default_rate, e.message()),
            })?;
    let mut config = MapConfig::new(switches);
    config.queues = args.queues;
    config.default_rate = default_rate;
    Ok(config)
}

/// `turbonet plan FILE --switch NAME=PORTSxSPEED ...`: the mapping (or
/// why it does not fit), with the arguments checked first.
pub fn plan(args: &Request) -> Result<Plan> {
    let (lab, _) = up::load(&args.file)?;
    // Without --switch, a soft or p4rt scenario is planned onto its own
    // switches.
    let own = if args.switches.is_empty() {
        match lab.target {
            turbonet_topo::Target::Soft => Some(crate::dataplane::p4::soft::map_config()),
            turbonet_topo::Target::P4rt => lab
                .p4rt
                .as_ref()
                .map(crate::dataplane::p4::switches::map_config),
            turbonet_topo::Target::Netns => None,
        }
    } else {
        None
    };
    let target = if own.is_some() {
        lab.target.to_string()
    } else {
        args.target.clone()
    };
    let config = match own {
        Some(c) => c,
        None => config(args).map_err(Error::Invalid)?,
    };
    let targets = program_targets(args, &config).map_err(Error::Invalid)?;
    let mapping = turbonet_topo::mapper::map(&lab.fabric, &config);
    Ok(Plan {
        lab,
        target,
        config,
        mapping,
        targets,
    })
}

/// `--program NAME=HOST:PORT` as (switch, address) pairs, each naming a
/// `--switch`; checked before anything is planned or printed.
fn program_targets(args: &Request, config: &MapConfig) -> Result<Vec<(String, String)>, String> {
    args.program
        .iter()
        .map(|spec| {
            let (name, addr) = spec.split_once('=').ok_or_else(|| {
                format!("--program {spec}: write NAME=HOST:PORT, e.g. s1=127.0.0.1:9559")
            })?;
            if !config.switches.iter().any(|s| s.name == name) {
                return Err(format!(
                    "--program {spec}: no switch {name} in the plan (the --switch names are {})",
                    config
                        .switches
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok((name.to_owned(), addr.to_owned()))
        })
        .collect()
}

/// `--program`: writes `mapping` (of `plan`) into each switch named.
pub fn program(args: &Request, plan: &Plan, mapping: &Mapping) -> Result<Vec<Programmed>> {
    let (lab, targets) = (&plan.lab, &plan.targets);
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    use crate::dataplane::p4::entries;
    use turbonet_p4::Client;
    let p4info = match &args.p4info {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            turbonet_p4::parse_p4info(&text)
                .with_context(|| format!("{}: not a text-format P4Info", path.display()))?
        }
        None => turbonet_p4::turbonet_p4info(),
    };
    let schema = turbonet_p4::Schema::new(&p4info)?;
    // A switch reached at an address: its clock is its architecture's.
    let target = turbonet_p4::pipeline::Target::of_arch(&p4info);
    let pipeline = turbonet_p4::Pipeline::resolve(&schema, &p4info, target)?;
    let device_config = match &args.device_config {
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        None => crate::dataplane::p4::switches::default_device_config(args.p4info.is_none()),
    };
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            turbonet_p4::Token::bearer(&text)
                .with_context(|| format!("{}: not a token", path.display()))?
        }
        None => turbonet_p4::Token::none(),
    };
    let routes = turbonet_routing::static_routes(&lab.fabric);
    let params: Vec<_> = lab.fabric.links.iter().map(|l| l.params.clone()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut done = Vec::new();
        for (name, addr) in targets {
            let state = entries::FabricState {
                routes: &routes,
                params: &params,
                failures: &turbonet_routing::Failures::default(),
            };
            let entities = entries::switch_entries(lab, mapping, state, &pipeline, name)?;
            let count = entities.len();
            let mut client = Client::connect_with(addr, 1, 1, token.clone()).await?;
            client
                .set_pipeline(p4info.clone(), device_config.clone())
                .await?;
            client
                .write(turbonet_p4::p4::v1::update::Type::Insert, entities)
                .await?;
            let tables = client.read(entries::all_table_entries()).await?.len();
            done.push(Programmed {
                switch: name.clone(),
                addr: addr.clone(),
                entities: count,
                tables,
            });
        }
        Ok(done)
    })
}
