//! `turbonet bench --machines`: a lab over several machines, emulated as
//! namespaces of this kernel ([`Emulated`]): what each worker builds and
//! what it costs at M = 1, 2, 4, and the one-way delay across an impaired
//! cut link beside the same link on one machine.
//!
//! One kernel serialises the creation of links, so the wall-clock time of
//! `up` does not fall as 1/M here; each worker's own work (its objects, its
//! CPU) is what a real machine of M would do.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use turbonet_host::process;
use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};
use turbonet_lab::progress::Progress;

use crate::engine::backends::ip;
use crate::report::{Report, count};

/// The port worker 0 listens on, in its machine's namespace.
pub const COORDINATOR_PORT: u16 = 7789;

/// The emulated underlay's MTU.
pub const UNDERLAY_MTU: u32 = 9100;

/// Machines emulated on this one: each a network namespace on a shared
/// bridge (the underlay, addresses from 198.18.0.0/15, MTU 9100), with a
/// mount namespace of its own whose `/run/netns` and `/run/turbonet` are
/// private tmpfs mounts, so that an unmodified `turbonet worker` there sees
/// a machine of its own: its labs, its namespaces, its daemon. A process
/// (`sleep`) holds each machine's namespaces for as long as this lives, so
/// a worker killed and started again finds its machine as it left it.
/// Dropped, it kills what runs on the machines and deletes them (take the
/// labs on them down first: [`Emulated::on`] runs `turbonet down` there).
#[derive(Debug)]
pub struct Emulated {
    /// The hub's namespace, then the machines'.
    names: Vec<String>,
    holders: Vec<Child>,
    token: PathBuf,
}

impl Emulated {
    /// `count` machines named after `tag` (a few characters, unique to the
    /// caller): `tnm-TAG-0` and on, on a bridge in `tnm-TAG-hub`, and a
    /// token file for their workers.
    pub fn new(tag: &str, count: usize) -> Result<Emulated> {
        let hub = format!("tnm-{tag}-hub");
        let mut emulated = Emulated {
            names: Vec::new(),
            holders: Vec::new(),
            token: std::env::temp_dir().join(format!("tnm-{tag}-{}.token", std::process::id())),
        };
        ip(&["netns", "add", &hub])?;
        emulated.names.push(hub.clone());
        let mtu = UNDERLAY_MTU.to_string();
        ip(&[
            "-n", &hub, "link", "add", "br0", "mtu", &mtu, "type", "bridge",
        ])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        for i in 0..count {
            let name = format!("tnm-{tag}-{i}");
            ip(&["netns", "add", &name])?;
            emulated.names.push(name.clone());
            let port = format!("p{i}");
            ip(&[
                "-n", &hub, "link", "add", &port, "mtu", &mtu, "type", "veth", "peer", "name",
                "u0", "mtu", &mtu, "netns", &name,
            ])?;
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/15", Emulated::address(i));
            ip(&["-n", &name, "addr", "add", &addr, "dev", "u0"])?;
            ip(&["-n", &name, "link", "set", "u0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            emulated.holders.push(hold(&name)?);
        }
        use std::os::unix::fs::OpenOptionsExt;
        let mut token = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&emulated.token)?;
        std::io::Write::write_all(&mut token, format!("tnm-{tag}-token\n").as_bytes())?;
        Ok(emulated)
    }

    /// Machine `i`'s underlay address.
    pub fn address(i: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 1)) + i as u32)
    }

    /// How many machines.
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    /// No machines.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    /// Machine `i`'s network namespace.
    pub fn namespace(&self, i: usize) -> &str {
        &self.names[i + 1]
    }

    /// The token file every worker reads.
    pub fn token(&self) -> &Path {
        &self.token
    }

    /// The process that holds machine `i`'s namespaces.
    pub fn holder(&self, i: usize) -> u32 {
        self.holders[i].id()
    }

    /// `path` (absolute) as machine `i` sees it, from here.
    pub fn path(&self, i: usize, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.holder(i)))
    }

    /// A command run on machine `i` (in its network and mount namespaces).
    pub fn on(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.holder(i).to_string())
            .args(["-m", "-n", "--"])
            .arg(program);
        c
    }

    /// Worker `i`'s command line, run on machine `i` with `binary`, of the
    /// lab in `file` over every machine, waiting `rendezvous` for the
    /// others.
    pub fn worker(&self, i: usize, binary: &Path, file: &Path, rendezvous: Duration) -> Command {
        let coordinator = format!("{}:{COORDINATOR_PORT}", Emulated::address(0));
        let mut c = self.on(i, binary);
        c.args(["worker", "--index", &i.to_string()])
            .args(["--of", &self.len().to_string()])
            .args(["--coordinator", &coordinator])
            .args(["--rendezvous", &rendezvous.as_secs().to_string()])
            .arg("--token-file")
            .arg(&self.token)
            .arg(file);
        c
    }

    /// The CPU seconds every process on machine `i` has used (those in
    /// its mount namespace: its worker, daemon, engines, routing daemons).
    pub fn cpu_seconds(&self, i: usize) -> f64 {
        let Ok(mine) = std::fs::metadata(format!("/proc/{}/ns/mnt", self.holder(i))) else {
            return 0.0;
        };
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return 0.0;
        };
        procs
            .filter_map(std::result::Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != self.holder(i))
            .filter(|pid| {
                std::fs::metadata(format!("/proc/{pid}/ns/mnt"))
                    .is_ok_and(|m| m.ino() == mine.ino() && m.dev() == mine.dev())
            })
            .filter_map(|pid| process::cpu_seconds(pid).ok())
            .sum()
    }
}

