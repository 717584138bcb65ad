//! Command-line interface.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use turbonet_topo::mapper;
use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate, UnitError};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check a scenario file and print what it describes. Exit 2 if invalid.
    Validate(ValidateArgs),
    /// Build the fabric of a scenario and wait until it is routed.
    Up(UpArgs),
    /// Map a scenario onto P4 switches, or plan it over several machines.
    ///
    /// Map a scenario onto physical P4 switches (`--switch`): ports,
    /// queues, cables. Exit 2 if it does not fit.
    ///
    /// With `--machines M`, plan a netns lab over M machines instead, one
    /// turbonet worker each: which nodes each machine runs, the links cut
    /// between machines (each a VXLAN tunnel with a VNI of its own), which
    /// machine's link engine carries each impaired cut link (its owner),
    /// each machine's network namespaces, devices and kernel memory, and
    /// the partition's hash. The partition is deterministic: every worker
    /// computes it again from the scenario, and their hashes must agree.
    /// Pods stay whole where a machine has room for them, HPN segments and
    /// every switch with its hosts always (a host's first link is never
    /// cut), each
    /// machine at most 5% above its share of namespaces, devices and engine
    /// load (or one such piece above, where they are too coarse). Exit 2
    /// if the lab cannot be spread over M machines.
    #[command(after_help = "Examples:
  turbonet plan scenarios/fat-tree-k8.toml --switch s1=64x100G
  turbonet plan --machines 2 scenarios/hpn-pod.toml
  turbonet plan --machines 4 --json scenarios/hpn-pods.toml")]
    Plan(PlanArgs),
    /// Run a lab on a Kubernetes cluster: its workers as Kubernetes objects.
    #[command(subcommand)]
    Kube(KubeCommand),
    /// Run this machine's part of a lab over several machines.
    ///
    /// Run this machine's part of a lab over M machines: one worker per
    /// machine, each started with the same scenario, its index and M.
    /// Each computes the partition (`turbonet plan --machines M`) and says
    /// its hash; worker 0 coordinates, listening for the others, which
    /// connect to it (`--coordinator`) with the lab's token, trying again
    /// until it answers. Once all M are there, each builds its part: the
    /// nodes it runs, and a VXLAN tunnel to the far machine for each link
    /// cut between machines. The underlay (each machine's address toward
    /// worker 0, or `--underlay`) must carry every cut link's MTU plus 50
    /// bytes, or the worker refuses to start. A machine lost (its worker
    /// silent for 3 s) has its cut links taken down at the others; back,
    /// they come up again. A worker started again over its part keeps it.
    /// Runs until SIGTERM or Ctrl-C, then takes its part down. Every
    /// worker listens on the coordinator's port on its machine: on any
    /// machine, `check`, `show`, `link show`, `link set`, `capture`,
    /// `snapshot` and `events` are the whole lab's through them, and a
    /// `fail` or `restore` made on one machine is made on every other.
    #[command(
        after_help = "Examples (a lab over two machines at 10.0.0.1 and 10.0.0.2):
  head -c 32 /dev/urandom | base64 > token && chmod 600 token   # copied to both
  10.0.0.1# turbonet worker --index 0 --of 2 --coordinator 10.0.0.1:7789 --token-file token lab.toml
  10.0.0.2# turbonet worker --index 1 --of 2 --coordinator 10.0.0.1:7789 --token-file token lab.toml
  turbonet kube render lab.toml --machines 2 --image IMAGE   # the same, on Kubernetes"
    )]
    Worker(WorkerArgs),
    /// Run turbonet's soft switch, a P4Runtime device
    ///
    /// Run turbonet's soft switch: one P4Runtime device that runs the
    /// turbonet pipeline on its ports (`up` starts one for target "soft";
    /// `turbonet plan --program` writes to it). Prints where it listens;
    /// runs until Ctrl-C.
    ///
    /// Whoever reaches its P4Runtime server can reprogram it, so it serves
    /// either on a Unix socket only its owner may use (`--listen
    /// unix:PATH`, mode 0600: how a lab's own soft switch serves its
    /// daemon) or on TCP with a token every call must carry (`--listen
    /// HOST:PORT --token-file FILE`; clients send `authorization: Bearer
    /// TOKEN` in each call's metadata, and `turbonet plan --program` takes
    /// the same `--token-file`). `--insecure` serves TCP to anyone, for a
    /// switch no one else can reach (inside a namespace of its own).
    #[command(verbatim_doc_comment)]
    Softswitch(SoftswitchArgs),
    /// Remove everything a lab created (idempotent; works after a crash).
    Down(DownArgs),
    /// Show the labs that are up.
    Status(StatusArgs),
    /// Show a lab's nodes, links, a node's routes, or BGP state.
    Show(ShowArgs),
    /// Show or change links: parameters, engine, per-direction counters.
    #[command(subcommand)]
    Link(LinkCommand),
    /// Take a link, or every link of a node, down.
    Fail(TargetArgs),
    /// Bring a failed link or node back (routes through it are reinstalled).
    Restore(TargetArgs),
    /// Flap a link: down for half the period, up for the other half.
    Flap(FlapArgs),
    /// Capture a link's frames (and the link engine's drops, with why).
    ///
    /// Capture a link: what its receiving ends get, after loss, delay and
    /// corruption, and on a link the link engine carries the frames it
    /// dropped, annotated with why. Prints a line per frame, or writes
    /// pcapng (Wireshark, tshark, tcpdump -r) with `-w`. Runs until Ctrl-C,
    /// `--count` or `--duration`.
    #[command(after_help = "Examples:
  sudo turbonet capture h1--s1                      a line per frame
  sudo turbonet capture edge0-0--agg0-0 -w e.pcapng --duration 10
  sudo turbonet capture h1--s1 --direction a-b -w - | tshark -r -")]
    Capture(CaptureArgs),
    /// Write the fabric as it stands, for verifiers.
    ///
    /// Write the fabric as it stands into a new directory, for verifiers:
    /// `snapshot.json` (topology, failures, every switch's forwarding
    /// table, every built-in agent's Adj-RIB-In and Loc-RIB with path
    /// attributes) and FRR's and BIRD's configurations under `configs/`.
    Snapshot(SnapshotArgs),
    /// Write a scenario's fabric as JSON or Graphviz, without building it.
    ///
    /// Write a scenario's fabric (nodes, ports, addresses, ASNs, links and
    /// their parameters) without bringing anything up: JSON, or a Graphviz
    /// graph (`dot -Tsvg`). No root needed.
    Export(ExportArgs),
    /// Draw the fabric by tiers as SVG, planned or running.
    ///
    /// Draw the fabric by tiers (cores on top, hosts at the bottom; pods
    /// and planes side by side, rails coloured) as SVG, or as a Graphviz
    /// graph. For a running lab, failed links and nodes are red and links
    /// are shaded by their load now. Tiers too wide to read are grouped by
    /// pod, plane and rail with counts; --pod, --segment and --plane draw
    /// a part node by node. No root needed for a scenario file.
    Graph(GraphArgs),
    /// Serve a live web page of a running lab.
    ///
    /// Serve a live web page of a running lab: the fabric drawn as
    /// `graph` draws it, links coloured by state and load as they change,
    /// the events as they happen, and for a graded lab its tasks and a
    /// button that grades them. Click a link for its parameters and
    /// counters. The page only looks; nothing on it changes the lab.
    #[command(after_help = "Examples:
  sudo turbonet ui                              http://127.0.0.1:8765/ for the only lab up
  sudo turbonet ui --lab k4 --listen 0.0.0.0:9000   for a classroom's browsers
  ssh -L 8765:127.0.0.1:8765 server             then open http://127.0.0.1:8765/ at home")]
    Ui(UiArgs),
    /// Watch the links live: rates, frames, drops and queues.
    ///
    /// Watch the links live: each direction's rate, frames, drops and
    /// queue, busiest first, failed links marked, refreshed in place.
    #[command(after_help = "Examples:
  sudo turbonet watch                    refresh every second until Ctrl-C
  sudo turbonet watch --top 10 -n 0.5    the ten busiest, twice a second
  sudo turbonet watch --json --count 5   five readings as JSON Lines")]
    Watch(WatchArgs),
    /// What the lab did and saw, on one clock.
    ///
    /// What the lab did and saw, on one clock: every fail, restore, flap,
    /// link set, timeline step and BGP session change, the daemon's
    /// restarts (`--follow` streams them as they happen).
    Events(EventsArgs),
    /// Run an experiment: up, workloads, timeline, checks, reports, down.
    ///
    /// Run an experiment: bring its scenario up, run its workloads and
    /// timeline, check its `[[expect]]` clauses, write reports (report.json,
    /// junit.xml, summary.txt) and take the lab down (also on failure or
    /// Ctrl-C). Exit 0 when every expectation holds, 1 when one does not, 2
    /// when the file is invalid
    Run(RunArgs),
    /// Start, stop or show a running lab's workloads
    #[command(subcommand)]
    Workload(WorkloadCommand),
    /// Graded labs: start one, read its tasks, check the work.
    ///
    /// Graded labs: a fabric, tasks and a checker that scores them
    /// (`labs/NAME/lab.toml`, or under $TURBONET_LABS)
    #[command(subcommand)]
    Lab(LabCommand),
    /// Run a command inside a node (exit code passed through).
    #[command(trailing_var_arg = true)]
    Exec(ExecArgs),
    /// Run an Open MPI program across the lab's hosts.
    ///
    /// Run an Open MPI program across the lab's hosts (exit code passed
    /// through). Needs `[mgmt]`: mpirun runs on the management network and
    /// starts a daemon in each host's namespace, so Open MPI's control
    /// channel never crosses the fabric; the ranks' data does, over TCP,
    /// with every collective's algorithm pinned (Open MPI's tuned ring,
    /// pairwise all-to-all and binomial broadcast by default) so its traffic
    /// is the same every run. Everything after `--` goes to mpirun after
    /// turbonet's options: the program and its arguments, after any mpirun
    /// options of yours.
    #[command(
        trailing_var_arg = true,
        after_help = "Examples:
  sudo turbonet mpirun -- hostname
  sudo turbonet mpirun --job train -- python3 allreduce.py
  sudo turbonet mpirun --algorithm halving-doubling -- --tag-output ./osu_allreduce
  sudo turbonet mpirun --show -- ./a.out     print the mpirun command line"
    )]
    Mpirun(MpirunArgs),
    /// Open MPI's remote shell for `turbonet mpirun`: runs a shell command
    /// line in a host of lab $TURBONET_LAB.
    #[command(name = "mpi-agent", hide = true, trailing_var_arg = true)]
    MpiAgent(MpiAgentArgs),
    /// Check that every host reaches every other host (ICMP from the hosts).
    Check(CheckArgs),
    /// Remove the leftovers of every turbonet lab on this machine.
    Clean,
    /// Serve labs to the members of a group, without root
    ///
    /// Run it as root, as a service. Members then run `turbonet lab ...`,
    /// `exec`, `link`, `fail`, `restore`, `flap`, `workload`, `show`,
    /// `status`, `events`, `watch`, `check` and `ui` as themselves: each
    /// command runs here with their terminal, on their labs only (named
    /// `<user>-<lab>`), within the limits the administrator set; their labs'
    /// nodes belong to a user namespace of theirs, and what they `exec` in a
    /// node runs as them with the network capabilities over those nodes
    /// only. Settings (docs/labs.md has them all): `group`, `max_nodes`,
    /// `max_queue`, `requests`, `max_processes`, `max_memory`, and
    /// `[users.NAME] max_nodes = N`.
    Serve(ServeArgs),
    /// Measure up and down times and peak memory on bundled scenarios.
    Bench(BenchArgs),
    /// The per-lab daemon (started by `up`; not for direct use).
    #[command(hide = true)]
    Daemon(DaemonArgs),
}

