//! `turbonet`: turn a scenario file into a running data-center fabric.
//!
//! This binary parses the command line, calls `turbonet-lab` and prints
//! what comes back: tables for people, `--json` for scripts, errors with
//! their exit codes (2: the input is wrong, 1: it failed).

mod cli;
mod progress;
mod render;
mod show;
mod students;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use turbonet_api::{Client, Target};
use turbonet_bench as bench;
use turbonet_lab::error::Kind;
use turbonet_lab::{check, daemon, down, exec, inspect, plan, up};

use cli::{Cli, Command, LinkCommand, ShowWhat, TargetKind};
use progress::Terminal;

/// Exit code for invalid input (a scenario with errors, a bad argument).
const EXIT_INVALID: u8 = 2;

/// mimalloc rather than glibc's malloc: a lab daemon running a thousand
/// BGP speakers allocates and frees millions of small buffers in a heap of
/// gigabytes, where glibc spent a third of the speakers' thread walking its
/// free lists.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The log filter, which a command `turbonet serve` runs for a student
/// turns down to a command's own (warnings).
static LOG_FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Logs as a command does (warnings only), whatever the process started as.
fn command_logs() {
    if let Some(handle) = LOG_FILTER.get() {
        let _ = handle.modify(|f| *f = tracing_subscriber::EnvFilter::new("warn"));
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let server = cli.command.is_server();
    if !server {
        turbonet_host::process::default_sigpipe();
    }
    // The servers log what they do (to their log files); commands only warn.
    let default = if server { "info" } else { "warn" };
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let filter = tracing_subscriber::EnvFilter::try_from_env("TURBONET_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
        tracing_subscriber::registry()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            )
            .init();
        let _ = LOG_FILTER.set(handle);
    }
    // A member of the group turbonet serve runs labs for, not root: the
    // service runs it for them.
    let code = if !server
        && !turbonet_host::process::is_root()
        && cli.command.served()
        && students::service_listens()
    {
        students::forward(&cli.command)
    } else {
        run(cli.command)
    };
    let code = match code {
        Ok(code) => code,
        Err(e) => report(e),
    };
    turbonet_host::process::report_peak_rss();
    code
}

