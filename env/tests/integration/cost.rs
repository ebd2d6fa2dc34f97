//! Cost accounting (ADR-0180) and the device model (ADR-0181): every call counted where it lands, per step and
//! per file, priced by the world's device, and invisible to the run itself.

use std::path::Path;

use env::{CostCounters, Device, Env, File, IoKind, OpenOptions, SimEnv};

/// A small workload through every counted call: create, write, sync, read, rename, delete, directory sync.
fn workload(env: &SimEnv) -> (u64, std::time::Duration, u64, u64) {
    env.create_dir_all(Path::new("/d")).expect("dir");
    let file = env.open(Path::new("/d/a"), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, &[7; 3000]).expect("write");
    file.sync().expect("sync");
    let mut buf = [0; 1000];
    file.read_exact_at(1000, &mut buf).expect("read");
    drop(file);
    env.rename(Path::new("/d/a"), Path::new("/d/b")).expect("rename");
    env.sync_dir(Path::new("/d")).expect("sync dir");
    env.remove_file(Path::new("/d/b")).expect("remove");
    (env.random_u64(), env.now(), env.io_count(), env.disk_digest())
}

#[test]
fn every_call_is_counted_per_run_and_per_file() {
    let env = SimEnv::new(3);
    workload(&env);
    let cost = env.cost();
    let total = cost.total;
    assert_eq!((total.writes, total.bytes_written, total.reads, total.bytes_read), (1, 3000, 1, 1000));
    assert_eq!((total.file_syncs, total.dir_syncs, total.opens, total.renames, total.deletes), (1, 1, 1, 1, 1));
    let file = cost.files[Path::new("/d/a")];
    assert_eq!((file.writes, file.reads, file.file_syncs, file.opens, file.renames), (1, 1, 1, 1, 1));
    assert_eq!(cost.files[Path::new("/d/b")].deletes, 1, "a delete is counted on the name it removed");
    assert_eq!(cost.files[Path::new("/d")].dir_syncs, 1);
    let open = Device::Nvme.costs().latency_nanos(IoKind::Open, 0, false);
    let median = cost.latencies[&IoKind::Open].percentile_nanos(500).expect("an open was timed");
    assert!(median <= open && open - median <= open / 64, "kept to 7 significant bits: {median} of {open}");
    assert_eq!(cost.latencies[&IoKind::FileSync].calls, 1);
    let summed: u64 = cost.files.values().map(|counters| counters.io_nanos).sum();
    assert_eq!(summed, total.io_nanos, "every call here named a file");
}

/// The step's cost is what happened since `set_step`; the run's keeps growing.
#[test]
fn step_cost_restarts_at_each_step() {
    let env = SimEnv::new(4);
    workload(&env);
    let before = env.cost_total();
    env.set_step(1);
    assert_eq!(env.step_cost(), CostCounters::default());
    let file = env.open(Path::new("/d/c"), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, b"xyz").expect("write");
    let step = env.step_cost();
    assert_eq!((step.opens, step.writes, step.bytes_written), (1, 1, 3));
    assert_eq!(env.cost_total().since(&before), step);
}

/// Counting, a device profile and work counters change no randomness, clock, IO count or disk: only the priced
/// time differs between devices, and the same seed gives the same figures twice.
#[test]
fn device_and_work_counters_change_nothing_a_run_can_observe() {
    let run = |device: Device, work: u64| {
        let env = SimEnv::new(9);
        env.set_device(device);
        env.count_work("test.compared", work);
        let observed = workload(&env);
        (observed, env.cost())
    };
    let (nvme, nvme_cost) = run(Device::Nvme, 0);
    let (again, again_cost) = run(Device::Nvme, 0);
    assert_eq!((nvme, &nvme_cost), (again, &again_cost), "the same seed gave other cost figures");
    for device in [Device::SataSsd, Device::Hdd, Device::CloudBlock] {
        let (observed, cost) = run(device, 5);
        assert_eq!(observed, nvme, "{device} changed the run");
        assert_eq!(CostCounters { io_nanos: 0, ..cost.total }, CostCounters { io_nanos: 0, ..nvme_cost.total });
        assert!(cost.total.io_nanos > nvme_cost.total.io_nanos, "{device} is slower than nvme in this model");
        assert_eq!((cost.device, cost.work.get("test.compared")), (device, Some(&5)));
    }
}
