//! The `p4rt` target: a lab's fabric on the programmable switches its
//! `[p4rt]` section names, each reached over P4Runtime at its address.
//! Hosts are whatever is cabled to the host ports (servers); turbonet
//! creates nothing in this machine's kernel for them.
//!
//! Or, when every switch says `bmv2 = true`, the whole lab runs here: each
//! switch is BMv2's `simple_switch_grpc` in a namespace of its own, its
//! ports `p<N>` there, its cables veth pairs between them, and every host a
//! namespace with a port of its own on its switch.

use std::path::{Path, PathBuf};

use crate::bail;
use crate::err;
use crate::error::{Context, Result};
use turbonet_p4::p4::config::v1::P4Info;
use turbonet_p4::pipeline::Target;
use turbonet_topo::mapper::{self, MapConfig, Mapping, PhysicalSwitch};
use turbonet_topo::{Lab, P4rtConfig, P4rtDevice};

/// The BMv2 program that serves P4Runtime.
pub const BMV2: &str = "simple_switch_grpc";

/// The lab's `[p4rt]` section (present on target `p4rt`).
pub fn config(lab: &Lab) -> Result<&P4rtConfig> {
    lab.p4rt
        .as_ref()
        .ok_or_else(|| err!("lab {} has no [p4rt] section", lab.name))
}

/// The `[p4rt]` switches as the mapper sees them.
pub fn map_config(p4rt: &P4rtConfig) -> MapConfig {
    MapConfig {
        switches: p4rt
            .switches
            .iter()
            .map(|s| PhysicalSwitch::new(&s.name, s.ports, s.speed))
            .collect(),
        queues: p4rt.queues,
        default_rate: mapper::DEFAULT_RATE,
        // Hosts turbonet runs are namespaces: a port each, untagged.
        untagged_hosts: all_bmv2(p4rt),
    }
}

/// True when every switch is a BMv2 turbonet runs here.
pub fn all_bmv2(p4rt: &P4rtConfig) -> bool {
    p4rt.switches.iter().all(|s| s.device == P4rtDevice::Bmv2)
}

/// True when the lab runs entirely on this machine (hosts included).
pub fn local(lab: &Lab) -> bool {
    lab.p4rt.as_ref().is_some_and(all_bmv2)
}

/// Maps the lab onto its switches, or says what is short.
pub fn map(lab: &Lab) -> Result<Mapping, String> {
    let Some(p4rt) = &lab.p4rt else {
        return Err("target \"p4rt\" needs a [p4rt] section".to_owned());
    };
    mapper::map(&lab.fabric, &map_config(p4rt)).map_err(|e| match e {
        // The mapper's advice names `plan`'s flags: in a scenario they are
        // more `[[p4rt.switch]]` or `[p4rt] queues`.
        mapper::MapError::DoesNotFit(_) => {
            format!("{e} (in the scenario: more [[p4rt.switch]] entries, or [p4rt] queues)")
        }
        e => e.to_string(),
    })
}

/// Where `simple_switch_grpc` is on `PATH`, if it is.
pub fn find_bmv2() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(BMV2))
            .find(|p| p.is_file())
    })
}

/// Why the lab cannot run here, if it cannot: BGP (its agents would need
/// a control plane wired to each switch's CPU port), BMv2 asked for on a
/// machine without it, or BMv2 switches mixed with remote ones.
pub fn unsupported(lab: &Lab) -> Option<String> {
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        return Some(
            "routing mode \"bgp\" runs on targets \"netns\" and \"soft\"; on \"p4rt\" the \
             agents would need a control-plane host wired to each switch's CPU port: use mode \
             \"static\" or \"controller\""
                .to_owned(),
        );
    }
    let p4rt = lab.p4rt.as_ref()?;
    let bmv2 = p4rt
        .switches
        .iter()
        .find(|s| s.device == P4rtDevice::Bmv2)?;
    if find_bmv2().is_none() {
        return Some(format!(
            "switch {} asks for BMv2 (`bmv2 = true`), but {BMV2} is not on PATH; install \
             BMv2 (p4lang/behavioral-model, built with --with-pi), or start it elsewhere and \
             give `address = \"HOST:PORT\"` instead",
            bmv2.name
        ));
    }
    if let Some(remote) = p4rt.switches.iter().find(|s| s.device != P4rtDevice::Bmv2) {
        return Some(format!(
            "switch {} runs BMv2 here but {} is remote: either every switch is `bmv2 = true` \
             (the lab runs on this machine, hosts included) or none is",
            bmv2.name, remote.name
        ));
    }
    None
}

/// What switch `sw` running `p4info` is, for the unit of its delays: a
/// BMv2 turbonet starts, or at an address the program's architecture's
/// target.
pub fn target(sw: &turbonet_topo::P4rtSwitch, p4info: &P4Info) -> Target {
    match sw.device {
        P4rtDevice::Bmv2 => Target::Bmv2,
        P4rtDevice::Address(_) => Target::of_arch(p4info),
    }
}

