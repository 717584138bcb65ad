//! `turbonet`: turn a scenario file into a running data-center fabric.
#![allow(unsafe_code)]

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
mod kernel;
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
    let cli = cli::Cli::parse();
    // A command that prints dies quietly on a closed pipe (`turbonet show
    // links | head`), as Unix tools do, instead of panicking in println!.
    // The servers (the lab daemon, the soft switch) keep Rust's default of
    // ignoring SIGPIPE: a peer that resets its connection must cost them an
    // EPIPE on that socket, not their life.
    if !cli.command.is_server() {
        // SAFETY: setting a signal disposition before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
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
