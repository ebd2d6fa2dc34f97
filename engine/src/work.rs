//! The work counters the engine adds to its environment's cost accounts ([`env::Env::count_work`], ADR-0193): work
//! that is no file call, so the world's IO counts cannot see it. A production environment ignores them.

/// Compaction jobs from a level below level 0 into the next one (not level 0's, not a full compaction).
pub const LEVELED_COMPACTIONS: &str = "engine.leveled_compactions";
/// The tables those jobs took from their source level (the tables of the level below that overlap them are not
/// counted). The engine's design takes one per job: [`LEVELED_COMPACTIONS`] and this stay equal.
pub const LEVELED_COMPACTION_SOURCE_TABLES: &str = "engine.leveled_compaction_source_tables";
