//! The commands of a group member who is not root: forwarded to
//! `turbonet serve` ([`forward`]), and, in the service, run for that
//! member ([`run_for`]) as they may run them: every command kept to their
//! own labs or refused before it runs ([`admit`]), and what a command then
//! does differently for them in the helpers below (their own labs listed,
//! their commands run as them, their workload file read from what their
//! client passed, their graded labs started as theirs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::Result;
use clap::Parser;
use turbonet_lab::serve::{Request, Student};

use crate::cli::{
    CheckArgs, Cli, Command, EventsArgs, ExecArgs, FlapArgs, LabArg, LabCommand, LinkCommand,
    ShowArgs, TargetArgs, UiArgs, WatchArgs, WorkloadCommand,
};

/// The member a served command runs for (set once, in the request's own
/// process).
static STUDENT: OnceLock<Student> = OnceLock::new();

/// The argument that stands for a workload file the client opened and
/// passed along (the request process's descriptor 3). A marker only: it
/// is never opened by its path (see [`passed_file`]).
pub(crate) const PASSED_FILE: &str = "/dev/fd/3";

/// The most a member's workload file may hold.
const FILE_MAX: u64 = 1 << 20;

/// The file the client passed, and the name it had there (taken once).
static PASSED: std::sync::Mutex<Option<(std::os::fd::OwnedFd, String)>> =
    std::sync::Mutex::new(None);

/// Where the member's client runs (what they `exec` starts there).
static CWD: OnceLock<PathBuf> = OnceLock::new();

/// The member's terminal type.
static TERM: OnceLock<Option<String>> = OnceLock::new();

/// What came with the member's request besides its arguments.
static SENT: OnceLock<Sent> = OnceLock::new();

/// What a member's client sent with the arguments of their command.
#[derive(Debug, Default)]
struct Sent {
    /// Whether it passed a workload file along.
    file: bool,
    /// The lab their `$TURBONET_LAB` names.
    lab: Option<String>,
}

/// The member this process acts for, if it serves one.
fn student() -> Option<&'static Student> {
    STUDENT.get()
}

/// How a command the member runs in a node runs: as them, from their
/// working directory.
pub(crate) fn as_user() -> Option<turbonet_host::process::AsUser> {
    let cwd = CWD.get().cloned().unwrap_or_else(|| "/".into());
    let term = TERM.get().cloned().flatten();
    student().map(|s| s.as_user(cwd, term))
}

/// Where the service listens: `$TURBONET_SERVE`, or its default.
fn socket() -> PathBuf {
    std::env::var_os("TURBONET_SERVE")
        .map_or_else(|| PathBuf::from(turbonet_lab::serve::SOCKET), PathBuf::from)
}

/// Whether a `turbonet serve` socket is there to forward to (without one,
/// a command runs here as before: `lab list` works, the rest say they need
/// root).
pub(crate) fn service_listens() -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(socket()).is_ok_and(|m| m.file_type().is_socket())
}

/// Runs this command through `turbonet serve`: its arguments as typed,
/// with a workload file opened here (as the user) and passed along.
pub(crate) fn forward(command: &Command) -> Result<ExitCode> {
    let mut args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| {
            a.into_string()
                .map_err(|a| anyhow::anyhow!("an argument that is not UTF-8: {a:?}"))
        })
        .collect::<Result<_>>()?;
    let mut file = None;
    let mut file_name = None;
    if let Command::Workload(WorkloadCommand::Start { what, .. }) = command
        && Path::new(what).is_file()
    {
        file = Some(std::fs::File::open(what).map_err(|e| anyhow::anyhow!("opening {what}: {e}"))?);
        file_name = Some(what.clone());
        if let Some(arg) = args.iter_mut().rev().find(|a| *a == what) {
            PASSED_FILE.clone_into(arg);
        }
    }
    let request = Request {
        args,
        cwd: std::env::current_dir().unwrap_or_else(|_| "/".into()),
        file: file.is_some(),
        file_name,
        term: std::env::var("TERM").ok().filter(|t| t.len() <= 64),
        lab: std::env::var(turbonet_lab::state::LAB_VARIABLE)
            .ok()
            .filter(|l| !l.is_empty()),
    };
    let code = turbonet_lab::serve::forward(&socket(), &request, file.as_ref())?;
    Ok(ExitCode::from(code))
}