/// A process holding machine `name`'s namespaces, its own `/run/netns`
/// and `/run/turbonet` mounted, once it says so.
fn hold(name: &str) -> Result<Child> {
    let mut holder = Command::new("ip")
        .args(["netns", "exec", name, "sh", "-c"])
        .arg(
            "mount -t tmpfs tnm /run/netns && mkdir -p /run/turbonet && \
             mount -t tmpfs tnm /run/turbonet && echo ready && exec sleep infinity",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("ip netns exec")?;
    let mut ready = String::new();
    BufReader::new(holder.stdout.take().expect("piped")).read_line(&mut ready)?;
    if ready.trim() != "ready" {
        let _ = holder.kill();
        let _ = holder.wait();
        bail!("machine {name} could not mount its own /run");
    }
    Ok(holder)
}

impl Drop for Emulated {
    fn drop(&mut self) {
        for holder in &mut self.holders {
            let _ = holder.kill();
            let _ = holder.wait();
        }
        for name in self.names.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
        let _ = std::fs::remove_file(&self.token);
    }
}

/// A lab's workers running on emulated machines; on drop each is stopped
/// (SIGTERM: its part taken down), then the machines go.
struct Spread {
    machines: Emulated,
    workers: Vec<Child>,
    lab: String,
    /// What the workers said until the lab ran, each line after its
    /// worker's index.
    said: Vec<String>,
}

impl Spread {
    /// Starts the workers of `file` (lab `lab`) over `m` machines and waits
    /// until every one says the lab runs; how long that took.
    fn up(tag: &str, lab: &str, file: &Path, m: usize) -> Result<(Spread, f64)> {
        let machines = Emulated::new(tag, m)?;
        let exe = std::env::current_exe()?;
        let mut spread = Spread {
            machines,
            workers: Vec::new(),
            lab: lab.to_owned(),
            said: Vec::new(),
        };
        let (said, heard) = mpsc::channel();
        let start = Instant::now();
        for i in 0..m {
            let mut child = (spread.machines)
                .worker(i, &exe, file, Duration::from_secs(120))
                .args(["--threads", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            let stderr = child.stderr.take().expect("piped");
            let said = said.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr)
                    .lines()
                    .map_while(std::result::Result::ok)
                {
                    let _ = said.send((i, line));
                }
            });
            spread.workers.push(child);
        }
        drop(said);
        let running = format!("the lab runs on all {m} machine");
        let mut ran = vec![false; m];
        let mut last = Vec::new();
        while !ran.iter().all(|r| *r) {
            match heard.recv_timeout(Duration::from_secs(600)) {
                Ok((i, line)) => {
                    ran[i] |= line.contains(&running);
                    last.push(format!("worker {i}: {line}"));
                }
                Err(_) => bail!(
                    "lab {lab} over {m} machines did not run within 10 minutes: {}",
                    last.join("\n")
                ),
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        spread.said = last;
        Ok((spread, seconds))
    }

    /// Machine `i`'s namespaces of the lab.
    fn namespaces(&self, i: usize) -> usize {
        let prefix = format!("tn-{}", self.lab);
        std::fs::read_dir(self.machines.path(i, "/run/netns")).map_or(0, |d| {
            d.filter_map(std::result::Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .count()
        })
    }

    /// A UDP socket in node `node`'s namespace on machine `i`.
    fn udp_in(&self, i: usize, node: &str, bind: Option<SocketAddrV4>) -> Result<socket2::Socket> {
        let ns = turbonet_lab::names::node_namespace(&self.lab, node);
        let path = self.machines.path(i, &format!("/run/netns/{ns}"));
        let fd =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        crate::engine::traffic::udp_in_namespace(&std::os::fd::OwnedFd::from(fd), bind)
    }
}

impl Drop for Spread {
    fn drop(&mut self) {
        for w in &self.workers {
            let pid = nix::unistd::Pid::from_raw(w.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        for w in &mut self.workers {
            let _ = w.wait();
        }
        let exe = std::env::current_exe().unwrap_or_else(|_| "turbonet".into());
        for i in 0..self.machines.len() {
            let _ = (self.machines.on(i, &exe))
                .args(["down", &self.lab])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `turbonet bench --machines`: `file` over each of `counts` machines,
/// then the delay across an impaired cut link.
pub fn bench(
    file: &Path,
    counts: &[u32],
    probes: usize,
    progress: &dyn Progress,
) -> Result<Report> {
    let (lab, text) = turbonet_lab::up::load(file)?;
    let mut report = Report::default();
    report.text(format!(
        "lab {} over machines emulated as namespaces of this kernel (one kernel creates every \
         machine's links, so `up` does not shrink as 1/M here; each worker's objects and CPU do)",
        lab.name
    ));
    let mut rows = Vec::new();
    for &m in counts {
        progress.start(&format!("{m} machine(s)"));
        let plan = turbonet_topo::machines::plan(&lab, m)
            .map_err(|e| turbonet_lab::Error::Invalid(format!("{}: {e}", file.display())))?;
        let tag = format!("b{m}");
        let name = format!("tnbm{m}");
        let path = std::env::temp_dir().join(format!("turbonet-bench-{name}.toml"));
        std::fs::write(&path, rename(&text, &name))?;
        let (spread, seconds) = Spread::up(&tag, &name, &path, m as usize)?;
        for (i, part) in plan.parts.iter().enumerate() {
            rows.push(vec![
                m.to_string(),
                i.to_string(),
                count(part.nodes.len()),
                count(spread.namespaces(i)),
                count(part.devices),
                count(part.vxlan),
                format!("{:.2}", spread.machines.cpu_seconds(i)),
                format!("{seconds:.2}"),
            ]);
        }
        drop(spread);
        let _ = std::fs::remove_file(&path);
        progress.update(&format!("{m} machine(s)"), "done");
    }
    report.table(
        &[
            "machines",
            "worker",
            "nodes",
            "namespaces",
            "devices",
            "VXLAN",
            "CPU s",
            "all running s",
        ],
        rows,
        &[0, 1, 2, 3, 4, 5, 6, 7],
    );
    delay(&mut report, probes, progress)?;
    Ok(report)
}

/// `text` (a scenario) with its lab named `name`.
fn rename(text: &str, name: &str) -> String {
    let mut done = false;
    text.lines()
        .map(|l| {
            if !done && l.trim_start().starts_with("name") {
                done = true;
                format!("name = \"{name}\"")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The triangle whose switch links are all cut over three machines, its
/// link r1--r2 `impaired` (a 1 ms delay, carried by its owner's engine) or
/// plain (a veth pair on one machine, a tunnel over three).
fn triangle(name: &str, impaired: bool) -> String {
    let mut s = format!("[lab]\nname = \"{name}\"\nseed = 1\n[topology]\nkind = \"custom\"\n");
    for (node, role) in [
        ("r1", "switch"),
        ("r2", "switch"),
        ("r3", "switch"),
        ("h1", "host"),
        ("h2", "host"),
        ("h3", "host"),
    ] {
        s.push_str(&format!(
            "[[topology.nodes]]\nname = \"{node}\"\nrole = \"{role}\"\n"
        ));
    }
    let delay = if impaired { "delay = \"1ms\"\n" } else { "" };
    for (a, b, extra) in [
        ("r1", "r2", delay),
        ("r2", "r3", ""),
        ("r3", "r1", ""),
        ("h1", "r1", ""),
        ("h2", "r2", ""),
        ("h3", "r3", ""),
    ] {
        s.push_str(&format!(
            "[[topology.links]]\na = \"{a}\"\nb = \"{b}\"\n{extra}"
        ));
    }
    s.push_str("[routing]\nmode = \"static\"\n");
    s
}

/// One-way delays (ns, sorted) h1 -> h2 across r1--r2 of the triangle, on
/// one machine (`machines` 1) or with every switch link cut over three;
/// and what the workers said they measured of the underlay.
fn triangle_delays(
    impaired: bool,
    machines: u32,
    probes: usize,
) -> Result<(Vec<i64>, Vec<String>)> {
    let gap = Duration::from_millis(2);
    let name = format!("tnbd{}{machines}", u8::from(impaired));
    let text = triangle(&name, impaired);
    let port = crate::engine::traffic::PORT;
    let mut measured = Vec::new();
    let mut delays = if machines == 1 {
        let one = crate::UpLab::up(&name, &text)?;
        let to = SocketAddrV4::new(one.address("h2")?, port);
        let rx = crate::engine::traffic::udp_in(&name, "h2", Some(to))?;
        let tx = crate::engine::traffic::udp_in(&name, "h1", None)?;
        crate::engine::one_way(&tx, rx, to, probes, gap)?
    } else {
        let path = std::env::temp_dir().join(format!("turbonet-bench-{name}.toml"));
        std::fs::write(&path, &text)?;
        let lab = turbonet_topo::parse(&path.display().to_string(), &text)
            .map_err(|e| turbonet_lab::Error::Invalid(e.to_string()))?;
        let plan = turbonet_topo::machines::plan(&lab, machines)
            .map_err(|e| turbonet_lab::Error::Invalid(e.to_string()))?;
        let machine_of = |node: &str| {
            lab.fabric
                .node_by_name(node)
                .map_or(0, |n| plan.place[n.id.0 as usize] as usize)
        };
        let h2 = (lab.fabric.node_by_name("h2"))
            .and_then(|n| lab.fabric.ports(n.id).next())
            .map(|(_, local, _)| local.addr.addr())
            .context("h2's address")?;
        let to = SocketAddrV4::new(h2, port);
        let (spread, _) = Spread::up(
            &format!("d{}", u8::from(impaired)),
            &name,
            &path,
            machines as usize,
        )?;
        let rx = spread.udp_in(machine_of("h2"), "h2", Some(to))?;
        let tx = spread.udp_in(machine_of("h1"), "h1", None)?;
        let delays = crate::engine::one_way(&tx, rx, to, probes, gap);
        measured = (spread.said.iter())
            .filter(|l| l.contains(" one way "))
            .cloned()
            .collect();
        drop(spread);
        let _ = std::fs::remove_file(&path);
        delays?
    };
    delays.sort_unstable();
    Ok((delays, measured))
}

/// One-way delay h1 -> h2 across r1--r2, impaired (1 ms, a link engine)
/// and plain (the kernel's own cost of the machines' underlay), on one
/// machine and cut between machines.
fn delay(report: &mut Report, probes: usize, progress: &dyn Progress) -> Result<()> {
    let p = crate::engine::percentile;
    let us = crate::engine::us;
    let mut rows = Vec::new();
    let mut medians = [[0i64; 2]; 2];
    let mut measured = Vec::new();
    for (k, impaired) in [true, false].into_iter().enumerate() {
        for (j, machines) in [1, 3].into_iter().enumerate() {
            progress.start(&format!(
                "delay {} over {machines}",
                if impaired { "impaired" } else { "plain" }
            ));
            let (d, said) = triangle_delays(impaired, machines, probes)?;
            if impaired {
                measured.extend(said);
            }
            medians[k][j] = p(&d, 0.5);
            rows.push(vec![
                if impaired {
                    "1 ms, link engine"
                } else {
                    "plain"
                }
                .to_owned(),
                if machines == 1 {
                    "one machine".to_owned()
                } else {
                    "cut, over 3 machines".to_owned()
                },
                count(d.len()),
                us(p(&d, 0.5)),
                us(p(&d, 0.99)),
                us(p(&d, 0.5) - medians[k][0]),
            ]);
        }
    }
    report.text(format!(
        "one-way delay h1 -> h2 across r1--r2, {probes} probes 2 ms apart, on one machine and \
         with every switch link cut over three (the plain link's difference is the underlay's \
         own cost here: two more veths, a bridge, VXLAN in and out; the impaired link's engine \
         takes the underlay's one-way delay, as its worker measured it, off the link's):"
    ));
    report.table(
        &[
            "r1--r2",
            "where",
            "probes",
            "median us",
            "p99 us",
            "median - one machine us",
        ],
        rows,
        &[2, 3, 4, 5],
    );
    report.text(format!(
        "the cut impaired link's median is {} us from one machine's; the plain link's, which no \
         engine carries, {} us",
        us(medians[0][1] - medians[0][0]),
        us(medians[1][1] - medians[1][0])
    ));
    if !measured.is_empty() {
        report.text(format!(
            "what the impaired link's owner measured of the underlay:\n{}",
            measured.join("\n")
        ));
    }
    Ok(())
}
