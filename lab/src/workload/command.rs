//! A command on every rank of a job: started in each host's namespace (with
//! the lab's hosts file, as `turbonet exec` does) and the environment
//! distributed launchers give (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `MASTER_ADDR`, `MASTER_PORT`), its output kept in the lab directory.

use std::time::Instant;

use tokio::task::JoinSet;
use turbonet_topo::experiment::WorkloadKind;

use super::{CommandReport, Context};
use crate::error::{Context as _, Error, Result};
use crate::names;
use crate::state::LabDir;
use turbonet_host::namespaces;
use turbonet_host::process::Start;

/// Runs an `exec` workload: every rank's command at once, until all exit
/// (what they exited with is in the report, for expectations to check).
/// It fails when one cannot start.
pub(crate) async fn run(cx: &Context) -> Result<()> {
    let WorkloadKind::Exec { command } = &cx.workload.kind else {
        unreachable!("an exec workload")
    };
    std::fs::create_dir_all(&cx.dir).with_context(|| format!("creating {}", cx.dir.display()))?;
    let n = cx.workload.ranks.len();
    let master = cx.workload.ranks[0].addr;
    let hosts = LabDir::of(&cx.lab.name).hosts_path();
    cx.update(|r| {
        r.commands = (0..n)
            .map(|rank| CommandReport {
                rank,
                host: cx.host(rank).to_owned(),
                log: cx
                    .dir
                    .join(format!("rank-{rank}.log"))
                    .display()
                    .to_string(),
                ..CommandReport::default()
            })
            .collect();
    });
    let mut running = JoinSet::new();
    for rank in 0..n {
        let node = cx.host(rank).to_owned();
        let ns = namespaces::open(&names::node_namespace(&cx.lab.name, &node))
            .with_context(|| format!("opening the namespace of {node}"))?;
        let log = cx.dir.join(format!("rank-{rank}.log"));
        let (program, args) = command.split_first().expect("a command is never empty");
        let mut child = std::process::Command::new(program);
        child
            .args(args)
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", n.to_string())
            .env("LOCAL_RANK", "0")
            .env("MASTER_ADDR", master.to_string())
            .env("MASTER_PORT", cx.port.to_string())
            .env("TURBONET_LAB", &cx.lab.name)
            .env("TURBONET_NODE", &node)
            .env("TURBONET_WORKLOAD", &cx.workload.name);
        Start {
            namespace: Some(&ns),
            private_sysfs: true,
            hosts: Some(hosts.as_path()).filter(|h| h.exists()),
            log: Some(&log),
            ..Start::default()
        }
        .prepare(&mut child)?;
        let mut child = tokio::process::Command::from(child);
        child.kill_on_drop(true);
        let started = Instant::now();
        let mut child = child
            .spawn()
            .map_err(|e| Error::NotFound(format!("cannot run {program} in {node}: {e}")))?;
        let cx = cx.clone();
        running.spawn(async move {
            let status = child.wait().await?;
            let code = turbonet_host::process::exit_code(status);
            let seconds = started.elapsed().as_secs_f64();
            cx.update(|r| {
                let c = &mut r.commands[rank];
                c.exit = Some(code);
                c.seconds = seconds;
            });
            Ok::<_, Error>(())
        });
    }
    while let Some(done) = running.join_next().await {
        done.map_err(|e| Error::Failed(format!("a rank's task: {e}")))??;
    }
    Ok(())
}