/// Where a BMv2 turbonet starts serves P4Runtime, inside its namespace.
pub const BMV2_GRPC: std::net::SocketAddr = std::net::SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    9559,
));

/// The name the kernel gives BMv2's process (`comm`, 15 bytes): what is
/// checked before it is signalled.
pub fn bmv2_comm() -> String {
    BMV2.chars().take(15).collect()
}

/// The egress queues per port that the pipeline of `p4info` uses:
/// `set_egress` sets v1model's 3-bit `standard_metadata.priority` from its
/// `queue` parameter, so as many as that parameter can number (at most 8).
pub fn queues(p4info: &P4Info) -> Result<u32> {
    let schema = turbonet_p4::Schema::new(p4info)?;
    let pipeline = turbonet_p4::Pipeline::resolve(&schema, p4info, Target::Bmv2)?;
    Ok(1 << pipeline.set_egress.widths[2].min(3))
}

/// BMv2's command line (after the program) for device `device_id` with
/// `ports` as `-i PORT@p<PORT>`, no program yet, its notifications on the
/// IPC socket `notifications` (BMv2's default, /tmp/bmv2-<device>-
/// notifications.ipc, is shared by every BMv2 of that device id), `queues`
/// priority queues per port and its CPU port 255. BMv2 has one queue per
/// port unless told (`--priority-queues`, a target option, after `--`),
/// and drops every frame whose priority is not below the count.
pub fn bmv2_args(device_id: u64, ports: &[u32], notifications: &Path, queues: u32) -> Vec<String> {
    let mut args = vec![
        "--device-id".to_owned(),
        device_id.to_string(),
        "--no-p4".into(),
        "--notifications-addr".into(),
        format!("ipc://{}", notifications.display()),
    ];
    for port in ports {
        args.push("-i".into());
        args.push(format!("{port}@{}", super::soft::port_ifname(*port)));
    }
    args.extend([
        "--".into(),
        "--grpc-server-addr".into(),
        BMV2_GRPC.to_string(),
        "--cpu-port".into(),
        "255".into(),
        "--priority-queues".into(),
        queues.to_string(),
    ]);
    args
}

/// Starts BMv2 for switch `switch` (device `device_id`) in its namespace
/// `netns` with [`bmv2_args`], its log in `log` and its notifications
/// socket beside it (`log` with extension `ipc`). Returns its pid once it
/// accepts P4Runtime connections; fails with its own output if it exits
/// first.
pub async fn start_bmv2(
    switch: &str,
    netns: &str,
    (device_id, ports, queues): (u64, &[u32], u32),
    log: &Path,
) -> Result<u32> {
    let program = find_bmv2().ok_or_else(|| err!("{BMV2} is not on PATH"))?;
    let ns = turbonet_host::namespaces::open(netns).with_context(|| format!("opening {netns}"))?;
    let mut command = std::process::Command::new(&program);
    command.args(bmv2_args(
        device_id,
        ports,
        &log.with_extension("ipc"),
        queues,
    ));
    let mut child = turbonet_host::process::Start {
        namespace: Some(&ns),
        new_session: true,
        log: Some(log),
        ..Default::default()
    }
    .spawn(&mut command)
    .with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let probe = {
            let ns = ns.try_clone()?;
            tokio::task::spawn_blocking(move || {
                turbonet_host::namespaces::in_namespace(&ns, || {
                    std::net::TcpStream::connect(BMV2_GRPC)
                })
            })
            .await?
        };
        if probe.is_ok() {
            return Ok(pid);
        }
        if let Some(status) = child.try_wait()? {
            let output = std::fs::read_to_string(log).unwrap_or_default();
            bail!("{BMV2} for {switch} exited ({status}): {}", output.trim());
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{BMV2} for {switch} did not serve P4Runtime within 20 s; see {}",
                log.display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Connects to switch `sw` of the lab with `election_id`: at its address
/// (with the token of its `token_file`, relative to `scenario`), or inside
/// the namespace of the BMv2 turbonet started for it. Returns
/// the client and where it reached it (for messages).
pub async fn connect(
    lab: &Lab,
    scenario: &Path,
    sw: &turbonet_topo::P4rtSwitch,
    election_id: u128,
) -> Result<(turbonet_p4::Client, String)> {
    use turbonet_p4::{Client, Token};
    let (client, at) = match &sw.device {
        P4rtDevice::Address(addr) => {
            let token = match &sw.token_file {
                Some(file) => {
                    let path = relative_to(scenario, file);
                    let text = std::fs::read_to_string(&path).with_context(|| {
                        format!("switch {}: reading its token {}", sw.name, path.display())
                    })?;
                    Token::bearer(&text)
                        .with_context(|| format!("{}: not a token", path.display()))?
                }
                None => Token::none(),
            };
            (
                Client::connect_with(addr, sw.device_id, election_id, token)
                    .await
                    .map_err(crate::Error::from),
                addr.clone(),
            )
        }
        P4rtDevice::Bmv2 => {
            let ns = crate::names::bmv2_namespace(&lab.name, &sw.name);
            (
                connect_in(&ns, BMV2_GRPC, sw.device_id, election_id).await,
                format!("{BMV2_GRPC} in {ns}"),
            )
        }
    };
    Ok((client.with_context(|| format!("switch {}", sw.name))?, at))
}

/// [`Client::connect`](turbonet_p4::Client::connect) to a server
/// listening at `addr` inside network namespace `netns` (a switch turbonet
/// runs in a namespace of its own): every connection's socket is created in
/// that namespace.
pub async fn connect_in(
    netns: &str,
    addr: std::net::SocketAddr,
    device_id: u64,
    election_id: u128,
) -> Result<turbonet_p4::Client> {
    let ns = std::sync::Arc::new(
        turbonet_host::namespaces::open(netns)
            .with_context(|| format!("opening namespace {netns}"))?,
    );
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let ns = ns.clone();
        async move {
            let stream = tokio::task::spawn_blocking(move || {
                turbonet_host::namespaces::in_namespace(&ns, || {
                    let stream = std::net::TcpStream::connect(addr)?;
                    stream.set_nonblocking(true)?;
                    Ok(stream)
                })
            })
            .await
            .map_err(std::io::Error::other)??;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                tokio::net::TcpStream::from_std(stream)?,
            ))
        }
    });
    let label = format!("{addr} in {netns}");
    let channel = tonic::transport::Endpoint::from_static("http://p4runtime.local")
        .connect_with_connector(connector)
        .await
        .with_context(|| format!("connecting to the P4Runtime server at {label}"))?;
    Ok(turbonet_p4::Client::over(channel, &label, device_id, election_id).await?)
}

