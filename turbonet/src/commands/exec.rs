//! `turbonet exec` and `turbonet mpirun`: programs run inside a lab's
//! nodes, their exit codes passed through; and `mpi-agent`, Open MPI's
//! remote shell for `mpirun`.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::{exec, inspect};

use crate::cli::{self, ExecArgs, MpiAgentArgs, MpirunArgs};
use crate::students;

/// `turbonet exec NODE -- COMMAND` (a member's command runs as them).
pub(crate) fn run(args: ExecArgs) -> Result<ExitCode> {
    let ExecArgs { node, command, lab } = args;
    let running = inspect::running(lab.lab.as_deref())?;
    let code = match students::as_user() {
        Some(user) => exec::exec_as(&running, &node, &command, &user)?,
        None => exec::exec(&running, &node, &command)?,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `turbonet mpirun [--show] -- PROGRAM`.
pub(crate) fn mpirun(args: MpirunArgs) -> Result<ExitCode> {
    let MpirunArgs {
        job,
        algorithm,
        show,
        command,
        lab,
    } = args;
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
        print_mpirun(&prepared)?;
        return Ok(ExitCode::SUCCESS);
    }
    let code = turbonet_lab::mpi::run(&running, &prepared)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `turbonet mpi-agent HOST COMMAND...`.
pub(crate) fn mpi_agent(args: MpiAgentArgs) -> Result<ExitCode> {
    let code = turbonet_lab::mpi::agent(&args.args)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `turbonet mpirun --show`: the command line as a shell would take it,
/// where it runs, and its hostfile.
fn print_mpirun(prepared: &turbonet_lab::mpi::Prepared) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let env: Vec<String> = prepared
        .env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    let argv: Vec<String> = prepared.argv.iter().map(|a| shell_quote(a)).collect();
    writeln!(
        out,
        "ip netns exec {} env {} \\\n  {}",
        prepared.namespace,
        env.join(" "),
        argv.join(" ")
    )?;
    writeln!(
        out,
        "# each host's ranks send their data on its fabric ports (with --job, the job's rail): \
         turbonet's agent sets OMPI_MCA_btl_tcp_if_include on each host"
    )?;
    writeln!(out, "# {}:", prepared.hostfile.display())?;
    for line in std::fs::read_to_string(&prepared.hostfile)?.lines() {
        writeln!(out, "#   {line}")?;
    }
    Ok(())
}

/// `word` as a POSIX shell reads it back: as is when it is made of safe
/// characters, else in single quotes.
fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
