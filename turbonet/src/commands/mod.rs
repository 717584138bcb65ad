//! The verbs of the command line, a module each: every one takes its
//! parsed arguments, does its work through `turbonet-lab` and the crates
//! beside it, and prints what comes back.

pub(crate) mod bench;
pub(crate) mod capture;
pub(crate) mod check;
pub(crate) mod daemon;
pub(crate) mod down;
pub(crate) mod events;
pub(crate) mod exec;
pub(crate) mod export;
pub(crate) mod fail;
pub(crate) mod graph;
pub(crate) mod kube;
pub(crate) mod lab;
pub(crate) mod link;
pub(crate) mod plan;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod snapshot;
pub(crate) mod softswitch;
pub(crate) mod status;
pub(crate) mod ui;
pub(crate) mod up;
pub(crate) mod validate;
pub(crate) mod watch;
pub(crate) mod worker;
pub(crate) mod workload;

use anyhow::Result;

/// Prints `value` as pretty JSON.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