/// A member's workload file for `workload start WHAT`, none when this
/// process serves no member (the caller reads its own path then). For a
/// member, when `what` stands for the file their client passed, its name
/// there and its text, read from the descriptor (a regular file opened
/// for reading, at most 1 MiB); otherwise none (`what` names a workload
/// of the lab).
pub(crate) fn passed_file(what: &str) -> Option<Result<Option<(String, String)>>> {
    student()?;
    Some(read_passed(what))
}

/// The file the member's client passed for `workload start WHAT`, as
/// [`passed_file`] reads it.
fn read_passed(what: &str) -> Result<Option<(String, String)>> {
    if what != PASSED_FILE {
        return Ok(None);
    }
    let passed = PASSED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some((fd, name)) = passed else {
        anyhow::bail!(turbonet_lab::Error::Refused(
            "no workload file came with the request: give a file of [[workload]] tables you \
             can read"
                .to_owned()
        ));
    };
    let text = turbonet_host::descriptors::read_passed(fd, FILE_MAX).map_err(|e| {
        turbonet_lab::Error::Refused(format!(
            "{name}: {e} (a workload file is a file of [[workload]] tables you can read, of at \
             most {} KiB)",
            FILE_MAX >> 10
        ))
    })?;
    Ok(Some((name, text)))
}

/// In a request's own process: parses the member's arguments, and runs
/// the command for them (kept to their labs by [`admit`]).
pub(crate) fn run_for(
    student: &Student,
    request: Request,
    file: Option<std::os::fd::OwnedFd>,
) -> ExitCode {
    crate::command_logs();
    let args = std::iter::once("turbonet".to_owned()).chain(request.args);
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let _ = STUDENT.set(student.clone());
    let _ = CWD.set(request.cwd);
    let _ = TERM.set(request.term.filter(|t| {
        t.len() <= 64
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b))
    }));
    let _ = SENT.set(Sent {
        file: request.file,
        lab: request.lab,
    });
    if let Some(fd) = file {
        let name = request
            .file_name
            .unwrap_or_else(|| "your workload file".to_owned());
        *PASSED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((fd, name));
    }
    match crate::run(cli.command) {
        Ok(code) => code,
        Err(e) => crate::report(e),
    }
}

/// The command as this process may run it: a member's as
/// [`for_student`] keeps it (the lab it names, their own; or refused),
/// anyone else's as given.
pub(crate) fn admit(command: Command) -> Result<Command> {
    let Some(student) = student() else {
        return Ok(command);
    };
    let sent = SENT.get_or_init(Sent::default);
    for_student(student, command, sent.file, sent.lab.as_deref())
}

