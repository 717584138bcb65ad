//! The switch's state: pipeline, tables, action profiles, counters, and the
//! packet channels between the controller and the data plane.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::mpsc;
use turbonet_p4::p4::v1::{
    ActionProfileGroup, ActionProfileMember, ForwardingPipelineConfig, PacketIn, PacketOut,
    StreamMessageResponse, TableAction, TableEntry, stream_message_response,
};

use crate::arbitration::Arbitration;
use turbonet_p4::Schema;

use crate::{DeviceConfig, Error};

/// How many controller packets may wait for the data plane.
const PACKET_OUT_QUEUE: usize = 1024;

/// A committed (or saved) forwarding pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The configuration as the controller sent it (P4Info, opaque device
    /// config, cookie).
    pub config: ForwardingPipelineConfig,
    /// The indexed P4Info.
    pub schema: Arc<Schema>,
    /// The parsed `p4_device_config` (ports, cables, queue shaping).
    pub device_config: Arc<DeviceConfig>,
}

/// One match field of a table entry, in canonical form (values are
/// canonical bytestrings, see [`crate::canonical_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyMatch {
    /// Exact value.
    Exact(Vec<u8>),
    /// Value and mask (no value bit outside the mask).
    Ternary {
        /// Value.
        value: Vec<u8>,
        /// Mask.
        mask: Vec<u8>,
    },
    /// Prefix (no bit set past the prefix).
    Lpm {
        /// Value.
        value: Vec<u8>,
        /// Prefix length, 1..=bitwidth.
        prefix_len: u32,
    },
    /// Inclusive range.
    Range {
        /// Low bound.
        low: Vec<u8>,
        /// High bound.
        high: Vec<u8>,
    },
    /// Optional match, present: exact value.
    Optional(Vec<u8>),
}

/// The identity of a table entry: its canonical match (field id order;
/// wildcarded fields are absent) and priority.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryKey {
    /// (field id, match) sorted by field id.
    pub fields: Vec<(u32, KeyMatch)>,
    /// Priority; 0 for tables without ternary, range or optional fields.
    pub priority: i32,
}

/// The entries of one table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Entries by key; the stored `TableEntry` is canonical (what a read
    /// returns).
    pub entries: BTreeMap<EntryKey, TableEntry>,
    /// The default action the controller set; `None`: the program's.
    pub default_action: Option<TableAction>,
}

/// Members and groups of one action profile.
#[derive(Debug, Clone, Default)]
pub struct ActionProfileState {
    /// Members by id.
    pub members: BTreeMap<u32, ActionProfileMember>,
    /// Groups by id; members listed by ascending id.
    pub groups: BTreeMap<u32, ActionProfileGroup>,
    /// How many table entries and groups use each member.
    pub(crate) member_refs: HashMap<u32, u32>,
    /// How many table entries use each group.
    pub(crate) group_refs: HashMap<u32, u32>,
}

/// Alias kept for readers that think in groups.
pub type Group = ActionProfileGroup;

/// Tables and action profiles: what a Write changes. Cloned for batches
/// that must apply all or nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Forwarding {
    pub(crate) tables: BTreeMap<u32, Table>,
    pub(crate) profiles: BTreeMap<u32, ActionProfileState>,
}

/// The value of one counter cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterValue {
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// A counter array; cells are atomics so the data plane counts under a
/// shared (read) lock.
#[derive(Debug)]
pub(crate) struct CounterCells {
    packets: Vec<AtomicU64>,
    bytes: Vec<AtomicU64>,
}