/// Arguments of `validate`.
#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `softswitch`.
#[derive(Debug, Args)]
pub(crate) struct SoftswitchArgs {
    /// Where to serve: `unix:PATH`, or `HOST:PORT` (port 0: any free
    /// port) with `--token-file` or `--insecure`.
    #[arg(long, default_value = "127.0.0.1:9559")]
    pub listen: turbonet_softswitch::Listen,
    /// With a TCP `--listen`: the file holding the token clients must
    /// present; a file that does not exist gets a new random token
    /// (mode 0600).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// With a TCP `--listen`: serve without a token (anyone who can
    /// reach the address can reprogram the switch).
    #[arg(long, conflicts_with = "token_file")]
    pub insecure: bool,
    /// P4Runtime device id.
    #[arg(long, default_value_t = 1)]
    pub device_id: u64,
    /// Network namespace whose interfaces the device config's ports
    /// name (default: the current one).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// A port on an interface, PORT@IFACE (as BMv2's `-i`), e.g.
    /// `-i 1@veth1`; repeat per port. Used while the pipeline's device
    /// config names no ports.
    #[arg(short = 'i', long = "interface", value_name = "PORT@IFACE")]
    pub interfaces: Vec<String>,
}

/// Arguments of `down`.
#[derive(Debug, Args)]
pub(crate) struct DownArgs {
    /// Lab name (default: the only lab that is up).
    pub lab: Option<String>,
}

