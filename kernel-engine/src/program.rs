//! The program loaded into the kernel: its maps filled per direction, and
//! (for tests) run on one frame at a time with `BPF_PROG_TEST_RUN`.

use aya::maps::{Array, HashMap, MapError};
use aya::programs::tc::{self, NlOptions, TcAttachOptions, TcAttachType, TcError};
use aya::programs::{ProgramError, SchedClassifier, TestRun, TestRunOptions};
use aya::{Ebpf, EbpfLoader};

use crate::abi::{Config, Params, State, Trace};

/// The object clang built from `bpf/link.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/link.bpf.o"));

/// The program run at the ingress of a link's ports.
pub const LINK_PROGRAM: &str = "tn_link";
/// The program run at the egress a clone leaves by: its departure time.
pub const STAMP_PROGRAM: &str = "tn_stamp";

/// One of the object's tc programs.
fn classifier<'a>(ebpf: &'a mut Ebpf, program: &'static str) -> Result<&'a mut SchedClassifier> {
    ebpf.program_mut(program)
        .ok_or(Error::Program {
            program,
            source: ProgramError::NotLoaded,
        })?
        .try_into()
        .map_err(|source| Error::Program { program, source })
}

/// `BPF_F_LOCK`: read or write a map value under its `bpf_spin_lock`.
const BPF_F_LOCK: u64 = 4;

/// The map names, as in the C source.
const CONFIG: &str = "tn_config";
const STATE: &str = "tn_state";
const RING_MAP: &str = "tn_ring";
const PORTS: &str = "tn_ports";
const TRACE: &str = "tn_trace";

