//! `turbonet`: turn a scenario file into a running data-center fabric.
//!
//! This binary parses the command line, calls `turbonet-lab` and prints
//! what comes back: tables for people, `--json` for scripts, errors with
//! their exit codes (2: the input is wrong, 1: it failed). Each verb is a
//! module of [`commands`]; this file starts the process and dispatches.

mod cli;
mod commands;
mod progress;
mod render;
mod students;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use turbonet_lab::error::Kind;

use cli::{Cli, Command};

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

/// Runs a command: a member's kept to what they may do (or refused), then
/// its verb.
fn run(command: Command) -> Result<ExitCode> {
    match students::admit(command)? {
        Command::Validate(args) => commands::validate::run(args).map(success),
        Command::Up(args) => commands::up::run(args).map(success),
        Command::Plan(args) => commands::plan::run(&args),
        Command::Kube(command) => commands::kube::run(&command),
        Command::Worker(args) => commands::worker::run(args).map(success),
        Command::Softswitch(args) => commands::softswitch::run(args).map(success),
        Command::Down(args) => commands::down::run(args).map(success),
        Command::Serve(args) => commands::serve::run(args),
        Command::Clean => commands::down::clean(),
        Command::Status(args) => commands::status::run(args).map(success),
        Command::Show(args) => commands::show::run(args),
        Command::Link(command) => commands::link::run(command).map(success),
        Command::Fail(args) => commands::fail::run(args).map(success),
        Command::Restore(args) => commands::fail::restore(args).map(success),
        Command::Flap(args) => commands::fail::flap(args).map(success),
        Command::Events(args) => commands::events::run(args).map(success),
        Command::Capture(args) => commands::capture::run(args),
        Command::Snapshot(args) => commands::snapshot::run(args).map(success),
        Command::Export(args) => commands::export::run(args).map(success),
        Command::Graph(args) => commands::graph::run(args).map(success),
        Command::Watch(args) => commands::watch::run(args).map(success),
        Command::Ui(args) => commands::ui::run(args).map(success),
        Command::Run(args) => commands::run::run(&args),
        Command::Workload(command) => commands::workload::run(command).map(success),
        Command::Lab(command) => commands::lab::run(command),
        Command::Exec(args) => commands::exec::run(args),
        Command::Mpirun(args) => commands::exec::mpirun(args),
        Command::MpiAgent(args) => commands::exec::mpi_agent(args),
        Command::Check(args) => commands::check::run(args),
        Command::Bench(args) => commands::bench::run(args).map(success),
        Command::Daemon(args) => commands::daemon::run(args).map(success),
    }
}

/// Exit 0: what a verb that finished without a code of its own exits.
fn success((): ()) -> ExitCode {
    ExitCode::SUCCESS
}
