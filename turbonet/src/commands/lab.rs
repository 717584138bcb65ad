//! `turbonet lab ...`: graded labs, started, read, checked, hinted,
//! reset and stopped.

use std::process::ExitCode;

use anyhow::Result;
use turbonet_lab::{down, inspect, up};
use turbonet_topo::Lab;

use super::print_json;
use crate::cli::LabCommand;
use crate::progress::Terminal;
use crate::render::{prose_table, table};
use crate::students;

/// `turbonet lab ...`
pub(crate) fn run(command: LabCommand) -> Result<ExitCode> {
    use LabCommand as L;
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
                print_json(&labs)?;
            } else {
                println!("{}", course_labs(&labs));
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
                print_json(&running.lab.tasks)?;
            } else {
                println!("{}", course_tasks(&found, &running.lab));
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
                print_json(&grade)?;
            } else {
                println!("{}", grade_table(&grade));
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
            super::down::print_down(down::down(lab.lab.as_deref())?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Brings a graded lab up and makes the faults of `seed` (default: the
/// lab's own seed); a lab whose faults cannot be made is taken down again.
fn start_course(found: &turbonet_course::CourseLab, seed: Option<u64>, quiet: bool) -> Result<()> {
    let name = students::lab_name(&found.lab);
    // A member's starts, one at a time, over no lab up under that name.
    let _one_at_a_time = students::admit_start(&name)?;
    let options = up::Options {
        file: students::course_scenario(found)?,
        threads: None,
        captures_in: None,
        // A member's lab is theirs from its first step, its nodes in a
        // user namespace of theirs.
        owner: students::owner(),
        placement: None,
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
    let prepared = students::hand_routers(&up.lab);
    let made = match prepared.and_then(|()| turbonet_course::seed_faults(&running, seed)) {
        Ok(made) => made,
        Err(e) => {
            let _ = down::down(Some(&up.lab.name));
            students::forget_scenario(&up.lab.name);
            return Err(e.into());
        }
    };
    if !quiet {
        println!("{}", course_started(found, &up.lab));
        if made > 0 {
            println!(
                "{made} fault(s) made with seed {seed}: something in this fabric is broken; \
                 find it and fix it"
            );
        }
    }
    Ok(())
}

/// `lab list`: every graded lab.
fn course_labs(labs: &[turbonet_course::CourseLab]) -> String {
    if labs.is_empty() {
        return "no labs".to_owned();
    }
    let rows = labs.iter().map(|l| {
        [
            l.name.clone(),
            l.title.clone(),
            l.tasks.len().to_string(),
            l.points().to_string(),
        ]
    });
    let mut out = table(&["lab", "title", "tasks", "points"], rows, &[2, 3]);
    out.push_str("\nstart one: turbonet lab start NAME");
    out
}

/// What `lab start` and `lab reset` print once the fabric is up.
fn course_started(course: &turbonet_course::CourseLab, lab: &Lab) -> String {
    format!(
        "lab {} is up: {} ({} task{}, {} point{})\n\
         the tasks: {}\n\
         next:\n  turbonet lab tasks              # what to do\n  \
         turbonet exec NODE -- CMD        # work on a node (e.g. `ip route`)\n  \
         turbonet lab check [TASK]        # your score, and what is still wrong\n  \
         turbonet lab hint TASK\n  turbonet lab reset | stop",
        lab.name,
        course.title,
        course.tasks.len(),
        if course.tasks.len() == 1 { "" } else { "s" },
        course.points(),
        if course.points() == 1 { "" } else { "s" },
        course.dir.join("README.md").display(),
    )
}

/// `lab tasks`: each task of the running `lab`, its points and what it
/// checks.
fn course_tasks(course: &turbonet_course::CourseLab, lab: &Lab) -> String {
    let name = |n: turbonet_topo::NodeId| lab.fabric.node(n).name.as_str();
    let rows = lab.tasks.iter().map(|t| {
        [
            t.name.clone(),
            t.points.to_string(),
            t.title.clone(),
            t.checks
                .iter()
                .map(|c| c.describe(name))
                .collect::<Vec<_>>()
                .join("\n"),
        ]
    });
    format!(
        "{}: {}\n{}",
        course.name,
        course.title,
        prose_table(&["task", "points", "asks", "checks"], rows, &[1], &[2, 3])
    )
}

/// `lab check`: a score per task, the total, and what is still wrong.
fn grade_table(grade: &turbonet_course::Grade) -> String {
    let rows = grade.tasks.iter().map(|t| {
        let problems: Vec<&str> = t
            .checks
            .iter()
            .filter_map(|c| c.problem.as_deref())
            .collect();
        [
            t.name.clone(),
            format!("{}/{}", t.earned, t.points),
            if problems.is_empty() {
                "done".to_owned()
            } else {
                problems.join("\n")
            },
        ]
    });
    let mut out = prose_table(&["task", "score", "what is still wrong"], rows, &[1], &[2]);
    out.push_str(&format!(
        "\nlab {}: {} of {} points{}",
        grade.lab,
        grade.earned,
        grade.points,
        if grade.earned == grade.points {
            " — every task done"
        } else {
            ""
        }
    ));
    out
}