/// The command as a member may run it: on their own labs (the one named,
/// given with or without their prefix, or their only one), or refused.
fn for_student(
    student: &Student,
    mut command: Command,
    file: bool,
    default_lab: Option<&str>,
) -> Result<Command> {
    // The lab named, else the one their `$TURBONET_LAB` names, else their
    // only one: always named here, so nothing of the service's own
    // environment picks it.
    let own = |lab: &mut LabArg| -> Result<()> {
        lab.lab = Some(student.resolve(lab.lab.as_deref().or(default_lab))?);
        Ok(())
    };
    match &mut command {
        Command::Lab(lab) => match lab {
            LabCommand::List { .. } | LabCommand::Start { .. } => {}
            LabCommand::Check { junit: Some(_), .. } => anyhow::bail!(turbonet_lab::Error::Refused(
                "--junit would be written by turbonet serve, as root: take `turbonet lab check \
                 --json` instead"
                    .to_owned()
            )),
            LabCommand::Tasks { lab, .. }
            | LabCommand::Check { lab, .. }
            | LabCommand::Hint { lab, .. }
            | LabCommand::Reset { lab, .. }
            | LabCommand::Stop { lab } => own(lab)?,
        },
        Command::Flap(FlapArgs {
            lab, period, count, ..
        }) => {
            own(lab)?;
            admit_flap(period, *count)?;
        }
        Command::Exec(ExecArgs { lab, .. })
        | Command::Fail(TargetArgs { lab, .. })
        | Command::Restore(TargetArgs { lab, .. })
        | Command::Show(ShowArgs { lab, .. })
        | Command::Events(EventsArgs { lab, .. })
        | Command::Watch(WatchArgs { lab, .. })
        | Command::Check(CheckArgs { lab, .. }) => own(lab)?,
        Command::Link(LinkCommand::Set { lab, params, link }) => {
            own(lab)?;
            admit_link(student, lab, link, params)?;
        }
        Command::Link(LinkCommand::Reset { lab, .. } | LinkCommand::Show { lab, .. }) => {
            own(lab)?;
        }
        Command::Workload(WorkloadCommand::Start { lab, what }) => {
            // A file comes as the one their client opened, as them: the
            // service reads no path as root.
            let passed = file && what == PASSED_FILE;
            if !passed && (what.contains('/') || what.ends_with(".toml")) {
                anyhow::bail!(turbonet_lab::Error::Refused(format!(
                    "no file {what} you can read: give a file of [[workload]] tables you can \
                     read, or the name of a workload of the lab"
                )));
            }
            own(lab)?;
        }
        Command::Workload(
            WorkloadCommand::Stop { lab, .. } | WorkloadCommand::Show { lab, .. },
        ) => own(lab)?,
        Command::Ui(UiArgs { lab, listen }) => {
            own(lab)?;
            // Many students share the machine: the usual port is likely
            // taken, so theirs is any free one unless they chose.
            if *listen == crate::cli::UI_LISTEN.parse().expect("a socket address") {
                listen.set_port(0);
            }
            if !listen.ip().is_loopback() || (listen.port() != 0 && listen.port() < 1024) {
                anyhow::bail!(turbonet_lab::Error::Refused(format!(
                    "a student's page listens on this machine only, on a port from 1024 up \
                     (or 0, any free one): e.g. `--listen 127.0.0.1:0`, not {listen} (reach it \
                     from elsewhere with `ssh -L`)"
                )));
            }
        }
        Command::Status(_) => {}
        _ => anyhow::bail!(turbonet_lab::Error::Refused(
            "through turbonet serve a student runs `turbonet lab`, `exec`, `link`, `fail`, \
             `restore`, `flap`, `workload`, `show`, `status`, `events`, `watch`, `check` and \
             `ui`; the rest needs root"
                .to_owned()
        )),
    }
    Ok(command)
}

/// The shortest period of a member's `flap`: each cycle is two events in
/// the lab's log and two changes to the fabric.
const FLAP_PERIOD_MIN: std::time::Duration = std::time::Duration::from_millis(100);

/// The most cycles of a member's `flap`.
const FLAP_COUNT_MAX: u32 = 10_000;

/// Refuses a `flap` faster or longer than a member may ask for.
fn admit_flap(period: &str, count: u32) -> Result<()> {
    // A period that does not parse is the command's own error to give.
    let Ok(period) = period.parse::<turbonet_topo::units::Delay>() else {
        return Ok(());
    };
    if period.as_duration() < FLAP_PERIOD_MIN || count > FLAP_COUNT_MAX {
        anyhow::bail!(turbonet_lab::Error::Refused(format!(
            "a student's flap has a period of at least {} ms and at most {FLAP_COUNT_MAX} \
             cycles (asked: {period} x {count})",
            FLAP_PERIOD_MIN.as_millis()
        )));
    }
    Ok(())
}

