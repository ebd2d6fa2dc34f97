//! What a simulated world's IO cost (ADR-0180) and how long the simulated device took over it (ADR-0181).
//!
//! Every call that passes the world's IO gate is counted here, per run, per step and per file: bytes and calls of
//! reads and writes, file syncs apart from directory syncs, opens, renames and deletes, and the simulated time
//! the world's [`Device`] profile charges for it. The ledger is written under the world's lock and only ever
//! read back: counting changes no decision, no clock and no digest. The simulated time is accounted, never added
//! to the world's clock (ADR-0181), so a device profile changes no run either.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::names::PathId;
use crate::random::keyed;

/// At most this many distinct work counters a system may add ([`crate::Env::count_work`]); later names are
/// counted under [`WORK_OVERFLOW_COUNTER`].
pub const WORK_COUNTERS_MAX: usize = 256;
/// Where work counted under a name past [`WORK_COUNTERS_MAX`] goes.
pub const WORK_OVERFLOW_COUNTER: &str = "work.overflow";
/// Latencies below this are kept exactly; above, to 7 significant bits (a relative error under 1 %), so a
/// histogram holds at most about 64 × 64 distinct values whatever the run.
const LATENCY_EXACT_BELOW_NANOS: u64 = 128;

/// Counters of IO work. Each field is a plain sum; [`CostCounters::since`] gives the work between two readings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostCounters {
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// `read_at` calls that passed the IO gate (a read that failed with an injected error included).
    pub reads: u64,
    /// `write_at` calls that passed the IO gate and had bytes to write.
    pub writes: u64,
    /// `File::sync` calls.
    pub file_syncs: u64,
    /// `Env::sync_dir` calls.
    pub dir_syncs: u64,
    pub opens: u64,
    pub renames: u64,
    /// `remove_file` calls.
    pub deletes: u64,
    /// Simulated device time for all of the above, by the world's [`Device`] profile.
    pub io_nanos: u64,
}

impl CostCounters {
    /// The work done after `earlier` was read (each field's difference; saturating).
    #[must_use]
    pub fn since(&self, earlier: &CostCounters) -> CostCounters {
        let mut delta = *self;
        for ((_, value), (_, before)) in delta.fields_mut().into_iter().zip(earlier.fields()) {
            *value = value.saturating_sub(before);
        }
        delta
    }

    /// Add `other` into these counters (saturating).
    pub fn add(&mut self, other: &CostCounters) {
        for ((_, value), (_, more)) in self.fields_mut().into_iter().zip(other.fields()) {
            *value = value.saturating_add(more);
        }
    }

    /// Every counter with its name, in a fixed order (the order of the fields).
    pub fn fields(&self) -> [(&'static str, u64); 10] {
        [
            ("bytes_read", self.bytes_read),
            ("bytes_written", self.bytes_written),
            ("reads", self.reads),
            ("writes", self.writes),
            ("file_syncs", self.file_syncs),
            ("dir_syncs", self.dir_syncs),
            ("opens", self.opens),
            ("renames", self.renames),
            ("deletes", self.deletes),
            ("io_nanos", self.io_nanos),
        ]
    }

    fn fields_mut(&mut self) -> [(&'static str, &mut u64); 10] {
        [
            ("bytes_read", &mut self.bytes_read),
            ("bytes_written", &mut self.bytes_written),
            ("reads", &mut self.reads),
            ("writes", &mut self.writes),
            ("file_syncs", &mut self.file_syncs),
            ("dir_syncs", &mut self.dir_syncs),
            ("opens", &mut self.opens),
            ("renames", &mut self.renames),
            ("deletes", &mut self.deletes),
            ("io_nanos", &mut self.io_nanos),
        ]
    }

    fn charge(&mut self, kind: IoKind, bytes: u64, nanos: u64) {
        match kind {
            IoKind::Read => {
                self.reads += 1;
                self.bytes_read = self.bytes_read.saturating_add(bytes);
            }
            IoKind::Write => {
                self.writes += 1;
                self.bytes_written = self.bytes_written.saturating_add(bytes);
            }
            IoKind::FileSync => self.file_syncs += 1,
            IoKind::DirSync => self.dir_syncs += 1,
            IoKind::Open => self.opens += 1,
            IoKind::Rename => self.renames += 1,
            IoKind::Delete => self.deletes += 1,
        }
        self.io_nanos = self.io_nanos.saturating_add(nanos);
    }
}

/// The kind of an IO call, for latencies per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoKind {
    Read,
    Write,
    FileSync,
    DirSync,
    Open,
    Rename,
    Delete,
}

impl IoKind {
    /// The snake-case name (`file_sync`).
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::FileSync => "file_sync",
            IoKind::DirSync => "dir_sync",
            IoKind::Open => "open",
            IoKind::Rename => "rename",
            IoKind::Delete => "delete",
        }
    }
}