/// Arguments of `status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Say only whether lab LAB's part on this machine is up and its daemon
    /// answers: exit 0 if so, else say why and exit non-zero (a worker
    /// pod's readiness probe).
    #[arg(long, value_name = "LAB", conflicts_with = "json")]
    pub ready: Option<String>,
}

/// Arguments of `show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// What to show.
    pub what: ShowWhat,
    /// Only this node (required for `routes`).
    pub node: Option<String>,
    #[command(flatten)]
    pub lab: LabArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `fail` and `restore`.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// `link` or `node`.
    pub kind: TargetKind,
    /// Its name.
    pub name: String,
    #[command(flatten)]
    pub lab: LabArg,
}

/// Arguments of `flap`.
#[derive(Debug, Args)]
pub(crate) struct FlapArgs {
    /// Link name.
    pub link: String,
    /// Period of one down/up cycle, e.g. `2s`, `500ms`.
    #[arg(long)]
    pub period: String,
    /// Number of cycles.
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    #[command(flatten)]
    pub lab: LabArg,
}

/// Arguments of `capture`.
#[derive(Debug, Args)]
pub(crate) struct CaptureArgs {
    /// The link, e.g. `edge0-0--agg0-0`.
    pub link: String,
    /// `a-b` (from the link's first node to its second), `b-a`, or
    /// `both`.
    #[arg(long, default_value = "both", value_parser = ["a-b", "b-a", "both"])]
    pub direction: String,
    /// Write pcapng to this file (`-`: standard output) instead of
    /// printing.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Stop after this many frames.
    #[arg(long, short = 'c')]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = positive_seconds)]
    pub duration: Option<f64>,
    /// Bytes kept of each frame.
    #[arg(long, default_value_t = 65_535)]
    pub snaplen: u32,
    #[command(flatten)]
    pub lab: LabArg,
}

/// Arguments of `snapshot`.
#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    /// A new (or empty) directory.
    pub dir: PathBuf,
    #[command(flatten)]
    pub lab: LabArg,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// `json` or `dot`.
    #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
    pub format: ExportFormat,
    /// Where to write it (default: standard output).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Arguments of `graph`.
#[derive(Debug, Args)]
pub(crate) struct GraphArgs {
    /// A scenario file, or a running lab (default: the only lab that
    /// is up).
    pub what: Option<String>,
    /// Where to write it (default: standard output).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// `svg` or `dot`.
    #[arg(long, value_enum, default_value_t = GraphFormat::Svg)]
    pub format: GraphFormat,
    /// Only this pod (and the cores that join it to the others).
    #[arg(long)]
    pub pod: Option<u32>,
    /// Only this HPN segment: its ToRs and hosts, and the switches
    /// above them.
    #[arg(long)]
    pub segment: Option<u32>,
    /// Only this plane's switches (and the hosts).
    #[arg(long)]
    pub plane: Option<u32>,
    /// Boxes a tier may hold before it is grouped.
    #[arg(long, default_value_t = turbonet_graph::MAX_PER_ROW)]
    pub max_per_tier: usize,
}

/// Arguments of `ui`.
#[derive(Debug, Args)]
pub(crate) struct UiArgs {
    #[command(flatten)]
    pub lab: LabArg,
    /// Where to listen (port 0: any free port; the address is printed).
    #[arg(long, default_value = UI_LISTEN)]
    pub listen: std::net::SocketAddr,
}

/// Arguments of `watch`.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub lab: LabArg,
    /// Seconds between readings (the daemon counts every 100 ms).
    #[arg(long, short = 'n', default_value_t = 1.0, value_parser = positive_seconds)]
    pub interval: f64,
    /// Show at most this many directions (the busiest; down links
    /// after them).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Also show idle directions.
    #[arg(long)]
    pub all: bool,
    /// Stop after this many readings (default: until Ctrl-C).
    #[arg(long)]
    pub count: Option<u64>,
    /// Print each reading as one line of JSON (every direction).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `events`.