/// Refuses `link set` parameters under which the link would hold more
/// memory than the member's limit: a parameter not given is the one in
/// force now (as the daemon has it: two changes, a delay then a rate,
/// count together). A link the lab has not is the daemon's to refuse.
fn admit_link(
    student: &Student,
    lab: &LabArg,
    link: &str,
    params: &crate::cli::LinkSetArgs,
) -> Result<()> {
    use turbonet_topo::units::Delay;
    let mut client = lab.client()?;
    let Some(current) = client.links(Some(link))?.into_iter().next() else {
        return Ok(());
    };
    let now = turbonet_api::params_from_proto(&current.params.unwrap_or_default())?;
    let delay = params.delay.or(now.delay).unwrap_or(Delay::ZERO);
    let jitter = params.jitter.or(now.jitter).unwrap_or(Delay::ZERO);
    student.admit_link(
        params.queue.or(now.queue),
        params.rate.or(now.rate),
        Delay::from_nanos(delay.as_nanos().saturating_add(jitter.as_nanos())),
    )?;
    Ok(())
}

/// The scenario a graded lab starts from: its own file, or for a member a
/// copy named `<user>-<lab>` (within their node limit).
pub(crate) fn course_scenario(found: &turbonet_course::CourseLab) -> Result<PathBuf> {
    let Some(student) = student() else {
        return Ok(found.scenario());
    };
    let path = found.scenario();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let name = student.lab_name(&found.lab);
    let renamed = turbonet_topo::with_lab_name(&text, &name)
        .ok_or_else(|| anyhow::anyhow!("{} has no `[lab] name` to rename", path.display()))?;
    let lab = turbonet_topo::parse(&path.display().to_string(), &renamed).map_err(|errors| {
        turbonet_lab::Error::Scenario {
            origin: path.display().to_string(),
            errors: Box::new(errors),
        }
    })?;
    student.admit(&found.name, lab.fabric.nodes.len())?;
    // Kept, as a scenario `turbonet status` names is.
    let copy = turbonet_lab::serve::save_copy(&name, &renamed)?;
    Ok(copy)
}

/// A member's lab name for a graded lab's own (`[lab] name`).
pub(crate) fn lab_name(lab: &str) -> String {
    student().map_or_else(|| lab.to_owned(), |s| s.lab_name(lab))
}

/// Removes the copy a member's lab was started from, once it is down.
pub(crate) fn forget_scenario(lab: &str) {
    if student().is_some() {
        let _ = std::fs::remove_file(
            Path::new(turbonet_lab::serve::SCENARIOS).join(format!("{lab}.toml")),
        );
    }
}

/// Keeps, for a member, only the labs that are theirs (`status`).
pub(crate) fn keep_own(labs: &mut Vec<turbonet_lab::inspect::LabStatus>) {
    if let Some(student) = student() {
        labs.retain(|l| student.owns(&l.lab));
    }
}

/// The secret a member's `ui` page is served at, none for root's: others
/// on the machine can reach the port too.
pub(crate) fn page_token() -> Result<Option<String>> {
    Ok(match student() {
        Some(_) => Some(turbonet_ui::token()?),
        None => None,
    })
}

/// Refuses, for a member, a workload file that holds a command workload:
/// the daemon runs those as root.
pub(crate) fn admit_workloads(parsed: &[turbonet_topo::experiment::Workload]) -> Result<()> {
    if student().is_some()
        && let Some(w) = parsed.iter().find(|w| w.kind.name() == "exec")
    {
        return Err(turbonet_lab::Error::Refused(format!(
            "workload {}: a command workload runs as root, and is not open to students (run commands with `turbonet exec`)",
            w.name
        ))
        .into());
    }
    Ok(())
}

/// For a member starting graded lab `name`: their lock on starts, held
/// while it is returned (one start of theirs at a time), and a refusal
/// when a lab of that name is up already (theirs, or not). Nothing for
/// root.
pub(crate) fn admit_start(name: &str) -> Result<Option<impl Sized>> {
    let one_at_a_time = student().map(Student::lock_starts).transpose()?;
    if let Some(student) = student()
        && turbonet_lab::state::LabDir::of(name).exists()
    {
        return Err(turbonet_lab::Error::Refused(if student.owns(name) {
            format!(
                "you have lab {name} up already: `turbonet lab stop --lab {name}` first (or \
                 `turbonet lab reset --lab {name}` to start it again)"
            )
        } else {
            format!("a lab named {name} is up, and it is not yours: ask the administrator")
        })
        .into());
    }
    Ok(one_at_a_time)
}