/// A path of the scenario, relative to the scenario file's directory.
fn relative_to(scenario: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        return path.to_owned();
    }
    scenario
        .parent()
        .map_or_else(|| path.to_owned(), |dir| dir.join(path))
}

/// The device config a switch gets when none is given: with turbonet's own
/// P4Info, p4c's BMv2 JSON of the same compile (`p4/build/`); with another
/// P4Info, none (its program is the scenario's to give).
pub fn default_device_config(own_p4info: bool) -> Vec<u8> {
    if own_p4info {
        turbonet_p4::TURBONET_BMV2_JSON.to_vec()
    } else {
        Vec::new()
    }
}

/// The pipeline the switches get: the P4Info (`[p4rt] p4info`, default
/// turbonet's own, p4c's of `p4/turbonet.p4`) and the compiled artifact
/// (`device_config`, default [`default_device_config`]).
pub fn pipeline(lab: &Lab, scenario: &Path) -> Result<(P4Info, Vec<u8>)> {
    let p4rt = config(lab)?;
    let p4info = match &p4rt.p4info {
        Some(file) => {
            let path = relative_to(scenario, file);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading the P4Info {}", path.display()))?;
            turbonet_p4::parse_p4info(&text)
                .with_context(|| format!("{}: not a text-format P4Info", path.display()))?
        }
        None => turbonet_p4::turbonet_p4info(),
    };
    let device_config = match &p4rt.device_config {
        Some(file) => {
            let path = relative_to(scenario, file);
            std::fs::read(&path)
                .with_context(|| format!("reading the device config {}", path.display()))?
        }
        None => default_device_config(p4rt.p4info.is_none()),
    };
    Ok((p4info, device_config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BMv2 gets as many priority queues as turbonet's pipeline numbers
    /// (8: `queue` is 3 bits), or it drops whatever is mapped to queue 1
    /// and up.
    #[test]
    fn bmv2_gets_the_pipelines_priority_queues() {
        let queues = queues(&turbonet_p4::turbonet_p4info()).unwrap();
        assert_eq!(queues, 8);
        let args = bmv2_args(3, &[1, 2], Path::new("/run/t/bmv2-s1.ipc"), queues);
        let target = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(
            &args[..target],
            [
                "--device-id",
                "3",
                "--no-p4",
                "--notifications-addr",
                "ipc:///run/t/bmv2-s1.ipc",
                "-i",
                "1@p1",
                "-i",
                "2@p2"
            ]
        );
        let options = &args[target + 1..];
        let at = options
            .iter()
            .position(|a| a == "--priority-queues")
            .expect("--priority-queues among the target options");
        assert_eq!(options[at + 1], "8");
    }

    #[test]
    fn paths_are_relative_to_the_scenario() {
        let scenario = Path::new("/labs/k4/k4.toml");
        assert_eq!(
            relative_to(scenario, "build/t.json"),
            Path::new("/labs/k4/build/t.json")
        );
        assert_eq!(
            relative_to(scenario, "/opt/t.json"),
            Path::new("/opt/t.json")
        );
    }
}