#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    pub lab: LabArg,
    /// After the events so far, print each new one as it happens, until
    /// Ctrl-C.
    #[arg(long, short)]
    pub follow: bool,
    /// Print JSON (with --follow: one object per line, as they come).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `exec`.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// Node name.
    pub node: String,
    /// Command and its arguments (after `--`).
    #[arg(required = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub lab: LabArg,
}

/// Arguments of `mpirun`.
#[derive(Debug, Args)]
pub(crate) struct MpirunArgs {
    /// Run one rank on each of this `[[job]]`'s ranks, in rank order,
    /// with data on the job's rail (default: one rank per host, in node
    /// order, on every fabric port).
    #[arg(long)]
    pub job: Option<String>,
    /// How Open MPI's collectives run.
    #[arg(long, value_enum, default_value_t = MpiAlgorithm::Ring)]
    pub algorithm: MpiAlgorithm,
    /// Print the mpirun command line (and write its hostfile) instead
    /// of running it.
    #[arg(long)]
    pub show: bool,
    /// The program and its arguments (after `--`).
    #[arg(required = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub lab: LabArg,
}

/// Arguments of `mpi-agent`.
#[derive(Debug, Args)]
pub(crate) struct MpiAgentArgs {
    /// The host, then the command line.
    #[arg(required = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Arguments of `check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub lab: LabArg,
    /// Seconds to wait for the last replies (unanswered probes are retried
    /// in up to 4 rounds).
    #[arg(long, default_value_t = 2.0)]
    pub timeout: f64,
    /// Probe only this many hosts behind every ToR, edge or leaf (every
    /// HPN segment) from each host, chosen by the lab's seed: a large
    /// fabric checked everywhere in seconds.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen (mode 0660, owned by root and the group).
    #[arg(long, default_value = turbonet_lab::serve::SOCKET)]
    pub socket: PathBuf,
    /// The administrator's settings.
    #[arg(long, default_value = turbonet_lab::serve::CONFIG)]
    pub config: PathBuf,
}

/// Arguments of `daemon`.
#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    /// Lab name.
    pub lab: String,
    /// Run the daemon itself, not its supervisor.
    #[arg(long)]
    pub worker: bool,
    /// With `--worker`: how many daemons of this lab came before it.
    #[arg(long, default_value_t = 0)]
    pub restarts: u32,
    /// Run shard INDEX/COUNT of the lab's built-in BGP speakers for
    /// the daemon (on stdin and stdout).
    #[arg(long, value_name = "INDEX/COUNT", value_parser = shard_arg)]
    pub bgp_shard: Option<(usize, usize)>,
    /// With `--bgp-shard`: the speakers' clock starts here (monotonic
    /// nanoseconds).
    #[arg(long, default_value_t = 0)]
    pub epoch_ns: u128,
}

/// Arguments of `up`.
#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Print only errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Threads that create namespaces (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Experiment file: a scenario with `[[workload]]`, `[[timeline]]` and
    /// `[[expect]]` tables.
    pub file: PathBuf,
    /// Directory for the reports (default: `reports/<file name>`).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Leave the lab up afterwards (`turbonet down` removes it).
    #[arg(long)]
    pub keep: bool,
    /// Seconds the workloads may run before they are stopped (and the run
    /// fails).
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Run it N times (each into `OUT/run-K`) and report the spread of
    /// every figure: min, median and max over the runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Print the report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Print only the summary (no progress).
    #[arg(long, short)]
    pub quiet: bool,
}

/// How `turbonet mpirun` pins Open MPI's collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MpiAlgorithm {
    /// Ring AllReduce, AllGather and ReduceScatter; pairwise All-to-All.
    Ring,
    /// Recursive doubling AllReduce and AllGather, recursive halving
    /// ReduceScatter, Bruck All-to-All.
    HalvingDoubling,
}