/// A named simulated device: what each IO call costs in simulated time (ADR-0181).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    /// A datacenter NVMe drive with power-loss protection (a flush is cheap).
    #[default]
    Nvme,
    /// A consumer SATA SSD (a flush reaches the flash).
    SataSsd,
    /// A 7200 rpm disk: a seek when an access is not sequential, a flush waits for the platter.
    Hdd,
    /// A network block device (EBS gp3-like): every call pays a network round trip.
    CloudBlock,
}

/// The per-operation costs of a [`Device`], in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCosts {
    /// Added to a read or write that does not start where the last data access of the world ended.
    pub seek_nanos: u64,
    pub read_nanos: u64,
    pub read_per_kib_nanos: u64,
    pub write_nanos: u64,
    pub write_per_kib_nanos: u64,
    pub file_sync_nanos: u64,
    pub dir_sync_nanos: u64,
    /// An open, rename or delete.
    pub metadata_nanos: u64,
}

impl Device {
    /// Every profile, in order.
    pub const ALL: [Device; 4] = [Device::Nvme, Device::SataSsd, Device::Hdd, Device::CloudBlock];

    /// The name `--device` takes (`sata-ssd`).
    pub fn name(self) -> &'static str {
        match self {
            Device::Nvme => "nvme",
            Device::SataSsd => "sata-ssd",
            Device::Hdd => "hdd",
            Device::CloudBlock => "cloud-block",
        }
    }

    /// The profile named `name`, or an error listing the names.
    pub fn parse(name: &str) -> Result<Device, String> {
        Device::ALL.into_iter().find(|device| device.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Device::ALL.iter().map(|device| device.name()).collect();
            format!("unknown device profile {name:?}; expected one of {}", names.join(", "))
        })
    }

    /// The profile drawn for `seed`: a pure function of the seed that consumes no generator, so drawing it moves
    /// no other decision of the run.
    pub fn drawn(seed: u64) -> Device {
        const DEVICE_TAG: u64 = 0x6465_7669_6365_0001;
        Device::ALL[(keyed(&[seed, DEVICE_TAG]) % Device::ALL.len() as u64) as usize]
    }

    /// Order-of-magnitude costs of the device class (ADR-0181 names where they come from). They are a model for
    /// comparing runs and finding outliers, not a prediction of any one drive.
    pub fn costs(self) -> DeviceCosts {
        match self {
            Device::Nvme => DeviceCosts {
                seek_nanos: 0,
                read_nanos: 20_000,
                read_per_kib_nanos: 400,
                write_nanos: 15_000,
                write_per_kib_nanos: 700,
                file_sync_nanos: 30_000,
                dir_sync_nanos: 30_000,
                metadata_nanos: 5_000,
            },
            Device::SataSsd => DeviceCosts {
                seek_nanos: 0,
                read_nanos: 80_000,
                read_per_kib_nanos: 2_000,
                write_nanos: 60_000,
                write_per_kib_nanos: 2_000,
                file_sync_nanos: 500_000,
                dir_sync_nanos: 500_000,
                metadata_nanos: 20_000,
            },
            Device::Hdd => DeviceCosts {
                seek_nanos: 8_000_000,
                read_nanos: 100_000,
                read_per_kib_nanos: 7_000,
                write_nanos: 100_000,
                write_per_kib_nanos: 7_000,
                file_sync_nanos: 10_000_000,
                dir_sync_nanos: 10_000_000,
                metadata_nanos: 8_000_000,
            },
            Device::CloudBlock => DeviceCosts {
                seek_nanos: 0,
                read_nanos: 500_000,
                read_per_kib_nanos: 4_000,
                write_nanos: 1_000_000,
                write_per_kib_nanos: 4_000,
                file_sync_nanos: 1_500_000,
                dir_sync_nanos: 1_500_000,
                metadata_nanos: 500_000,
            },
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl DeviceCosts {
    /// The simulated time of one call of `kind` moving `bytes` bytes; `sequential` when a read or write starts
    /// where the world's last data access ended (no seek).
    pub fn latency_nanos(&self, kind: IoKind, bytes: u64, sequential: bool) -> u64 {
        let kib = bytes.div_ceil(1024);
        let seek = if sequential { 0 } else { self.seek_nanos };
        match kind {
            IoKind::Read => seek + self.read_nanos + kib.saturating_mul(self.read_per_kib_nanos),
            IoKind::Write => seek + self.write_nanos + kib.saturating_mul(self.write_per_kib_nanos),
            IoKind::FileSync => self.file_sync_nanos,
            IoKind::DirSync => self.dir_sync_nanos,
            IoKind::Open | IoKind::Rename | IoKind::Delete => self.metadata_nanos,
        }
    }
}

/// Latencies of one kind of call, as counts per value (values above 128 ns kept to 7 significant bits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    /// How many calls took each (rounded) latency, in nanoseconds.
    pub counts: BTreeMap<u64, u64>,
    pub calls: u64,
}

impl LatencyHistogram {
    /// Count one call of `nanos`.
    pub fn record(&mut self, nanos: u64) {
        *self.counts.entry(round_latency(nanos)).or_insert(0) += 1;
        self.calls += 1;
    }

    /// Add every count of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (&nanos, &count) in &other.counts {
            *self.counts.entry(nanos).or_insert(0) += count;
        }
        self.calls += other.calls;
    }

    /// The smallest recorded latency at or below which `per_mille` thousandths of the calls fall (`500`: the
    /// median, `990`: p99); `None` with no calls.
    pub fn percentile_nanos(&self, per_mille: u64) -> Option<u64> {
        if self.calls == 0 {
            return None;
        }
        let wanted = (self.calls * per_mille.min(1000)).div_ceil(1000).max(1);
        let mut seen = 0;
        for (&nanos, &count) in &self.counts {
            seen += count;
            if seen >= wanted {
                return Some(nanos);
            }
        }
        self.counts.keys().next_back().copied()
    }
}

