//! `turbonet`: turn a scenario file into a running data-center fabric.

mod agents;
mod bench;
mod bench_bgp;
mod bench_engine;
mod bench_soft;
mod check;
mod cli;
mod control;
mod daemon;
mod engine;
mod exec;
mod externals;
mod fabric;
mod inspect;
mod lab;
mod limits;
mod netns;
mod p4rt;
mod plan;
mod render;
mod routers;
mod state;
mod tc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`turbonet show links | head`), as Unix
    // tools do, instead of panicking in println!.
    // SAFETY: setting a signal disposition before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TURBONET_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