/// `turbonet workload ...`
#[derive(Debug, Subcommand)]
pub(crate) enum WorkloadCommand {
    /// Start the workloads of a file (`[[workload]]` tables, and the
    /// `[[job]]`s they run over), or one of the scenario's workloads again
    Start {
        /// A file of `[[workload]]` tables, or the name of a scenario
        /// workload.
        what: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Stop a running workload
    Stop {
        /// Workload name.
        name: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// What the workloads did so far: per size for collectives (time,
    /// algorithm and bus bandwidth, slowest step), per flow for traffic
    Show {
        /// One workload (default: all).
        name: Option<String>,
        #[command(flatten)]
        lab: LabArg,
        /// Print the reports as JSON (every flow, operation and series).
        #[arg(long)]
        json: bool,
    },
}

/// `turbonet lab ...`
#[derive(Debug, Subcommand)]
pub(crate) enum LabCommand {
    /// The labs there are: name, title, tasks and points
    List {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring a lab's fabric up, as it is before the student's work (with
    /// the faults of a troubleshooting lab made)
    Start {
        /// The lab (its folder's name).
        name: String,
        /// Which faults a troubleshooting lab makes: every student given
        /// the same seed meets the same ones (default: the lab's seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Print only errors.
        #[arg(long, short)]
        quiet: bool,
    },
    /// What the running lab asks: each task, its points and what it checks
    Tasks {
        #[command(flatten)]
        lab: LabArg,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Grade the running lab: a score per task and in total, and what is
    /// still wrong. Exit 0 at full score, 1 below it
    Check {
        /// One task (default: all).
        task: Option<String>,
        #[command(flatten)]
        lab: LabArg,
        /// Print the grade as JSON.
        #[arg(long)]
        json: bool,
        /// Also write the grade as JUnit XML to this file.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// A nudge for a task
    Hint {
        /// The task.
        task: String,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Start the running lab again from scratch (down, then up; the same
    /// faults unless another seed is given)
    Reset {
        /// Make the faults of this seed instead.
        #[arg(long)]
        seed: Option<u64>,
        #[command(flatten)]
        lab: LabArg,
    },
    /// Take the running lab down
    Stop {
        #[command(flatten)]
        lab: LabArg,
    },
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// The layout of a snapshot's `topology` (docs/instruments.md).
    Json,
    /// A Graphviz graph, tiers bottom to top.
    Dot,
}

/// What `graph` writes.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum GraphFormat {
    /// An SVG picture.
    Svg,
    /// A Graphviz graph (`dot -Tsvg`), a rank per tier.
    Dot,
}

/// What `fail` and `restore` act on.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum TargetKind {
    /// One link.
    Link,
    /// Every link of a node.
    Node,
}

/// Link parameters `link set` can change, in scenario syntax (checked as
/// the scenario's are: a bad value is refused with what would be valid).
#[derive(Debug, Args)]
pub(crate) struct LinkSetArgs {
    /// Bandwidth, e.g. `10gbit`, `100mbit`.
    #[arg(long, value_parser = unit::<Rate>)]
    pub rate: Option<Rate>,
    /// One-way delay, e.g. `5ms`, `100us`.
    #[arg(long, value_parser = unit::<Delay>)]
    pub delay: Option<Delay>,
    /// Delay jitter, e.g. `1ms`.
    #[arg(long, value_parser = unit::<Delay>)]
    pub jitter: Option<Delay>,
    /// Jitter shape: uniform, normal, pareto, paretonormal.
    #[arg(long, value_parser = unit::<JitterDistribution>)]
    pub jitter_distribution: Option<JitterDistribution>,
    /// Whether jitter may reorder packets: true or false.
    #[arg(long)]
    pub reorder: Option<bool>,
    /// Loss, e.g. `0.1%`, `1e-6`, or `{ p = "1%", r = "25%" }`.
    #[arg(long, value_parser = unit::<Loss>)]
    pub loss: Option<Loss>,
    /// Corruption probability, e.g. `0.01%`.
    #[arg(long, value_parser = unit::<LossProb>)]
    pub corrupt: Option<LossProb>,
    /// Duplication probability, e.g. `0.01%`.
    #[arg(long, value_parser = unit::<LossProb>)]
    pub duplicate: Option<LossProb>,
    /// Queue limit, e.g. `100p`, `64KiB` (needs a rate).
    #[arg(long, value_parser = unit::<QueueLimit>)]
    pub queue: Option<QueueLimit>,
    /// ECN marking threshold, e.g. `30p` (needs a rate).
    #[arg(long, value_parser = unit::<QueueLimit>)]
    pub ecn: Option<QueueLimit>,
}

/// A number of seconds above zero (and at least 10 ms: the daemon counts
/// every 100 ms).
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s >= 0.01 && s.is_finite() => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds of at least 0.01, e.g. 1 or 0.5"
        )),
    }
}

/// A count of machines: one or more.
fn machine_count(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(m) if m >= 1 => Ok(m),
        _ => Err(format!(
            "`{text}` is not a number of machines: 1 or more (1 plans the lab on one machine)"
        )),
    }
}

/// `INDEX/COUNT`, the index below the count.
fn shard_arg(text: &str) -> Result<(usize, usize), String> {
    text.split_once('/')
        .and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)))
        .filter(|(i, n)| i < n)
        .ok_or_else(|| format!("`{text}` is not INDEX/COUNT with INDEX below COUNT, e.g. 0/2"))
}

/// A value in scenario syntax, or what is wrong with it and what would be
/// valid.
fn unit<T: std::str::FromStr<Err = UnitError>>(text: &str) -> Result<T, String> {
    text.parse().map_err(|e: UnitError| match e.hint() {
        Some(hint) => format!("{}; {hint}", e.message()),
        None => e.message().to_owned(),
    })
}

impl LinkSetArgs {
    /// The parameters given, as a patch (those not given stay unset).
    pub(crate) fn patch(&self) -> LinkParams {
        LinkParams {
            rate: self.rate,
            delay: self.delay,
            jitter: self.jitter,
            jitter_distribution: self.jitter_distribution,
            reorder: self.reorder,
            loss: self.loss,
            corrupt: self.corrupt,
            duplicate: self.duplicate,
            queue: self.queue,
            ecn: self.ecn,
            mtu: None,
        }
    }
}