impl CounterCells {
    fn new(size: usize) -> Self {
        Self {
            packets: (0..size).map(|_| AtomicU64::new(0)).collect(),
            bytes: (0..size).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Number of cells.
    pub(crate) fn len(&self) -> usize {
        self.packets.len()
    }

    pub(crate) fn get(&self, index: usize) -> CounterValue {
        CounterValue {
            packets: self.packets[index].load(Ordering::Relaxed),
            bytes: self.bytes[index].load(Ordering::Relaxed),
        }
    }

    pub(crate) fn set(&self, index: usize, value: CounterValue) {
        self.packets[index].store(value.packets, Ordering::Relaxed);
        self.bytes[index].store(value.bytes, Ordering::Relaxed);
    }

    /// Counts one packet of `bytes` bytes.
    fn add(&self, index: usize, bytes: u64) {
        self.add_many(index, 1, bytes);
    }

    /// Counts `packets` packets of `bytes` bytes in all; an index past the
    /// end is ignored.
    pub(crate) fn add_many(&self, index: usize, packets: u64, bytes: u64) {
        let (Some(p), Some(b)) = (self.packets.get(index), self.bytes.get(index)) else {
            return;
        };
        p.fetch_add(packets, Ordering::Relaxed);
        b.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Everything the switch holds for one device.
#[derive(Debug, Default)]
pub struct DeviceState {
    pub(crate) pipeline: Option<Pipeline>,
    pub(crate) saved: Option<Pipeline>,
    pub(crate) fwd: Forwarding,
    /// Shared so the data plane can count without taking the state lock
    /// (it resolves the cells when it compiles).
    pub(crate) counters: BTreeMap<u32, Arc<CounterCells>>,
}

impl DeviceState {
    /// The committed pipeline, if any.
    pub fn pipeline(&self) -> Option<&Pipeline> {
        self.pipeline.as_ref()
    }

    /// The entries of a table.
    pub fn table(&self, table_id: u32) -> Option<&Table> {
        self.fwd.tables.get(&table_id)
    }

    /// The members and groups of an action profile.
    pub fn profile(&self, profile_id: u32) -> Option<&ActionProfileState> {
        self.fwd.profiles.get(&profile_id)
    }

    /// One counter cell.
    pub fn counter(&self, counter_id: u32, index: usize) -> Option<CounterValue> {
        let cells = self.counters.get(&counter_id)?;
        (index < cells.len()).then(|| cells.get(index))
    }

    /// Installs a pipeline. `keep_state` keeps the entries (already checked
    /// against the new schema by the caller) and the counters whose id
    /// survives; otherwise every table, profile and counter starts empty.
    pub(crate) fn commit(&mut self, pipeline: Pipeline, keep_state: bool) {
        let schema = pipeline.schema.clone();
        let mut old_counters = std::mem::take(&mut self.counters);
        if !keep_state {
            self.fwd = Forwarding::default();
            old_counters.clear();
        }
        let mut fwd = std::mem::take(&mut self.fwd);
        self.fwd.tables = schema
            .tables
            .keys()
            .map(|id| (*id, fwd.tables.remove(id).unwrap_or_default()))
            .collect();
        self.fwd.profiles = schema
            .profiles
            .keys()
            .map(|id| (*id, fwd.profiles.remove(id).unwrap_or_default()))
            .collect();
        for (id, info) in &schema.counters {
            let cells = CounterCells::new(info.size);
            if let Some(old) = old_counters.get(id) {
                for i in 0..old.len().min(info.size) {
                    cells.set(i, old.get(i));
                }
            }
            self.counters.insert(*id, Arc::new(cells));
        }
        self.pipeline = Some(pipeline);
    }
}

/// A copy of the forwarding state for the data plane.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The committed pipeline.
    pub pipeline: Option<Pipeline>,
    /// Tables by id.
    pub tables: BTreeMap<u32, Table>,
    /// Action profiles by id.
    pub profiles: BTreeMap<u32, ActionProfileState>,
    /// Counter values by counter id, indexed by cell.
    pub counters: BTreeMap<u32, Vec<CounterValue>>,
}

#[derive(Debug)]
struct Inner {
    device_id: u64,
    state: RwLock<DeviceState>,
    arbitration: Mutex<Arbitration>,
    packet_out_tx: mpsc::Sender<PacketOut>,
    packet_out_rx: Mutex<Option<mpsc::Receiver<PacketOut>>>,
    /// Bumped, under the state's write lock, by every change a data plane
    /// must compile: committed pipelines and Write batches.
    generation: AtomicU64,
}

/// One P4Runtime device (a switch). Cheap to clone: clones share the state.
#[derive(Debug, Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

impl Device {
    /// A device with no pipeline.
    pub fn new(device_id: u64) -> Self {
        let (tx, rx) = mpsc::channel(PACKET_OUT_QUEUE);
        Self {
            inner: Arc::new(Inner {
                device_id,
                state: RwLock::new(DeviceState::default()),
                arbitration: Mutex::new(Arbitration::default()),
                packet_out_tx: tx,
                packet_out_rx: Mutex::new(Some(rx)),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// The P4Runtime device id.
    pub fn device_id(&self) -> u64 {
        self.inner.device_id
    }

    /// A number that changes with every committed Write batch and pipeline
    /// commit, so a data plane notices with one atomic load that it must
    /// recompile. Read inside [`Device::with_state`] it is the generation
    /// of exactly the state `f` sees (changes bump it under the write lock).
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Marks a change of the state; called with the write lock held.
    pub(crate) fn bump_generation(&self) {
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Runs `f` with shared access to the state (the data plane's fast
    /// path: no copy). Do not block inside `f`.
    pub fn with_state<R>(&self, f: impl FnOnce(&DeviceState) -> R) -> R {
        f(&self.read_state())
    }

    /// A copy of the pipeline, tables, profiles and counter values.
    pub fn snapshot(&self) -> Snapshot {
        let state = self.read_state();
        Snapshot {
            pipeline: state.pipeline.clone(),
            tables: state.fwd.tables.clone(),
            profiles: state.fwd.profiles.clone(),
            counters: state
                .counters
                .iter()
                .map(|(id, cells)| (*id, (0..cells.len()).map(|i| cells.get(i)).collect()))
                .collect(),
        }
    }

    /// Counts one packet of `bytes` bytes in cell `index` of a counter.
    pub fn count(&self, counter_id: u32, index: usize, bytes: u64) -> Result<(), Error> {
        let state = self.read_state();
        if state.pipeline.is_none() {
            return Err(Error::NoPipeline);
        }
        let cells = state
            .counters
            .get(&counter_id)
            .ok_or(Error::UnknownCounter(counter_id))?;
        if index >= cells.len() {
            return Err(Error::CounterIndex {
                counter_id,
                index,
                size: cells.len(),
            });
        }
        cells.add(index, bytes);
        Ok(())
    }

    /// Sends a packet to the controllers: to the primary of every role.
    /// Returns how many controllers it was queued for (0: none connected,
    /// or their streams are full).
    pub fn packet_in(&self, packet: PacketIn) -> usize {
        let targets = self.arbitration().primaries();
        let message = StreamMessageResponse {
            update: Some(stream_message_response::Update::Packet(packet)),
        };
        targets
            .into_iter()
            .filter(|tx| tx.try_send(Ok(message.clone())).is_ok())
            .count()
    }

    /// The receiving end of the controller's PacketOut messages, for the
    /// data plane. Only the first call gets it.
    pub fn take_packet_out_receiver(&self) -> Option<mpsc::Receiver<PacketOut>> {
        self.inner
            .packet_out_rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The election id of the primary controller of `role` ("" is the
    /// default role), if there is one.
    pub fn primary_election_id(&self, role: &str) -> Option<u128> {
        self.arbitration().primary(role).map(|(_, id)| id)
    }

    pub(crate) fn read_state(&self) -> RwLockReadGuard<'_, DeviceState> {
        // A panic while holding the lock leaves the state consistent enough
        // to keep serving: every mutation is a single insert or swap.
        self.inner
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn write_state(&self) -> RwLockWriteGuard<'_, DeviceState> {
        self.inner
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn arbitration(&self) -> MutexGuard<'_, Arbitration> {
        self.inner
            .arbitration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn packet_out_sender(&self) -> &mpsc::Sender<PacketOut> {
        &self.inner.packet_out_tx
    }
}
