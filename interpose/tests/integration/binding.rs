use env::SimEnv;

#[test]
fn enter_names_a_directory_per_seed_and_counts_nothing_yet() {
    let world = SimEnv::new(11);
    let entered = interpose::enter(&world);
    assert_eq!(entered.dir(), std::path::Path::new("/holdfast-world/11"));
    let nested = interpose::enter(&world);
    assert_eq!(nested.dir(), entered.dir());
    drop(nested);
    assert!(interpose::stats().is_some(), "still bound after the nested guard drops");
    drop(entered);
    assert!(interpose::stats().is_none(), "unbound after the outer guard drops");
}

#[test]
fn the_clock_of_a_bound_thread_is_the_worlds() {
    let world = SimEnv::new(12);
    let entered = interpose::enter(&world);
    let now = std::time::SystemTime::now();
    let since = now.duration_since(std::time::UNIX_EPOCH).expect("after the epoch");
    assert_eq!(since.as_secs(), interpose::REALTIME_BASE_SECS);
    assert_eq!(entered.stats().calls.get("clock_gettime"), Some(&1));
}