/// `turbonet kube ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum KubeCommand {
    /// Write a lab's workers as Kubernetes objects, for `kubectl apply`.
    ///
    /// Write the objects that run a lab over M machines of a Kubernetes
    /// cluster, one YAML stream: a ConfigMap with the scenario, a Secret
    /// with the token the workers present to each other, a headless
    /// Service by which they find worker 0 (the coordinator), a
    /// StatefulSet of M privileged workers on the machines' own network
    /// (`hostNetwork`: the lab's namespaces and links are each machine's
    /// kernel's), at most one a machine, and a PodDisruptionBudget that
    /// keeps a drain from evicting a worker while the lab runs. Each
    /// worker computes the partition again from the scenario (`turbonet
    /// plan --machines M` prints it); its hash is on every object. No
    /// cluster is contacted and no root is needed.
    #[command(after_help = "Examples:
  turbonet kube render scenarios/hpn-pod.toml --machines 4 --image registry.example/turbonet:0.1 > pod.yaml
  kubectl apply -f pod.yaml
  kubectl get pods -l app.kubernetes.io/instance=hpnpod")]
    Render(KubeRenderArgs),
    /// Write a lab as a `Lab` object, for turbonet's operator.
    ///
    /// Write a `Lab` custom resource holding the scenario: applied in the
    /// namespace turbonet's operator watches (`turbonet kube install`),
    /// the operator makes the objects `kube render` writes, owned by the
    /// `Lab` (`kubectl delete lab NAME` takes the lab down), and keeps its
    /// status (`kubectl get labs`: machines, workers ready, phase). The
    /// lab is named after the object (`--name`, default the scenario's
    /// name). No cluster is contacted.
    #[command(after_help = "Examples:
  turbonet kube lab scenarios/fat-tree-k4.toml --machines 2 --image registry.example/turbonet:0.1 > k4.yaml
  kubectl apply -n turbonet -f k4.yaml
  kubectl get labs -n turbonet")]
    Lab(KubeLabArgs),
    /// Write turbonet's operator: the `Lab` CRD and its Deployment.
    ///
    /// Write the objects that run turbonet's `Lab` operator: the `Lab`
    /// CustomResourceDefinition, a namespace allowed privileged pods (the
    /// workers need them), the operator's ServiceAccount, a Role with only
    /// what it needs in that namespace and its binding, and a Deployment of
    /// one unprivileged operator. The operator acts on `Lab`s of that
    /// namespace alone: whoever may create `Lab`s there may run privileged
    /// workers on the cluster's machines, so grant it as you would
    /// privileged pods. No cluster is contacted.
    #[command(after_help = "Examples:
  turbonet kube install --image registry.example/turbonet:0.1 | kubectl apply -f -
  kubectl -n turbonet rollout status deploy/turbonet-operator")]
    Install(KubeInstallArgs),
    /// Run turbonet's `Lab` operator (what `kube install`'s Deployment runs).
    ///
    /// Run the operator: for each `Lab` of the namespace, apply the objects
    /// `kube render` writes (owned by the `Lab`) and keep its status from
    /// its workers. Talks to the cluster as its pod's ServiceAccount, or
    /// outside one as KUBECONFIG says. Runs until SIGTERM or Ctrl-C.
    Operator(KubeOperatorArgs),
    /// Check that a cluster can run turbonet labs.
    ///
    /// Run a fat-tree k=4 over two machines of the cluster (KUBECONFIG's):
    /// its objects applied under a name of their own, its two workers
    /// scheduled on two machines and started, `turbonet check` run in
    /// worker 0 until every host pair answers across the machines' VXLAN
    /// tunnels, then everything deleted and waited for (also when a step
    /// fails, or on Ctrl-C). Prints each step, how long it took and what it
    /// saw; exits 1 if one failed.
    #[command(after_help = "Examples:
  turbonet kube selftest --image registry.example/turbonet:0.1
  turbonet kube selftest --image registry.example/turbonet:0.1 --namespace turbonet --json")]
    Selftest(KubeSelftestArgs),
}

/// Arguments of `kube lab`.
#[derive(Debug, Args)]
pub(crate) struct KubeLabArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Machines (workers) to spread the lab over.
    #[arg(long, value_name = "M", value_parser = machine_count)]
    pub machines: u32,
    /// The workers' container image.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The `Lab`'s name, which the lab takes (default: the scenario's).
    #[arg(long)]
    pub name: Option<String>,
    /// The port the workers listen on for each other (default 7789).
    #[arg(long)]
    pub port: Option<u16>,
}

/// Arguments of `kube install`.
#[derive(Debug, Args)]
pub(crate) struct KubeInstallArgs {
    /// The image the operator runs (turbonet's: the same as the workers').
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The namespace the operator runs in and watches.
    #[arg(long, default_value = turbonet_kube::install::NAMESPACE)]
    pub namespace: String,
}

/// Arguments of `kube operator`.
#[derive(Debug, Args)]
pub(crate) struct KubeOperatorArgs {
    /// The namespace whose `Lab`s to run (default: the pod's own, or the
    /// kubeconfig context's).
    #[arg(long)]
    pub namespace: Option<String>,
}

