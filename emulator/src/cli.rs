//! Command-line interface.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::control::{Request, Response, Target};
use crate::{bench, check, daemon, exec, inspect, lab, plan};

/// Exit code for invalid input (a scenario with errors, a bad argument).
pub const EXIT_INVALID: u8 = 2;

/// turbonet turns a scenario file into a running data-center fabric:
/// switches and hosts in network namespaces, veth links, addresses and
/// ECMP routes, ready for unmodified software to run against.
#[derive(Debug, Parser)]
#[command(
    name = "turbonet",
    version,
    after_help = "Examples:
  turbonet validate scenarios/fat-tree-k4.toml   check a scenario (no root needed)
  sudo turbonet up scenarios/fat-tree-k4.toml    build and route the fabric
  sudo turbonet check                            probe every host pair
  sudo turbonet exec h0-0-0 -- ping -c1 10.128.0.10
  sudo turbonet down                             remove everything the lab created"
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check a scenario file and print what it describes. Exit 2 if invalid.
    Validate {
        /// Scenario file (TOML).
        file: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build the fabric of a scenario and wait until it is routed.
    Up(UpArgs),
    /// Map a scenario onto physical P4 switches: ports, queues, cables.
    /// Exit 2 if it does not fit.
    Plan(plan::PlanArgs),
    /// Run turbonet's soft switch: one P4Runtime device that runs the
    /// turbonet pipeline on its ports (`up` starts one for target "soft";
    /// `turbonet plan --program` writes to it). Prints the address it
    /// listens on; runs until Ctrl-C.
    Softswitch {
        /// Address to listen on (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:9559")]
        listen: std::net::SocketAddr,
        /// P4Runtime device id.
        #[arg(long, default_value_t = 1)]
        device_id: u64,
        /// Network namespace whose interfaces the device config's ports
        /// name (default: the current one).
        #[arg(long, value_name = "NAME")]
        netns: Option<String>,
        /// Also write the address it listens on to this file, once it
        /// accepts connections.
        #[arg(long, value_name = "PATH")]
        address_file: Option<std::path::PathBuf>,
        /// A port on an interface, PORT@IFACE (as BMv2's `-i`), e.g.
        /// `-i 1@veth1`; repeat per port. Used while the pipeline's device
        /// config names no ports.
        #[arg(short = 'i', long = "interface", value_name = "PORT@IFACE")]
        interfaces: Vec<String>,
    },
    /// Remove everything a lab created (idempotent; works after a crash).
    Down {
        /// Lab name (default: the only lab that is up).
        lab: Option<String>,
    },
    /// Show the labs that are up.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a lab's nodes, links, a node's routes, or BGP state.
    Show {
        /// What to show.
        what: ShowWhat,
        /// Only this node (required for `routes`).
        node: Option<String>,
        #[command(flatten)]
        lab: LabArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show or change links: parameters, engine, per-direction counters.
    #[command(subcommand)]
    Link(LinkCommand),
    /// Take a link, or every link of a node, down.
    Fail {
        /// `link` or `node`.
        kind: TargetKind,
        /// Its name.
        name: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Bring a failed link or node back (routes through it are reinstalled).
    Restore {
        /// `link` or `node`.
        kind: TargetKind,
        /// Its name.
        name: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Flap a link: down for half the period, up for the other half.
    Flap {
        /// Link name.
        link: String,
        /// Period of one down/up cycle, e.g. `2s`, `500ms`.
        #[arg(long)]
        period: String,
        /// Number of cycles.
        #[arg(long, default_value_t = 1)]
        count: u32,
        #[command(flatten)]
        lab: LabArg,
    },
    /// The events the lab daemon has executed (timeline, fail, restore, set).
    Events {
        #[command(flatten)]
        lab: LabArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node (exit code passed through).
    #[command(trailing_var_arg = true)]
    Exec {
        /// Node name.
        node: String,
        /// Command and its arguments (after `--`).
        #[arg(required = true, allow_hyphen_values = true)]
        command: Vec<String>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Check that every host reaches every other host (ICMP from the hosts).
    Check {
        #[command(flatten)]
        lab: LabArg,
        /// Seconds to wait for the last replies (unanswered probes are retried
        /// in up to 4 rounds).
        #[arg(long, default_value_t = 2.0)]
        timeout: f64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove the leftovers of every turbonet lab on this machine.
    Clean,
    /// Measure up and down times and peak memory on bundled scenarios.
    Bench(bench::BenchArgs),
    /// The per-lab daemon (started by `up`; not for direct use).
    #[command(hide = true)]
    Daemon {
        /// Lab name.
        lab: String,
    },
}

/// Arguments of `up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Print only errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Threads that create namespaces (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// What `fail` and `restore` act on.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TargetKind {
    /// One link.
    Link,
    /// Every link of a node.
    Node,
}

/// Link parameters `link set` can change (scenario syntax).
#[derive(Debug, Args)]
pub struct LinkSetArgs {
    /// Bandwidth, e.g. `10gbit`, `100mbit`.
    #[arg(long)]
    pub rate: Option<String>,
    /// One-way delay, e.g. `5ms`, `100us`.
    #[arg(long)]
    pub delay: Option<String>,
    /// Delay jitter, e.g. `1ms`.
    #[arg(long)]
    pub jitter: Option<String>,
    /// Jitter shape: uniform, normal, pareto, paretonormal.
    #[arg(long)]
    pub jitter_distribution: Option<String>,
    /// Whether jitter may reorder packets: true or false.
    #[arg(long)]
    pub reorder: Option<String>,
    /// Loss, e.g. `0.1%`, `1e-6`, or `{ p = "1%", r = "25%" }`.
    #[arg(long)]
    pub loss: Option<String>,
    /// Corruption probability, e.g. `0.01%`.
    #[arg(long)]
    pub corrupt: Option<String>,
    /// Duplication probability, e.g. `0.01%`.
    #[arg(long)]
    pub duplicate: Option<String>,
    /// Queue limit, e.g. `100p`, `64KiB` (needs a rate).
    #[arg(long)]
    pub queue: Option<String>,
    /// ECN marking threshold, e.g. `30p` (needs a rate).
    #[arg(long)]
    pub ecn: Option<String>,
}

impl LinkSetArgs {
    /// The given parameters as `key=value` pairs.
    pub fn pairs(&self) -> Vec<(String, String)> {
        [
            ("rate", &self.rate),
            ("delay", &self.delay),
            ("jitter", &self.jitter),
            ("jitter-distribution", &self.jitter_distribution),
            ("reorder", &self.reorder),
            ("loss", &self.loss),
            ("corrupt", &self.corrupt),
            ("duplicate", &self.duplicate),
            ("queue", &self.queue),
            ("ecn", &self.ecn),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_owned(), v.clone())))
        .collect()
    }
}

/// `turbonet link ...`.
#[derive(Debug, Subcommand)]
pub enum LinkCommand {
    /// Change an impaired link's parameters at run time, e.g.
    /// `turbonet link set edge0-0--agg0-0 --delay 5ms --loss 0.1%`.
    Set {
        /// Link name.
        link: String,
        #[command(flatten)]
        params: Box<LinkSetArgs>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Put a link back to the scenario's parameters.
    Reset {
        /// Link name.
        link: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Parameters and per-direction counters (packets, bytes, drops by
    /// cause, queue depth) of every link, or of one.
    Show {
        /// Link name, e.g. `edge0-0--agg0-0` (default: all links).
        link: Option<String>,
        #[command(flatten)]
        lab: LabArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which lab a command is about.
#[derive(Debug, Args)]
pub struct LabArg {
    /// Lab name (default: the only lab that is up).
    #[arg(long, short = 'l')]
    pub lab: Option<String>,
}

/// What `show` shows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ShowWhat {
    /// Switches and hosts.
    Nodes,
    /// Links and their addresses.
    Links,
    /// A node's kernel routing table.
    Routes,
    /// BGP: every switch's agent, sessions and routes; with NODE, its
    /// sessions.
    Bgp,
}

/// Runs a parsed command line.
impl Command {
    /// True for the long-running servers (the lab daemon, the soft switch).
    pub(crate) fn is_server(&self) -> bool {
        matches!(self, Command::Daemon { .. } | Command::Softswitch { .. })
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Validate { file, json } => lab::validate(&file, json),
        Command::Up(args) => lab::up(&args),
        Command::Plan(args) => plan::plan(&args),
        Command::Softswitch {
            listen,
            device_id,
            netns,
            address_file,
            interfaces,
        } => crate::p4rt::softswitch(
            listen,
            device_id,
            netns.as_deref(),
            address_file.as_deref(),
            &interfaces,
        ),
        Command::Down { lab } => lab::down(lab.as_deref()),
        Command::Status { json } => inspect::status(json),
        Command::Show {
            what,
            node,
            lab,
            json,
        } => inspect::show(what, node.as_deref(), lab.lab.as_deref(), json),
        Command::Link(LinkCommand::Show { link, lab, json }) => {
            inspect::link_show(link.as_deref(), lab.lab.as_deref(), json)
        }
        Command::Link(LinkCommand::Set { link, params, lab }) => {
            if let Err(e) = crate::control::parse_patch(&params.pairs()) {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(EXIT_INVALID));
            }
            ask(
                lab.lab.as_deref(),
                Request::LinkSet {
                    link,
                    params: params.pairs(),
                },
            )
        }
        Command::Link(LinkCommand::Reset { link, lab }) => {
            ask(lab.lab.as_deref(), Request::LinkReset { link })
        }
        Command::Fail { kind, name, lab } => ask(
            lab.lab.as_deref(),
            Request::Fail {
                target: target(kind, name),
            },
        ),
        Command::Restore { kind, name, lab } => ask(
            lab.lab.as_deref(),
            Request::Restore {
                target: target(kind, name),
            },
        ),
        Command::Flap {
            link,
            period,
            count,
            lab,
        } => {
            if let Err(e) = period.parse::<turbonet_topo::units::Delay>() {
                eprintln!("error: --period {period}: {e}");
                return Ok(ExitCode::from(EXIT_INVALID));
            }
            ask(
                lab.lab.as_deref(),
                Request::Flap {
                    link,
                    period,
                    count,
                },
            )
        }
        Command::Events { lab, json } => inspect::events(lab.lab.as_deref(), json),
        Command::Exec { node, command, lab } => exec::exec(lab.lab.as_deref(), &node, &command),
        Command::Check { lab, timeout, json } => check::check(lab.lab.as_deref(), timeout, json),
        Command::Clean => lab::clean(),
        Command::Bench(args) => bench::bench(&args),
        Command::Daemon { lab } => daemon::run(&lab),
    }
}

fn target(kind: TargetKind, name: String) -> Target {
    match kind {
        TargetKind::Link => Target::Link(name),
        TargetKind::Node => Target::Node(name),
    }
}

/// Sends a request to the lab's daemon and prints its answer.
fn ask(lab_name: Option<&str>, request: Request) -> Result<ExitCode> {
    let (dir, _) = lab::resolve(lab_name)?;
    match crate::control::call(&dir, &request)? {
        Response::Ok { message } => {
            println!("{message}");
            Ok(ExitCode::SUCCESS)
        }
        Response::Error { message } => {
            eprintln!("error: {message}");
            Ok(ExitCode::from(EXIT_INVALID))
        }
        Response::Bgp { .. } => Ok(ExitCode::SUCCESS),
    }
}