/// `nanos` kept to its 7 leading bits (exact below [`LATENCY_EXACT_BELOW_NANOS`]).
fn round_latency(nanos: u64) -> u64 {
    if nanos < LATENCY_EXACT_BELOW_NANOS {
        return nanos;
    }
    let drop = 64 - nanos.leading_zeros() - 7;
    (nanos >> drop) << drop
}

/// A world's cost so far ([`super::SimEnv::cost`]): totals, per file, the system's own work counters and the
/// latencies per kind of call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    pub device: Device,
    pub total: CostCounters,
    /// Per path the calls named (a rename is counted on its source path).
    pub files: BTreeMap<PathBuf, CostCounters>,
    /// Work the system counted itself ([`crate::Env::count_work`]).
    pub work: BTreeMap<String, u64>,
    pub latencies: BTreeMap<IoKind, LatencyHistogram>,
}

/// The world's running cost accounts, written under its lock.
#[derive(Debug, Default)]
pub(super) struct CostLedger {
    pub(super) device: Device,
    costs: Option<DeviceCosts>,
    pub(super) total: CostCounters,
    /// The total when the current step began ([`super::SimEnv::set_step`]).
    pub(super) step_start: CostCounters,
    /// Per interned path.
    pub(super) files: Vec<CostCounters>,
    /// Per interned path, this step only (cleared by [`CostLedger::new_step`]; at most one entry per path).
    pub(super) step_files: BTreeMap<PathId, CostCounters>,
    pub(super) work: BTreeMap<&'static str, u64>,
    pub(super) latencies: BTreeMap<IoKind, LatencyHistogram>,
    /// Where the last read or write ended: (path, end offset).
    last_access: Option<(PathId, u64)>,
}

impl CostLedger {
    pub(super) fn set_device(&mut self, device: Device) {
        self.device = device;
        self.costs = Some(device.costs());
    }

    /// Count one call of `kind` on `path` (`None`: a path not interned, an open that found nothing) moving
    /// `bytes` bytes from `offset` (data calls only).
    pub(super) fn charge(&mut self, kind: IoKind, path: Option<PathId>, offset: u64, bytes: u64) {
        let costs = *self.costs.get_or_insert_with(|| self.device.costs());
        let data = matches!(kind, IoKind::Read | IoKind::Write);
        let sequential = data && self.last_access.is_some_and(|(last, end)| Some(last) == path && end == offset);
        let nanos = costs.latency_nanos(kind, bytes, sequential);
        if data && let Some(path) = path {
            self.last_access = Some((path, offset.saturating_add(bytes)));
        }
        self.total.charge(kind, bytes, nanos);
        if let Some(path) = path {
            if self.files.len() <= path {
                self.files.resize(path + 1, CostCounters::default());
            }
            self.files[path].charge(kind, bytes, nanos);
            self.step_files.entry(path).or_default().charge(kind, bytes, nanos);
        }
        self.latencies.entry(kind).or_default().record(nanos);
    }