/// Arguments of `kube selftest`.
#[derive(Debug, Args)]
pub(crate) struct KubeSelftestArgs {
    /// The workers' container image.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// Where to run the test lab (default: the kubeconfig context's
    /// namespace; it must admit privileged pods).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The workers' port on each machine (free on both).
    #[arg(long, default_value_t = turbonet_kube::WORKER_PORT)]
    pub port: u16,
    /// How long each step may take, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
    /// Leave the lab running when done, to look at it.
    #[arg(long)]
    pub keep: bool,
    /// Print the steps as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `kube render`.
#[derive(Debug, Args)]
pub(crate) struct KubeRenderArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Machines (workers) to spread the lab over.
    #[arg(long, value_name = "M", value_parser = machine_count)]
    pub machines: u32,
    /// The workers' container image: turbonet, and FRR or BIRD if the lab
    /// runs them.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The port the workers listen on for each other, on each machine's
    /// network: labs whose workers share machines each need their own.
    #[arg(long, default_value_t = turbonet_kube::WORKER_PORT)]
    pub port: u16,
    /// A file holding the token the workers present to each other;
    /// default a new random one, written into the Secret.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Arguments of `worker`.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Scenario file (TOML), the same on every machine.
    pub file: PathBuf,
    /// This machine's index, from 0 (worker 0 coordinates the others).
    #[arg(long, value_name = "I")]
    pub index: u32,
    /// How many machines the lab spans.
    #[arg(long, value_name = "M", value_parser = machine_count)]
    pub of: u32,
    /// Where worker 0 listens for the others, `HOST:PORT` (retried until
    /// the name resolves and the worker answers).
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: String,
    /// Where worker 0 listens (default: every address, on the port of
    /// `--coordinator`).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// A file holding the lab's token (one word; no one but its owner may
    /// read it), the same on every machine.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// This machine's underlay address, where the other machines send its
    /// cut links' frames (default: its address toward the coordinator).
    #[arg(long, value_name = "IPV4")]
    pub underlay: Option<std::net::Ipv4Addr>,
    /// Seconds worker 0 waits for every worker to connect (others: to
    /// reach worker 0) before it gives up.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub rendezvous: u64,
    /// Threads that create namespaces (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `turbonet link ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum LinkCommand {
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

/// Where `turbonet ui` listens unless told (a student's: any free port).
pub(crate) const UI_LISTEN: &str = "127.0.0.1:8765";

/// Which lab a command is about.
#[derive(Debug, Args)]
pub(crate) struct LabArg {
    /// Lab name (default: the lab $TURBONET_LAB names, else the only lab
    /// that is up).
    #[arg(long, short = 'l')]
    pub lab: Option<String>,
}

impl LabArg {
    /// A client of the lab's control API (`--lab`, or the lab
    /// `$TURBONET_LAB` names, or the only lab up).
    pub(crate) fn client(&self) -> anyhow::Result<turbonet_api::Client> {
        let (dir, _) = turbonet_lab::state::resolve(self.lab.as_deref())?;
        Ok(turbonet_api::Client::connect(&dir)?)
    }
}

/// What `show` shows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ShowWhat {
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

/// Arguments of `plan`.
#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    /// Target to plan for: `p4rt` (P4 switches) or `soft` (turbonet's
    /// userspace switch).
    #[arg(long, default_value = "p4rt")]
    pub target: String,
    /// A physical switch, NAME=PORTSxSPEED (speed in G or M), e.g.
    /// `s1=64x100G`; repeat for more switches.
    #[arg(long = "switch", value_name = "NAME=PORTSxSPEED")]
    pub switches: Vec<String>,
    /// Egress queues per physical port (one per virtual link sharing it).
    #[arg(long, default_value_t = mapper::DEFAULT_QUEUES)]
    pub queues: u32,
    /// Rate a link without `rate` counts as, e.g. `1gbit`, `10gbit`.
    #[arg(long, default_value = "1gbit")]
    pub default_rate: String,
    /// Also print every virtual port (one row each; long on large fabrics).
    #[arg(long)]
    pub ports: bool,
    /// Print JSON (always with every virtual port; with --machines, every
    /// machine's nodes and every cut link with its VNI and owner).
    #[arg(long)]
    pub json: bool,
    /// Plan the lab over M machines instead of P4 switches (a netns lab
    /// run by M workers); not with the P4 options.
    #[arg(
        long,
        value_name = "M",
        value_parser = machine_count,
        conflicts_with_all = [
            "target", "switches", "queues", "default_rate", "ports", "program",
            "p4info", "device_config", "token_file",
        ],
    )]
    pub machines: Option<u32>,
    /// Program a physical switch that runs the turbonet pipeline:
    /// NAME=HOST:PORT of its P4Runtime server (device id 1), e.g.
    /// `s1=127.0.0.1:9559`; repeat per switch. turbonet becomes primary,
    /// sets the pipeline and writes every table entry of the plan with the
    /// fabric's static routes.
    #[arg(long = "program", value_name = "NAME=HOST:PORT")]
    pub program: Vec<String>,
    /// With --program: the P4Info the switches run (text format); default
    /// turbonet's own (p4c's, p4/build/turbonet.p4info.txtpb).
    #[arg(long, value_name = "FILE")]
    pub p4info: Option<PathBuf>,
    /// With --program: the target's compiled pipeline (BMv2 JSON, Tofino
    /// binary) sent with the P4Info; default p4c's BMv2 JSON with
    /// turbonet's own P4Info (the soft switch takes it too), none with
    /// another.
    #[arg(long, value_name = "FILE")]
    pub device_config: Option<PathBuf>,
    /// With --program: the file holding the token the switches require
    /// (`turbonet softswitch --token-file`), sent as `authorization:
    /// Bearer TOKEN` with every call.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Arguments of `bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Scenario files (default: fat-tree k=4, k=8, k=16 and hpn from ./scenarios).
    pub files: Vec<PathBuf>,
    /// Runs per scenario; the table shows the median.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also run `check` (all host pairs) after each `up`, and time it.
    #[arg(long)]
    pub check: bool,
    /// With --check: probe K hosts behind every edge switch instead of
    /// every pair (`check --sample K`), for the largest fabrics.
    #[arg(long, value_name = "K", requires = "check")]
    pub sample: Option<usize>,
    /// Bring each scenario up with this routing mode instead of its own
    /// (`static` or `bgp`), e.g. the real pod both ways.
    #[arg(long, value_name = "MODE", value_parser = ["static", "bgp"])]
    pub routing: Option<String>,
    /// Measure the userspace link engine instead: delay accuracy, loss
    /// statistics, a standing queue, and the capacity grid (impaired links
    /// x frame sizes x engine shards, beside a plain veth, with CPU per
    /// frame and every lost frame attributed to a stage).
    #[arg(long)]
    pub engine: bool,
    /// With --engine: the parts to run (delay: one-way delay at light load;
    /// loss; rate: TCP through a shaped link; queue: a standing queue;
    /// capacity: the grid; load: delay error at 25-80% of capacity; idle:
    /// the engine's cost with links up and no traffic; scaling: one flow
    /// per shard for each --shards count; io, not run unless
    /// asked: what receiving a frame costs with recvmmsg and with a
    /// TPACKET_V2 ring, the measurement that kept recvmmsg).
    #[arg(long, value_delimiter = ',', value_name = "PART", default_value = "delay,loss,rate,queue,capacity,load,idle,scaling", value_parser = ["delay", "loss", "rate", "queue", "capacity", "load", "idle", "scaling", "io"])]
    pub part: Vec<String>,
    /// With --engine: impaired links in the capacity grid (one carries the
    /// traffic, the rest idle).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "N",
        default_value = "1,16,256,4096"
    )]
    pub links: Vec<usize>,
    /// With --engine: engine shard counts in the capacity grid and the
    /// scaling part, 1 to 64 (default: 1 and one per core).
    #[arg(long, value_delimiter = ',', value_name = "K", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub shards: Vec<usize>,
    /// With --engine: the engine the bench labs' impaired links get
    /// (`[lab] engine`): userspace, bpf (the kernel engine: BPF and fq,
    /// where the kernel has sch_fq), kernel (netem) or auto.
    #[arg(long, value_name = "ENGINE", default_value = "userspace", value_parser = ["userspace", "bpf", "kernel", "auto"])]
    pub link_engine: String,
    /// With --engine: delay probes per configured delay.
    #[arg(long, default_value_t = 5_000)]
    pub probes: usize,
    /// With --engine: frames per configured loss probability.
    #[arg(long, default_value_t = 1_000_000)]
    pub loss_frames: u64,
    /// Measure BGP instead: convergence from `up` and after a link and a
    /// switch failure on fat-tree k=4, k=8 and hpn, per agent.
    #[arg(long)]
    pub bgp: bool,
    /// With --bgp: the agents to compare.
    #[arg(long, value_delimiter = ',', default_value = "builtin,frr")]
    pub agents: Vec<String>,
    /// With --bgp: agent density instead (CPU and memory of 80, 320 and
    /// 1,000 built-in agents at steady state; FRR on k=8 for comparison).
    #[arg(long, requires = "bgp")]
    pub density: bool,
    /// Measure a lab over several machines instead, the machines emulated
    /// as network namespaces of this kernel (each with its own /run, an
    /// unmodified `turbonet worker` in it): each worker's nodes,
    /// namespaces, devices, tunnels and CPU seconds over each of
    /// `--counts` machines (the first FILE, default fat-tree k=8), and the
    /// one-way delay across an impaired cut link beside the same link on
    /// one machine (`--probes`, at most 2,000).
    #[arg(long)]
    pub machines: bool,
    /// With --machines: the counts of machines.
    #[arg(long, value_delimiter = ',', value_name = "M", default_value = "1,2,4", requires = "machines", value_parser = machine_count)]
    pub counts: Vec<u32>,
    /// Measure the soft switch instead: its forwarding rate through a
    /// 5-hop fat-tree path, beside the netns target and (when
    /// simple_switch_grpc is on PATH) one BMv2 on the same path, and the
    /// delay accuracy of the soft switch and BMv2.
    #[arg(long)]
    pub soft: bool,
    /// Measure the workloads instead: the traffic generator (TCP, UDP with
    /// 1,472- and 64-byte payloads) beside iperf3 on one path, and ring
    /// AllReduce bus bandwidth beside its ceiling and Open MPI's ring.
    #[arg(long)]
    pub workloads: bool,
    /// Measure the instruments instead: what counter reads, a capture and
    /// a mirror cost the link engine's forwarding rate, the capture rate
    /// sustained without loss, and route-change event latency.
    #[arg(long)]
    pub instruments: bool,
    /// With --soft, --instruments or --engine (its capacity cells): frames
    /// per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub frames: u64,
}

