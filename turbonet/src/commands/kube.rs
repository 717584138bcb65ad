//! `turbonet kube`: a lab on a Kubernetes cluster.

use std::process::ExitCode;

use anyhow::{Context, Result};
use turbonet_topo::machines;

use crate::cli::{
    KubeCommand, KubeInstallArgs, KubeLabArgs, KubeOperatorArgs, KubeRenderArgs, KubeSelftestArgs,
};

/// `turbonet kube ...`: exit 2 when what was asked cannot be written; 1
/// when the self-test fails.
pub(crate) fn run(command: &KubeCommand) -> Result<ExitCode> {
    match command {
        KubeCommand::Render(args) => render(args),
        KubeCommand::Lab(args) => lab(args),
        KubeCommand::Install(args) => install(args),
        KubeCommand::Operator(args) => operator(args),
        KubeCommand::Selftest(args) => selftest(args),
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

/// `turbonet kube lab`: the scenario as a `Lab` object, checked as the
/// operator will check it.
fn lab(args: &KubeLabArgs) -> Result<ExitCode> {
    let file = args.file.display();
    let (lab, scenario) = turbonet_lab::up::load(&args.file)?;
    let name = args.name.clone().unwrap_or_else(|| lab.name.clone());
    let mut object = turbonet_kube::crd::Lab::new(
        &name,
        turbonet_kube::crd::LabSpec {
            scenario,
            machines: args.machines,
            image: args.image.clone(),
            port: args.port,
        },
    );
    // What the operator will make of it (a uid is all the cluster adds).
    object.metadata.uid = Some("0".to_owned());
    if let Err(why) = turbonet_kube::operator::desired(&object, &"0".repeat(32)) {
        eprintln!("error: {file}: {why}");
        return Ok(ExitCode::from(crate::EXIT_INVALID));
    }
    object.metadata.uid = None;
    print!("{}", object.to_yaml());
    Ok(ExitCode::SUCCESS)
}

/// `turbonet kube install`: the operator's objects.
fn install(args: &KubeInstallArgs) -> Result<ExitCode> {
    match turbonet_kube::install::install(&args.image, &args.namespace) {
        Ok(objects) => {
            print!("{}", objects.to_yaml());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(crate::EXIT_INVALID))
        }
    }
}

/// `turbonet kube operator`: runs until SIGTERM or Ctrl-C.
fn operator(args: &KubeOperatorArgs) -> Result<ExitCode> {
    turbonet_kube::operator::main(args.namespace.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// `turbonet kube selftest`: each step as it goes (stderr), then the steps
/// as a table or JSON; exit 1 if one failed.
fn selftest(args: &KubeSelftestArgs) -> Result<ExitCode> {
    let lab = format!("selftest-{}", turbonet_host::random_hex(2)?);
    let token = turbonet_host::random_hex(32)?;
    let options = |namespace: &str| {
        let mut options =
            turbonet_kube::selftest::Options::new(&args.image, namespace, &lab, &token);
        options.port = args.port;
        options.timeout = std::time::Duration::from_secs(args.timeout);
        options.keep = args.keep;
        options
    };
    let report = turbonet_kube::selftest::main(args.namespace.as_deref(), options, |said| {
        eprintln!("note: {said}");
    })
    .map_err(anyhow::Error::msg)?;
    if args.json {
        super::print_json(&report)?;
    } else {
        let rows = report.steps.iter().map(|s| {
            [
                s.step.to_owned(),
                if s.ok { "ok" } else { "FAILED" }.to_owned(),
                format!("{:.1}", s.seconds),
                s.detail.clone(),
            ]
        });
        print!(
            "{}",
            crate::render::prose_table(&["step", "result", "s", "what was seen"], rows, &[2], &[3])
        );
        println!(
            "selftest {}: lab {} in namespace {}{}",
            if report.ok() { "passed" } else { "FAILED" },
            report.lab,
            report.namespace,
            if args.keep && report.ok() {
                format!(
                    " (kept: kubectl delete statefulset,service,pdb,configmap,secret -n {} -l app.kubernetes.io/instance={})",
                    report.namespace, report.lab
                )
            } else {
                String::new()
            }
        );
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