/// What went wrong loading or driving the program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object could not be loaded (maps created, relocations done).
    #[error("loading the kernel engine's BPF object: {0}")]
    Load(#[from] aya::EbpfError),
    /// The verifier (or the kernel) refused a program.
    #[error("the kernel refused the kernel engine's program `{program}`: {source}")]
    Program {
        /// Which.
        program: &'static str,
        /// The kernel's answer (the verifier's log, when it has one).
        source: ProgramError,
    },
    /// A map could not be read or written.
    #[error("the kernel engine's map `{map}`: {source}")]
    Map {
        /// Which.
        map: &'static str,
        /// Why.
        source: MapError,
    },
    /// No such direction.
    #[error("direction {dir} is not one of the program's {directions}")]
    NoDirection {
        /// Asked.
        dir: u32,
        /// How many there are.
        directions: u32,
    },
    /// A test run failed.
    #[error("running the kernel engine's program on a frame: {0}")]
    TestRun(ProgramError),
    /// The program could not be attached to a port.
    #[error("attaching the kernel engine's program `{program}` to {port}: {source}")]
    Attach {
        /// Which.
        program: &'static str,
        /// The interface.
        port: String,
        /// Why.
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, Error>;

/// How the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// On a link's ports: the kernel's clock, frames sent to the far port.
    Link,
    /// In test runs: the caller's clock (cb\[0\], cb\[1\]), the direction
    /// in cb\[2\], nothing sent; the decisions are kept for [`Program::test_run`].
    Test,
}

/// The kernel engine's program with room for `directions` link
/// directions.
pub struct Program {
    ebpf: Ebpf,
    directions: u32,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("directions", &self.directions)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Loads the object (creating its maps) and both programs.
    pub fn load(directions: u32, mode: Mode) -> Result<Program> {
        let directions = directions.max(1);
        let test_mode = u32::from(mode == Mode::Test);
        let mut ebpf = EbpfLoader::new()
            .override_global("tn_test_mode", &test_mode, true)
            .map_max_entries(CONFIG, directions)
            .map_max_entries(STATE, directions)
            .map_max_entries(RING_MAP, directions)
            .map_max_entries(PORTS, directions)
            .load(OBJECT)?;
        for program in [LINK_PROGRAM, STAMP_PROGRAM] {
            classifier(&mut ebpf, program)?
                .load()
                .map_err(|source| Error::Program { program, source })?;
        }
        Ok(Program { ebpf, directions })
    }

    /// How many directions it has room for.
    pub fn directions(&self) -> u32 {
        self.directions
    }

    fn check(&self, dir: u32) -> Result<()> {
        if dir < self.directions {
            Ok(())
        } else {
            Err(Error::NoDirection {
                dir,
                directions: self.directions,
            })
        }
    }

    fn array<V: aya::Pod>(
        &mut self,
        map: &'static str,
    ) -> Result<Array<&mut aya::maps::MapData, V>> {
        let m = self.ebpf.map_mut(map).ok_or(Error::Map {
            map,
            source: MapError::InvalidName {
                name: map.to_owned(),
            },
        })?;
        Array::try_from(m).map_err(|source| Error::Map { map, source })
    }

    fn array_ref<V: aya::Pod>(&self, map: &'static str) -> Result<Array<&aya::maps::MapData, V>> {
        let m = self.ebpf.map(map).ok_or(Error::Map {
            map,
            source: MapError::InvalidName {
                name: map.to_owned(),
            },
        })?;
        Array::try_from(m).map_err(|source| Error::Map { map, source })
    }

    /// Starts direction `dir` afresh: these parameters, the random stream
    /// of `seed`, an empty queue, zero counters.
    pub fn start_direction(&mut self, dir: u32, params: Params, seed: u64) -> Result<()> {
        self.check(dir)?;
        let map = STATE;
        self.array::<State>(map)?
            .set(dir, State::new(seed), 0)
            .map_err(|source| Error::Map { map, source })?;
        self.set_params(dir, params)
    }

    /// Frames arriving at port `ifindex` go to direction `dir`.
    pub fn set_port(&mut self, ifindex: u32, dir: u32) -> Result<()> {
        self.check(dir)?;
        let map = PORTS;
        let m = self.ebpf.map_mut(map).ok_or(Error::Map {
            map,
            source: MapError::InvalidName {
                name: map.to_owned(),
            },
        })?;
        let mut ports: HashMap<_, u32, u32> =
            HashMap::try_from(m).map_err(|source| Error::Map { map, source })?;
        ports
            .insert(ifindex, dir, 0)
            .map_err(|source| Error::Map { map, source })
    }

    /// Attaches the program to interface `port` of the calling thread's
    /// network namespace: [`LINK_PROGRAM`] at its ingress (frames arriving
    /// there are the direction [`Program::set_port`] gave it) and
    /// [`STAMP_PROGRAM`] at its egress (where the other direction's
    /// frames leave). A predecessor's programs there (a daemon that died)
    /// are replaced. They stay attached, holding the maps, until the port
    /// goes, even when [`Program`] is dropped.
    pub fn attach(&mut self, port: &str) -> Result<()> {
        let io = |program, source: std::io::Error| Error::Attach {
            program,
            port: port.to_owned(),
            source,
        };
        match tc::qdisc_add_clsact(port) {
            Ok(()) | Err(TcError::AlreadyAttached) => {}
            Err(TcError::NetlinkError(e)) if e.raw_os_error() == Some(17) => {} // EEXIST
            Err(e) => return Err(io(LINK_PROGRAM, std::io::Error::other(e))),
        }
        for (program, kind) in [
            (LINK_PROGRAM, TcAttachType::Ingress),
            (STAMP_PROGRAM, TcAttachType::Egress),
        ] {
            // Nothing to detach is the usual case.
            let _ = tc::qdisc_detach_program(port, kind, program);
            let prog = classifier(&mut self.ebpf, program)?;
            let link = prog
                .attach_with_options(port, kind, TcAttachOptions::Netlink(NlOptions::default()))
                .map_err(|e| io(program, std::io::Error::other(e)))?;
            // The filter is the kernel's from here on: it stays until the
            // port goes (the lab's namespaces are deleted) or the next
            // program replaces it. Left to aya, it would be detached when
            // the program is dropped, by ifindex in whatever namespace
            // the dropping thread is in.
            let link = prog
                .take_link(link)
                .map_err(|source| Error::Program { program, source })?;
            std::mem::forget(link);
        }
        Ok(())
    }

    /// Changes a direction's parameters (`turbonet link set`): its stream,
    /// queue and counters carry on.
    pub fn set_params(&mut self, dir: u32, params: Params) -> Result<()> {
        self.check(dir)?;
        let map = CONFIG;
        self.array::<Config>(map)?
            .set(dir, Config::new(params), BPF_F_LOCK)
            .map_err(|source| Error::Map { map, source })
    }

    /// A direction's state: counters, queue depth, stream position.
    pub fn state(&self, dir: u32) -> Result<State> {
        self.check(dir)?;
        let map = STATE;
        self.array_ref::<State>(map)?
            .get(&dir, BPF_F_LOCK)
            .map_err(|source| Error::Map { map, source })
    }

    /// Runs the program (loaded in [`Mode::Test`]) on `frame` arriving
    /// at `now` in direction `dir`: what it decided, and the frame's bytes
    /// afterwards in `out` (the last passed copy's edits applied).
    pub fn test_run(&self, dir: u32, now: u64, frame: &[u8], out: &mut Vec<u8>) -> Result<Trace> {
        self.check(dir)?;
        // struct __sk_buff up to the end of cb[5]: only cb may be set.
        const CB: usize = 48;
        let mut ctx = [0u8; CB + 20];
        ctx[CB..CB + 8].copy_from_slice(&now.to_le_bytes());
        ctx[CB + 8..CB + 12].copy_from_slice(&dir.to_le_bytes());
        out.clear();
        out.resize(frame.len() + 64, 0);
        let prog: &SchedClassifier = self
            .ebpf
            .program(LINK_PROGRAM)
            .ok_or(Error::TestRun(ProgramError::NotLoaded))?
            .try_into()
            .map_err(Error::TestRun)?;
        let result = prog
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(out.as_mut_slice()),
                ctx_in: Some(&ctx),
                ..TestRunOptions::default()
            })
            .map_err(Error::TestRun)?;
        out.truncate(result.data_size_out as usize);
        let map = TRACE;
        self.array_ref::<Trace>(map)?
            .get(&0, 0)
            .map_err(|source| Error::Map { map, source })
    }
}