    /// A new step begins: its costs start from zero.
    pub(super) fn new_step(&mut self) {
        self.step_start = self.total;
        self.step_files.clear();
    }

    /// Add `count` to the system's work counter `name`.
    pub(super) fn count_work(&mut self, name: &'static str, count: u64) {
        let name = if self.work.len() >= WORK_COUNTERS_MAX && !self.work.contains_key(name) {
            WORK_OVERFLOW_COUNTER
        } else {
            name
        };
        let slot = self.work.entry(name).or_insert(0);
        *slot = slot.saturating_add(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read after the one that ended where it starts pays no seek on a disk; any other does; sync and metadata
    /// calls cost their fixed price; per-file counters add up to the total for calls that name a file.
    #[test]
    fn ledger_counts_calls_bytes_and_seeks() {
        let mut ledger = CostLedger::default();
        ledger.set_device(Device::Hdd);
        let costs = Device::Hdd.costs();
        ledger.charge(IoKind::Read, Some(0), 0, 4096);
        ledger.charge(IoKind::Read, Some(0), 4096, 1024);
        ledger.charge(IoKind::Write, Some(1), 0, 1);
        ledger.charge(IoKind::FileSync, Some(1), 0, 0);
        ledger.charge(IoKind::Open, None, 0, 0);
        let total = ledger.total;
        assert_eq!((total.reads, total.bytes_read, total.writes, total.bytes_written), (2, 5120, 1, 1));
        assert_eq!((total.file_syncs, total.opens, total.dir_syncs), (1, 1, 0));
        let seeked_read = costs.seek_nanos + costs.read_nanos + 4 * costs.read_per_kib_nanos;
        let sequential_read = costs.read_nanos + costs.read_per_kib_nanos;
        let write = costs.seek_nanos + costs.write_nanos + costs.write_per_kib_nanos;
        let expected = seeked_read + sequential_read + write + costs.file_sync_nanos + costs.metadata_nanos;
        assert_eq!(total.io_nanos, expected);
        assert_eq!((ledger.files[0].reads, ledger.files[1].writes, ledger.files[1].file_syncs), (2, 1, 1));
        let mut files = ledger.files[0];
        files.add(&ledger.files[1]);
        let unnamed = CostCounters { opens: 1, io_nanos: costs.metadata_nanos, ..CostCounters::default() };
        assert_eq!(total.since(&files), unnamed, "only the open named no file");
    }

    /// Percentiles come from the counts: p50 and p100 of 1..=100 ns, a rounded large value, and none when empty.
    #[test]
    fn histogram_percentiles() {
        let mut histogram = LatencyHistogram::default();
        assert_eq!(histogram.percentile_nanos(500), None);
        for nanos in 1..=100 {
            histogram.record(nanos);
        }
        assert_eq!((histogram.percentile_nanos(500), histogram.percentile_nanos(1000)), (Some(50), Some(100)));
        assert_eq!(histogram.percentile_nanos(0), Some(1));
        histogram.record(1_000_001);
        assert_eq!(histogram.percentile_nanos(1000), Some(round_latency(1_000_001)));
        let rounded = round_latency(1_000_001);
        assert!(rounded <= 1_000_001 && 1_000_001 - rounded < 1_000_001 / 64, "within 1/64: {rounded}");
    }

    /// Names round-trip through `parse`; an unknown one is an error naming the choices; a drawn profile is a
    /// function of the seed and every profile is drawn for some seed.
    #[test]
    fn devices_parse_and_draw() {
        for device in Device::ALL {
            assert_eq!(Device::parse(device.name()), Ok(device));
        }
        let error = Device::parse("floppy").expect_err("unknown");
        assert!(error.contains("cloud-block"), "{error}");
        assert_eq!(Device::drawn(7), Device::drawn(7));
        let drawn: std::collections::BTreeSet<Device> = (0..64).map(Device::drawn).collect();
        assert_eq!(drawn.len(), Device::ALL.len());
    }

    /// Work counters past the limit land in the overflow counter; known names keep counting.
    #[test]
    fn work_counters_are_bounded() {
        let mut ledger = CostLedger::default();
        let names: Vec<&'static str> =
            (0..WORK_COUNTERS_MAX).map(|index| &*Box::leak(format!("w.{index}").into_boxed_str())).collect();
        for name in &names {
            ledger.count_work(name, 1);
        }
        ledger.count_work("w.new", 5);
        ledger.count_work(names[0], 2);
        assert_eq!(ledger.work.get(WORK_OVERFLOW_COUNTER), Some(&5));
        assert_eq!(ledger.work.get(names[0]), Some(&3));
    }
}
