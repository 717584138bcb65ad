//! `turbonet kube`: a lab on a Kubernetes cluster.

use std::process::ExitCode;

use anyhow::{Context, Result};
use turbonet_topo::machines;

use crate::cli::{KubeCommand, KubeRenderArgs};

/// `turbonet kube ...`: exit 2 when the lab cannot be rendered.
pub(crate) fn run(command: &KubeCommand) -> Result<ExitCode> {
    match command {
        KubeCommand::Render(args) => render(args),
    }
}

/// `turbonet kube render`: the objects, as YAML on standard output.
fn render(args: &KubeRenderArgs) -> Result<ExitCode> {
    let file = args.file.display();
    let (lab, scenario) = turbonet_lab::up::load(&args.file)?;
    let plan = match machines::plan(&lab, args.machines) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: {file}: {e}");
            return Ok(ExitCode::from(crate::EXIT_INVALID));
        }
    };
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the token from {}", path.display()))?
            .trim()
            .to_owned(),
        None => turbonet_host::random_hex(32)?,
    };
    let request = turbonet_kube::Request {
        lab: &lab,
        scenario: &scenario,
        plan: &plan,
        image: &args.image,
        token: &token,
        port: args.port,
    };
    match turbonet_kube::render(&request) {
        Ok(objects) => {
            print!("{}", objects.to_yaml(&lab.name, plan.machines, &plan.hash));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {file}: {e}");
            Ok(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}