impl Command {
    /// True for the long-running servers (the lab daemon, the soft switch).
    pub(crate) fn is_server(&self) -> bool {
        matches!(
            self,
            Command::Daemon(_)
                | Command::Softswitch(_)
                | Command::Serve(_)
                | Command::Kube(KubeCommand::Operator(_))
        )
    }

    /// Whether a user who is not root runs it through `turbonet serve`.
    pub(crate) fn served(&self) -> bool {
        matches!(
            self,
            Command::Lab(_)
                | Command::Exec(_)
                | Command::Link(_)
                | Command::Fail(_)
                | Command::Restore(_)
                | Command::Flap(_)
                | Command::Workload(_)
                | Command::Show(_)
                | Command::Status(_)
                | Command::Events(_)
                | Command::Watch(_)
                | Command::Check(_)
                | Command::Ui(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn patch(args: &[&str]) -> Result<LinkParams, String> {
        let mut all = vec!["turbonet", "link", "set", "a--b"];
        all.extend(args);
        match Cli::try_parse_from(all).map_err(|e| e.to_string())?.command {
            Command::Link(LinkCommand::Set { params, .. }) => Ok(params.patch()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn link_set_reads_every_parameter_in_scenario_syntax() {
        let p = patch(&[
            "--rate",
            "10gbit",
            "--delay",
            "5ms",
            "--jitter",
            "1ms",
            "--jitter-distribution",
            "pareto",
            "--reorder",
            "true",
            "--loss",
            "{ p = \"1%\", r = \"25%\" }",
            "--corrupt",
            "0.01%",
            "--duplicate",
            "1e-6",
            "--queue",
            "100p",
            "--ecn",
            "64KiB",
        ])
        .unwrap();
        assert_eq!(
            p.to_string(),
            "rate=10gbit delay=5ms jitter=1ms jitter_distribution=pareto reorder=true \
             loss={ p = \"1%\", r = \"25%\", bad = \"100%\", good = \"0%\" } corrupt=0.01% \
             duplicate=1e-6 queue=100p ecn=64KiB"
        );
        // Every key `link set` may change has its flag (all but mtu).
        assert_eq!(p.pairs().len(), LinkParams::KEYS.len() - 1);
        assert!(patch(&[]).unwrap().is_empty());
    }

    #[test]
    fn link_set_refuses_bad_values_with_what_would_be_valid() {
        for (args, says) in [
            (&["--rate", "10gbps"][..], "did you mean `gbit`"),
            (&["--loss", "150%"][..], "above 100%"),
            (
                &["--jitter-distribution", "paret"][..],
                "did you mean `pareto`",
            ),
            (&["--queue", "ten"][..], "write packets as `1000p`"),
            (&["--mtu", "9000"][..], "unexpected argument"),
        ] {
            let e = patch(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