/// Prints an error as its kind asks and returns its exit code: located
/// diagnostics for an invalid scenario, `error: ...` otherwise.
fn report(e: anyhow::Error) -> ExitCode {
    let lab = match e.downcast::<turbonet_lab::Error>() {
        Ok(lab) => lab,
        // A call the command line made to a lab's daemon itself.
        Err(e) => match e.downcast::<turbonet_api::Error>() {
            Ok(api) => turbonet_lab::Error::from(api),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
        },
    };
    let kind = lab.kind();
    match lab {
        turbonet_lab::Error::Scenario { origin, errors } => {
            let count = errors.len();
            eprintln!("{:?}", miette::Report::new(*errors));
            eprintln!(
                "{origin}: {count} error{} found; nothing was created",
                if count == 1 { "" } else { "s" }
            );
        }
        lab => eprintln!("error: {lab}"),
    }
    match kind {
        Kind::Invalid | Kind::NotFound => ExitCode::from(EXIT_INVALID),
        Kind::Refused | Kind::Failed => ExitCode::FAILURE,
    }
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Validate { file, json } => {
            let valid = up::validate(&file)?;
            if json {
                show::json(&valid.summary)?;
            } else {
                println!("{}", render::summary(&valid.lab, &valid.summary));
                if let Some(reason) = valid.not_here {
                    println!("note: valid, but `up` cannot run it on this machine: {reason}");
                }
            }
        }
        Command::Up(args) => {
            let options = up::Options {
                file: args.file,
                threads: args.threads,
                captures_in: None,
                owner: None,
            };
            let lab = up::up(&options, &Terminal::new(args.quiet))?;
            if !args.quiet {
                println!("{}", render::up_summary(&lab.lab, &lab.state));
            }
        }
        Command::Plan(args) => return plan(&args),
        Command::Softswitch {
            listen,
            token_file,
            insecure,
            device_id,
            netns,
            interfaces,
        } => {
            use std::io::Write;
            let listen = listen
                .secured(token_file.as_deref(), insecure)
                .map_err(turbonet_lab::Error::from)?;
            turbonet_softswitch::run(
                &listen,
                device_id,
                netns.as_deref(),
                &interfaces,
                |addr| {
                    println!("turbonet soft switch: device {device_id}, P4Runtime at {addr}");
                    let _ = std::io::stdout().flush();
                },
                |why| println!("turbonet soft switch: {why}, stopping"),
            )
            .map_err(turbonet_lab::Error::from)?;
        }
        Command::Down { lab } => print_down(down::down(lab.as_deref())?),
        Command::Serve { socket, config } => return students::serve(&socket, &config),
        Command::Clean => {
            let outcomes = down::clean()?;
            if outcomes.is_empty() {
                println!("nothing to clean");
            }
            let mut failed = false;
            for (lab, outcome) in outcomes {
                match outcome {
                    Ok(down::Down::Removed {
                        namespaces,
                        processes,
                        seconds,
                        ..
                    }) => println!("{}", show::removed(&lab, namespaces, processes, seconds)),
                    Ok(down::Down::EmptyDirectory(_)) => {
                        println!("lab {lab}: removed an empty lab directory");
                    }
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("error: {lab}: {e}");
                        failed = true;
                    }
                }
            }
            if failed {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Status { json } => {
            let mut labs = inspect::status()?;
            if let Some(student) = students::student() {
                labs.retain(|l| student.owns(&l.lab));
            }
            show::status(&labs, json)?;
        }
        Command::Show {
            what,
            node,
            lab,
            json,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let node = node.as_deref();
            match what {
                ShowWhat::Nodes => show::nodes(&inspect::nodes(&running.lab, node)?, json)?,
                ShowWhat::Links => show::links(&inspect::links(&running.lab, node)?, json)?,
                ShowWhat::Routes => {
                    let Some(node) = node else {
                        return Err(turbonet_lab::Error::Invalid(format!(
                            "`show routes` needs a NODE, e.g. `turbonet show routes {}`",
                            running
                                .lab
                                .fabric
                                .switches()
                                .next()
                                .map_or("NODE", |n| n.name.as_str())
                        ))
                        .into());
                    };
                    let (ns, rows) = inspect::routes(&running.lab, node)?;
                    show::routes(&ns, &rows, json)?;
                }
                ShowWhat::Bgp => {
                    let report = Client::connect(&running.dir)?.bgp(node)?;
                    return show::bgp(&report, node, &running.dir, json);
                }
            }
        }
        Command::Link(LinkCommand::Show { link, lab, json }) => {
            let running = inspect::running(lab.lab.as_deref())?;
            show::link_show(&inspect::link_show(&running, link.as_deref())?, json)?;
            if !json && running.lab.fabric.rate_scale > 1 {
                println!(
                    "rates, queues and ECN thresholds are in force: the scenario's divided by \
                     {} ([lab] rate_scale); `link set` takes the scenario's units",
                    running.lab.fabric.rate_scale
                );
            }
        }
        Command::Link(LinkCommand::Set { link, params, lab }) => {
            let patch = params.patch();
            if patch.is_empty() {
                return Err(turbonet_lab::Error::Invalid(
                    "nothing to set; give at least one parameter, e.g. --delay 5ms".to_owned(),
                )
                .into());
            }
            println!("{}", client(&lab)?.set_link(&link, &patch)?);
        }
        Command::Link(LinkCommand::Reset { link, lab }) => {
            println!("{}", client(&lab)?.reset_link(&link)?);
        }
        Command::Fail { kind, name, lab } => {
            println!("{}", client(&lab)?.fail(&target(kind, name))?);
        }
        Command::Restore { kind, name, lab } => {
            println!("{}", client(&lab)?.restore(&target(kind, name))?);
        }
        Command::Flap {
            link,
            period,
            count,
            lab,
        } => {
            let period = period
                .parse::<turbonet_topo::units::Delay>()
                .map_err(|e| turbonet_lab::Error::Invalid(format!("--period {period}: {e}")))?;
            println!(
                "{}",
                client(&lab)?.flap(&link, period.as_duration(), count)?
            );
        }
        Command::Events { lab, json, follow } => {
            let running = inspect::running(lab.lab.as_deref())?;
            if follow {
                // One line per event as it happens (JSON Lines with --json).
                let mut failed = None;
                inspect::events(&running, true, |e| match show::event_line(&e, json) {
                    Ok(()) => true,
                    Err(err) => {
                        failed = Some(err);
                        false
                    }
                })?;
                if let Some(err) = failed {
                    return Err(err);
                }
            } else {
                let mut all = Vec::new();
                inspect::events(&running, false, |e| {
                    all.push(e);
                    true
                })?;
                show::events(&all, json)?;
            }
        }
        Command::Capture {
            link,
            direction,
            write,
            count,
            duration,
            snaplen,
            lab,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            return show::capture(
                &running,
                &turbonet_lab::capture::Options {
                    link,
                    direction,
                    snaplen,
                    count: count.unwrap_or(0),
                    duration: duration.map(std::time::Duration::from_secs_f64),
                },
                write.as_deref(),
            );
        }
        Command::Snapshot { dir, lab, json } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let written = inspect::snapshot(&running, &dir)?;
            if json {
                show::json(&written)?;
            } else {
                println!("{}", show::snapshot_written(&written));
            }
        }
        Command::Export {
            file,
            format,
            output,
        } => {
            let valid = up::validate(&file)?;
            let text = match format {
                cli::ExportFormat::Json => {
                    let mut t = serde_json::to_string_pretty(&turbonet_lab::topology::topology(
                        &valid.lab, None,
                    ))?;
                    t.push('\n');
                    t
                }
                cli::ExportFormat::Dot => turbonet_lab::topology::dot(&valid.lab),
            };
            match output {
                Some(path) => std::fs::write(&path, text)
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?,
                None => print!("{text}"),
            }
        }
        Command::Graph {
            what,
            output,
            format,
            pod,
            segment,
            plane,
            max_per_tier,
        } => graph(
            what.as_deref(),
            output.as_deref(),
            format,
            turbonet_graph::Filter {
                pod,
                segment,
                plane,
            },
            max_per_tier,
        )?,
        Command::Watch {
            lab,
            interval,
            top,
            all,
            count,
            json,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let options = show::WatchOptions { top, all, json };
            show::watch(&running, interval, count, &options)?;
        }
        Command::Ui { lab, listen } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let name = running.lab.name.clone();
            // A member's page is at a secret address: others on the
            // machine can reach the port too.
            let token = match students::student() {
                Some(_) => Some(turbonet_ui::token()?),
                None => None,
            };
            turbonet_ui::serve(running, listen, token.as_deref(), |url| {
                println!("serving lab {name} at {url} (Ctrl-C to stop)");
            })?;
        }
        Command::Run(args) => return run_experiment(&args),
        Command::Workload(w) => workload(w)?,
        Command::Lab(l) => return course(l),
        Command::Exec { node, command, lab } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let code = match students::as_user() {
                Some(user) => exec::exec_as(&running, &node, &command, &user)?,
                None => exec::exec(&running, &node, &command)?,
            };
            return Ok(ExitCode::from(code.clamp(0, 255) as u8));
        }
        Command::Mpirun {
            job,
            algorithm,
            show,
            command,
            lab,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let options = turbonet_lab::mpi::Options {
                job,
                algorithm: match algorithm {
                    cli::MpiAlgorithm::Ring => turbonet_topo::experiment::Algorithm::Ring,
                    cli::MpiAlgorithm::HalvingDoubling => {
                        turbonet_topo::experiment::Algorithm::HalvingDoubling
                    }
                },
                command,
            };
            let prepared = turbonet_lab::mpi::prepare(&running, &options)?;
            if show {
                show::mpirun(&prepared)?;
                return Ok(ExitCode::SUCCESS);
            }
            let code = turbonet_lab::mpi::run(&running, &prepared)?;
            return Ok(ExitCode::from(code.clamp(0, 255) as u8));
        }
        Command::MpiAgent { args } => {
            let code = turbonet_lab::mpi::agent(&args)?;
            return Ok(ExitCode::from(code.clamp(0, 255) as u8));
        }
        Command::Check {
            lab,
            timeout,
            sample,
            json,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let report = check::check_sampled(&running, timeout, sample)?;
            show::check(&report, json)?;
            if !report.failures.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Bench(args) => {
            let which = if args.engine {
                bench::Bench::Engine {
                    probes: args.probes,
                    loss_frames: args.loss_frames,
                }
            } else if args.bgp {
                bench::Bench::Bgp {
                    density: args.density,
                    agents: args.agents,
                }
            } else if args.soft {
                bench::Bench::Soft {
                    frames: args.frames,
                }
            } else if args.workloads {
                bench::Bench::Workloads
            } else if args.instruments {
                bench::Bench::Instruments {
                    frames: args.frames,
                }
            } else {
                bench::Bench::Up {
                    files: args.files,
                    runs: args.runs,
                    check: args.check.then_some(args.sample),
                    routing: args.routing,
                }
            };
            print!(
                "{}",
                render::report(&bench::bench(&which, &Terminal::new(false))?)
            );
        }
        Command::Daemon {
            lab,
            worker,
            restarts,
            bgp_shard,
            epoch_ns,
        } => {
            if let Some((index, count)) = bgp_shard {
                daemon::bgp_shard(&lab, index, count, epoch_ns, restarts > 0)?;
            } else if worker {
                daemon::work(&lab, restarts)?;
            } else {
                daemon::supervise(&lab)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn target(kind: TargetKind, name: String) -> Target {
    match kind {
        TargetKind::Link => Target::Link(name),
        TargetKind::Node => Target::Node(name),
    }
}

/// A client of the lab's control API (`--lab`, or the only lab up).
pub(crate) fn client(lab: &cli::LabArg) -> Result<Client> {
    let (dir, _) = turbonet_lab::state::resolve(lab.lab.as_deref())?;
    Ok(Client::connect(&dir)?)
}

/// `turbonet run`: 0 when every expectation holds, 1 when one does not.
fn run_experiment(args: &cli::RunArgs) -> Result<ExitCode> {
    let out = args.out.clone().unwrap_or_else(|| {
        let stem = args
            .file
            .file_stem()
            .map_or("experiment".into(), |s| s.to_string_lossy().into_owned());
        std::path::Path::new("reports").join(stem)
    });
    let options = turbonet_experiment::Options {
        file: args.file.clone(),
        out,
        keep: args.keep,
        timeout: std::time::Duration::from_secs_f64(args.timeout.max(0.0)),
    };
    if args.repeat > 1 {
        let repeated = turbonet_experiment::repeat(
            &options,
            args.repeat as usize,
            &Terminal::new(args.quiet),
        )?;
        if args.json {
            show::json(&repeated)?;
        } else {
            print!("{}", turbonet_experiment::repeat_summary(&repeated));
            println!("reports: {}", options.out.display());
        }
        return Ok(if repeated.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let outcome = turbonet_experiment::run(&options, &Terminal::new(args.quiet))?;
    if args.json {
        show::json(&outcome.report)?;
    } else {
        print!("{}", turbonet_experiment::summary(&outcome.report));
        println!("reports: {}", outcome.dir.display());
    }
    Ok(if outcome.report.interrupted {
        // As a shell reports a command that SIGINT ended.
        ExitCode::from(130)
    } else if outcome.report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `turbonet workload start|stop|show`.
/// What `down` (and `lab stop`) did.
fn print_down(outcome: down::Down) {
    match outcome {
        down::Down::NothingUp => println!("no lab is up"),
        down::Down::NotUp(lab) => println!("lab {lab} is not up"),
        down::Down::EmptyDirectory(lab) => {
            println!("lab {lab}: removed an empty lab directory");
        }
        down::Down::Removed {
            lab,
            namespaces,
            processes,
            seconds,
        } => println!("{}", show::removed(&lab, namespaces, processes, seconds)),
    }
}

/// `turbonet lab ...`
fn course(command: cli::LabCommand) -> Result<ExitCode> {
    use cli::LabCommand as L;
    use turbonet_course as course;
    let dir = course::labs_dir();
    // The graded lab that is running (its folder found by its lab name).
    let running_course = |lab: Option<&str>| -> Result<(inspect::Running, course::CourseLab)> {
        let running = inspect::running(lab)?;
        let found = course::list(&dir)?
            .into_iter()
            .find(|c| students::lab_name(&c.lab) == running.lab.name)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "lab {} is not one of the labs in {}",
                    running.lab.name,
                    dir.display()
                )
            })?;
        Ok((running, found))
    };
    match command {
        L::List { json } => {
            let labs = course::list(&dir)?;
            if json {
                show::json(&labs)?;
            } else {
                println!("{}", render::course_labs(&labs));
            }
        }
        L::Start { name, seed, quiet } => {
            let found = course::find(&dir, &name)?;
            start_course(&found, seed, quiet)?;
        }
        L::Tasks { lab, json } => {
            let (running, found) = running_course(lab.lab.as_deref())?;
            // What `check` grades: the tasks of the scenario the lab runs.
            if json {
                show::json(&running.lab.tasks)?;
            } else {
                println!("{}", render::course_tasks(&found, &running.lab));
            }
        }
        L::Check {
            task,
            lab,
            json,
            junit,
        } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let graded = course::graded_workloads(&running.lab, task.as_deref());
            if !graded.is_empty() {
                eprintln!(
                    "running the graded workloads ({}) on the fabric as it is now...",
                    graded.join(", ")
                );
            }
            let grade = course::grade(&running, task.as_deref())?;
            if let Some(path) = junit {
                std::fs::write(&path, course::junit(&grade))
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            }
            if json {
                show::json(&grade)?;
            } else {
                println!("{}", render::grade(&grade));
            }
            if grade.earned < grade.points {
                return Ok(ExitCode::FAILURE);
            }
        }
        L::Hint { task, lab } => {
            let running = inspect::running(lab.lab.as_deref())?;
            let task = course::task(&running.lab, &task)?;
            match &task.hint {
                Some(h) => println!("{}: {h}", task.name),
                None => println!(
                    "{}: no hint for this task; read the lab's README",
                    task.name
                ),
            }
        }
        L::Reset { seed, lab } => {
            let (running, found) = running_course(lab.lab.as_deref())?;
            let seed = seed.or_else(|| course::faults_seed(&running));
            down::down(Some(&running.lab.name))?;
            start_course(&found, seed, false)?;
        }
        L::Stop { lab } => {
            if let Some(name) = &lab.lab {
                students::forget_scenario(name);
            }
            print_down(down::down(lab.lab.as_deref())?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Brings a graded lab up and makes the faults of `seed` (default: the
/// lab's own seed); a lab whose faults cannot be made is taken down again.
fn start_course(found: &turbonet_course::CourseLab, seed: Option<u64>, quiet: bool) -> Result<()> {
    let _one_at_a_time = students::student()
        .map(turbonet_lab::serve::Student::lock_starts)
        .transpose()?;
    let name = students::lab_name(&found.lab);
    if let Some(student) = students::student()
        && turbonet_lab::state::LabDir::of(&name).exists()
    {
        return Err(turbonet_lab::Error::Refused(if student.owns(&name) {
            format!(
                "you have lab {name} up already: `turbonet lab stop --lab {name}` first (or \
                 `turbonet lab reset --lab {name}` to start it again)"
            )
        } else {
            format!("a lab named {name} is up, and it is not yours: ask the administrator")
        })
        .into());
    }
    let options = up::Options {
        file: students::course_scenario(found)?,
        threads: None,
        captures_in: None,
        // A member's lab is theirs from its first step, its nodes in a
        // user namespace of theirs.
        owner: students::student().map(|s| up::Owner {
            uid: s.uid,
            gid: s.gid,
        }),
    };
    let up = match up::up(&options, &Terminal::new(quiet)) {
        Ok(up) => up,
        Err(e) => {
            // A member's copy goes with a lab that did not come up (not
            // with one that is up already under that name).
            if !turbonet_lab::state::LabDir::of(&name).exists() {
                students::forget_scenario(&name);
            }
            return Err(e.into());
        }
    };
    let running = inspect::running(Some(&up.lab.name))?;
    let seed = seed.unwrap_or(up.lab.seed);
    let prepared = match students::student() {
        Some(student) => turbonet_lab::serve::hand_routers(&up.lab, student),
        None => Ok(()),
    };
    let made = match prepared.and_then(|()| turbonet_course::seed_faults(&running, seed)) {
        Ok(made) => made,
        Err(e) => {
            let _ = down::down(Some(&up.lab.name));
            students::forget_scenario(&up.lab.name);
            return Err(e.into());
        }
    };
    if !quiet {
        println!("{}", render::course_started(found, &up.lab));
        if made > 0 {
            println!(
                "{made} fault(s) made with seed {seed}: something in this fabric is broken; \
                 find it and fix it"
            );
        }
    }
    Ok(())
}

fn workload(command: cli::WorkloadCommand) -> Result<()> {
    use cli::WorkloadCommand as W;
    match command {
        W::Start { what, lab } => {
            // A member's file is only the one their client opened and
            // passed along, read from that descriptor: no path of theirs
            // is opened here, as root.
            let file = match students::student() {
                Some(_) => students::passed_file(&what)?,
                None => {
                    let path = std::path::Path::new(&what);
                    let looks_like_a_file = what.contains('/') || what.ends_with(".toml");
                    if looks_like_a_file && !path.is_file() {
                        return Err(turbonet_lab::Error::Invalid(format!(
                            "no file {what} (give a file of [[workload]] tables, or the name of a scenario workload)"
                        ))
                        .into());
                    }
                    match path.is_file() {
                        true => Some((what.clone(), std::fs::read_to_string(path)?)),
                        false => None,
                    }
                }
            };
            let mut client = client(&lab)?;
            let message = if let Some((origin, text)) = file {
                let running = inspect::running(lab.lab.as_deref())?;
                // Located errors here, before the daemon reads it too.
                let parsed = turbonet_topo::parse_workloads(&origin, &text, &running.lab).map_err(
                    |errors| turbonet_lab::Error::Scenario {
                        origin: origin.clone(),
                        errors: Box::new(errors),
                    },
                )?;
                // The daemon runs a command workload as root.
                if students::student().is_some()
                    && let Some(w) = parsed.iter().find(|w| w.kind.name() == "exec")
                {
                    return Err(turbonet_lab::Error::Refused(format!(
                        "workload {}: a command workload runs as root, and is not open to students (run commands with `turbonet exec`)",
                        w.name
                    ))
                    .into());
                }
                client.start_workload(None, &text, &origin)?
            } else {
                client.start_workload(Some(&what), "", "")?
            };
            println!("{message}");
        }
        W::Stop { name, lab } => println!("{}", client(&lab)?.stop_workload(&name)?),
        W::Show { name, lab, json } => {
            let mut reports = client(&lab)?.workloads()?;
            if let Some(name) = &name {
                reports.retain(|r| r.name == *name);
                if reports.is_empty() {
                    return Err(turbonet_lab::Error::NotFound(format!(
                        "no workload {name} was started"
                    ))
                    .into());
                }
            }
            if json {
                show::json(&reports)?;
            } else if reports.is_empty() {
                println!("no workload was started");
            } else {
                println!("{}", turbonet_lab::workload::table(&reports));
                for line in turbonet_lab::workload::warning_lines(&reports) {
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}

/// `turbonet plan`.
fn plan(args: &cli::PlanArgs) -> Result<ExitCode> {
    #[derive(serde::Serialize)]
    struct PlanJson<'a> {
        lab: &'a str,
        target: &'a str,
        fits: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        mapping: Option<&'a turbonet_topo::mapper::Mapping>,
        #[serde(skip_serializing_if = "Option::is_none")]
        refusal: Option<&'a turbonet_topo::mapper::Refusal>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    }
    let request = plan::Request {
        file: args.file.clone(),
        target: args.target.clone(),
        switches: args.switches.clone(),
        queues: args.queues,
        default_rate: args.default_rate.clone(),
        program: args.program.clone(),
        p4info: args.p4info.clone(),
        device_config: args.device_config.clone(),
        token_file: args.token_file.clone(),
    };
    let planned = plan::plan(&request)?;
    let (lab, target) = (&planned.lab, planned.target.as_str());
    match &planned.mapping {
        Ok(mapping) => {
            if args.json {
                show::json(&PlanJson {
                    lab: &lab.name,
                    target,
                    fits: true,
                    mapping: Some(mapping),
                    refusal: None,
                    message: None,
                })?;
            } else {
                print!(
                    "{}",
                    render::plan(lab, target, &planned.config, mapping, args.ports)
                );
            }
            for p in plan::program(&request, &planned, mapping)? {
                println!(
                    "programmed {} at {}: pipeline set, {} entities written, {} table entries read back",
                    p.switch, p.addr, p.entities, p.tables
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json
                && let turbonet_topo::mapper::MapError::DoesNotFit(refusal) = e
            {
                show::json(&PlanJson {
                    lab: &lab.name,
                    target,
                    fits: false,
                    mapping: None,
                    refusal: Some(refusal),
                    message: Some(e.to_string()),
                })?;
            }
            eprintln!("error: {}: {e}", args.file.display());
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}

/// `turbonet graph`: a scenario file drawn as planned, or a running lab
/// with what is down and each link's load.
fn graph(
    what: Option<&str>,
    output: Option<&std::path::Path>,
    format: cli::GraphFormat,
    filter: turbonet_graph::Filter,
    max_per_tier: usize,
) -> anyhow::Result<()> {
    let is_file = what.is_some_and(|w| w.ends_with(".toml") || std::path::Path::new(w).is_file());
    let (lab, state, title) = match what {
        Some(file) if is_file => {
            let valid = up::validate(std::path::Path::new(file))?;
            let title = format!("{} (planned)", valid.lab.name);
            (valid.lab, turbonet_graph::State::default(), title)
        }
        name => {
            let running = inspect::running(name)?;
            let state = turbonet_lab::graph::state(&running)?;
            let title = format!("{} (running)", running.lab.name);
            (running.lab.clone(), state, title)
        }
    };
    let picture = turbonet_graph::layout(&lab.fabric, &filter, max_per_tier);
    if picture.shown == 0 {
        anyhow::bail!(
            "nothing to draw: no node of lab {} matches the filter",
            lab.name
        );
    }
    let text = match format {
        cli::GraphFormat::Svg => turbonet_graph::svg(&picture, &lab.fabric, &state, &title),
        cli::GraphFormat::Dot => turbonet_graph::dot(&picture, &lab.fabric, &state, &title),
    };
    match output {
        Some(path) => {
            std::fs::write(path, text)
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            eprintln!(
                "{}: {} of {} nodes, {} of {} links{}",
                path.display(),
                picture.shown,
                lab.fabric.nodes.len(),
                picture.links,
                lab.fabric.links.len(),
                if picture.summarised {
                    " (wide tiers grouped: --pod, --segment, --plane draw a part node by node)"
                } else {
                    ""
                }
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}