/// Who a graded lab belongs to from its first step: the member (its nodes
/// in a user namespace of theirs), or root.
pub(crate) fn owner() -> Option<turbonet_lab::up::Owner> {
    student().map(|s| turbonet_lab::up::Owner {
        uid: s.uid,
        gid: s.gid,
    })
}

/// Hands a member's graded lab's routers to them (nothing for root).
pub(crate) fn hand_routers(lab: &turbonet_topo::Lab) -> turbonet_lab::error::Result<()> {
    match student() {
        Some(student) => turbonet_lab::serve::hand_routers(lab, student),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// A member with the default limits.
    fn alice() -> Student {
        Student {
            name: "alice".to_owned(),
            uid: 1234,
            gid: 1234,
            groups: Vec::new(),
            max_nodes: turbonet_lab::serve::MAX_NODES,
            max_queue: turbonet_lab::serve::MAX_QUEUE,
            limit_origin: turbonet_lab::serve::CONFIG.into(),
        }
    }

    fn refusal(args: &[&str], file: bool) -> String {
        let student = alice();
        let argv = std::iter::once("turbonet").chain(args.iter().copied());
        let command = Cli::try_parse_from(argv).expect("parses").command;
        match for_student(&student, command, file, None) {
            Ok(c) => panic!("{args:?} is let through: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn root_commands_and_root_reads_are_refused_before_any_lab_is_looked_up() {
        assert!(refusal(&["clean"], false).contains("the rest needs root"));
        assert!(refusal(&["up", "scenarios/hpn.toml"], false).contains("the rest needs root"));
        // A path the client did not open: the service would read it as root.
        assert!(
            refusal(&["workload", "start", "/etc/shadow.toml"], false)
                .contains("no file /etc/shadow.toml you can read")
        );
        assert!(refusal(&["workload", "start", PASSED_FILE], false).contains("you can read"));
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1_000,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a member's client sends as arguments is parsed and
        /// kept to their labs, or refused: never a panic of the service.
        #[test]
        fn any_arguments_of_a_member_are_refused_or_kept_to_their_labs(
            args in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        "lab", "start", "check", "stop", "exec", "link", "set", "flap",
                        "workload", "ui", "--listen", "--period", "--count", "--lab", "--rate",
                        "--delay", "--queue", "--jitter", "/dev/fd/3", "--", "*", "0",
                        "4294967295", "1ms", "10gbit", "30s", "127.0.0.1:0", "[::]:80",
                    ]).prop_map(str::to_owned),
                    proptest::prelude::any::<String>(),
                ],
                0..8,
            ),
            file in proptest::prelude::any::<bool>(),
        ) {
            let student = alice();
            let argv = std::iter::once("turbonet".to_owned()).chain(args);
            if let Ok(cli) = Cli::try_parse_from(argv) {
                let _ = for_student(&student, cli.command, file, None);
            }
        }
    }

    #[test]
    fn their_turbonet_lab_names_one_of_their_labs_or_nothing() {
        let student = alice();
        let command = Cli::try_parse_from(["turbonet", "exec", "leaf0", "--", "true"])
            .expect("parses")
            .command;
        let e = for_student(&student, command, false, Some("bob-ecmp"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("you have no lab bob-ecmp up"), "{e}");
    }

    #[test]
    fn a_students_flap_is_held_to_a_period_and_a_count() {
        assert!(admit_flap("1s", 10).is_ok());
        let e = admit_flap("1ms", 10).unwrap_err().to_string();
        assert!(e.contains("period of at least 100 ms"), "{e}");
        assert!(admit_flap("1s", 4_294_967_295).is_err());
    }
}
