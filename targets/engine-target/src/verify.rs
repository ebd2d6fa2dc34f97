//! The verification of every key after a recovery and when healthy (ADR-0113): one ordered scan merged against
//! the model, with point reads where a scan cannot be used.

use std::path::PathBuf;

use engine::{ScanIter, SkippedTables};
use holdfast::env::SimEnv;
use holdfast::kit::{RenderedKey, Sig, key_bytes, parse_key, sig_of};
use holdfast::{FailureKind, Violation, World};

use crate::{EngineTarget, system_error};

/// Past every rendered key (`k` and digits): the end of the verification scan.
const RENDERED_KEYS_END: &[u8] = b"l";
/// Keys below this render with six digits, so their byte order is their numeric order (a verification scan
/// merges on it); a key list reaching past it is verified with point reads.
const ORDERED_KEYS_END: u32 = 1_000_000;
/// The most verification scans one verification starts (each excused scan error starts one more); the keys left
/// after the last get point reads.
const VERIFY_SCANS_MAX: usize = 16;

/// The most keys read with point reads after one excused scan error before a new scan starts (ADR-0125).
const POINT_READ_STRETCH_MAX: usize = 1024;

/// How many keys to read with point reads after an excused scan error, from the key the scan had reached: one
/// after a scan that got past where it started, twice the last stretch after one that failed where it started
/// (it met the same damaged block again: a checksum mismatch fails every scan that reaches the block, so a scan
/// per key would cost more than the point reads it replaces), at most [`POINT_READ_STRETCH_MAX`] (ADR-0125).
fn point_read_stretch(last: usize, stalled: bool) -> usize {
    if stalled { last.saturating_mul(2).clamp(1, POINT_READ_STRETCH_MAX) } else { 1 }
}

/// The tables a verification scan passes over: those it met damaged (ADR-0142).
type Skipped = SkippedTables<<SimEnv as holdfast::env::Env>::File>;

/// How a verification scan ended.
enum ScanEnd {
    /// Every key from its start was checked.
    Done,
    /// An error ended the verification: not excused, or the database is closed.
    Stopped,
    /// An excused error stopped the scan before the key at this index of the key list; `damaged`: the file a
    /// corruption error named.
    Failed { at: usize, damaged: Option<PathBuf> },
}

impl EngineTarget {
    /// Read every key of the key space (and every key the model knows) and compare with the model (ADR-0113): an
    /// ordered scan of the rendered keys merged against the sorted key list (a key the scan does not return is
    /// checked as absent). After an excused corruption in a table not passed over yet, the next scan starts at the
    /// same key and passes over that table, point-reading the keys it may hold (ADR-0142). After another excused
    /// scan error, the key the scan had reached is read on its own (a point read, as every key was before), with
    /// the keys after it when scans keep failing where they start ([`point_read_stretch`], ADR-0125), and a new
    /// scan goes on after them; past `VERIFY_SCANS_MAX` scans, or with keys whose rendering does not sort
    /// numerically, every key left gets a point read. The tables passed over are at most one per scan.
    pub(crate) fn verify_all(&mut self, world: &mut World, context: &str) -> Result<(), Violation> {
        let key_count = self.config.workload.key_count;
        let mut keys: Vec<u32> = (0..key_count).collect();
        keys.extend(self.model.known_keys().filter(|&key| key >= key_count));
        if keys.last().is_some_and(|&key| key >= ORDERED_KEYS_END) {
            return self.verify_by_gets(world, context, &keys).map(|_| ());
        }
        let (mut next, mut stretch) = (0, 1);
        let mut skipped: Vec<PathBuf> = Vec::new();
        for _ in 0..VERIFY_SCANS_MAX {
            match self.verify_scan(world, context, &keys, next, &skipped)? {
                ScanEnd::Done | ScanEnd::Stopped => return Ok(()),
                ScanEnd::Failed { at, .. } if at >= keys.len() => return Ok(()),
                ScanEnd::Failed { at, damaged: Some(file) } if !skipped.contains(&file) => {
                    // The next scan passes over the damaged table from the same key (ADR-0142).
                    self.counters.add("verify.tables_passed_over", 1);
                    skipped.push(file);
                    next = at;
                }
                ScanEnd::Failed { at, .. } => {
                    stretch = point_read_stretch(stretch, at == next);
                    let end = keys.len().min(at + stretch);
                    if !self.verify_by_gets(world, context, &keys[at..end])? {
                        return Ok(());
                    }
                    next = end;
                }
            }
        }
        self.verify_by_gets(world, context, &keys[next..]).map(|_| ())
    }

    /// One verification scan from `keys[from]` to the end of the rendered keys, merged against `keys[from..]`,
    /// passing over the tables at `skipped`: a key one of them may hold gets a point read instead (ADR-0142).
    fn verify_scan(
        &mut self,
        world: &mut World,
        context: &str,
        keys: &[u32],
        from: usize,
        skipped: &[PathBuf],
    ) -> Result<ScanEnd, Violation> {
        let Some(&first) = keys.get(from) else { return Ok(ScanEnd::Done) };
        let Some(db) = &self.db else { return Ok(ScanEnd::Stopped) };
        let low = key_bytes(first);
        let range = low.as_slice()..RENDERED_KEYS_END;
        let scan: Result<(ScanIter<'static>, Option<Skipped>), _> = if skipped.is_empty() {
            db.scan(range).map(|rows| (rows, None))
        } else {
            db.scan_skipping(range, skipped).map(|(rows, tables)| (rows, Some(tables)))
        };
        let (mut rows, passed) = match scan {
            Ok(scan) => scan,
            Err(error) => return self.scan_failed(world, context, &error, from),
        };
        let mut next = from;
        let mut previous: Option<Vec<u8>> = None;
        for row in rows.by_ref() {
            let (key, value) = match row {
                Ok(row) => row,
                Err(error) => return self.scan_failed(world, context, &error, next),
            };
            if previous.as_ref().is_some_and(|previous| previous >= &key) {
                return Err(Violation::new(
                    format!("{context}.scan_shape"),
                    FailureKind::Safety,
                    "a verification scan returns keys strictly ascending",
                    format!(
                        "{:?} after {:?}",
                        String::from_utf8_lossy(&key),
                        previous.as_deref().map(String::from_utf8_lossy)
                    ),
                ));
            }
            // A key that is not a rendered one below ORDERED_KEYS_END is in no key list: not checked (the odd keys
            // sort after every rendered key).
            let index = parse_key(&key).filter(|&index| index < ORDERED_KEYS_END);
            if let Some(index) = index {
                while next < keys.len() && keys[next] < index {
                    if !self.verify_scanned(world, context, keys[next], None, passed.as_ref())? {
                        return Ok(ScanEnd::Stopped);
                    }
                    next += 1;
                }
                if keys.get(next) == Some(&index) {
                    if !self.verify_scanned(world, context, index, Some(&value), passed.as_ref())? {
                        return Ok(ScanEnd::Stopped);
                    }
                    next += 1;
                }
            }
            previous = Some(key);
        }
        for &key in &keys[next..] {
            if !self.verify_scanned(world, context, key, None, passed.as_ref())? {
                return Ok(ScanEnd::Stopped);
            }
        }
        Ok(ScanEnd::Done)
    }

    /// Check `key` as a verification scan found it (`value`, None: absent), or, when a table the scan passed over
    /// may hold a version of it, with a point read (ADR-0142). `Ok(false)`: a point read's error ended the
    /// verification.
    fn verify_scanned(
        &mut self,
        world: &mut World,
        context: &str,
        key: u32,
        value: Option<&[u8]>,
        passed: Option<&Skipped>,
    ) -> Result<bool, Violation> {
        if passed.is_some_and(|tables| tables.may_hold(RenderedKey::new(key).as_bytes())) {
            return self.verify_by_gets(world, context, &[key]);
        }
        self.verify_read(world, key, value.map(sig_of), context)?;
        Ok(true)
    }

    /// Compare one verification read of `key` (`actual`: its value's signature, None: absent) with the model.
    fn verify_read(
        &mut self,
        world: &mut World,
        key: u32,
        actual: Option<Sig>,
        context: &str,
    ) -> Result<(), Violation> {
        let damaged = self.damage_reaches(world, key);
        self.model.observe(key, actual, damaged, context).map(|_| ())
    }

    /// A verification scan failed before the key at `at`: go on only when a fault excuses the error and the
    /// database is not closed.
    fn scan_failed(
        &mut self,
        world: &mut World,
        context: &str,
        error: &engine::Error,
        at: usize,
    ) -> Result<ScanEnd, Violation> {
        let closed = matches!(error, engine::Error::Closed { .. });
        let excused = world.tolerate_verify(context, "a verification scan", &system_error(error))?;
        let damaged = match error {
            engine::Error::Corruption { file, .. } => Some(file.clone()),
            _ => None,
        };
        Ok(if !excused || closed { ScanEnd::Stopped } else { ScanEnd::Failed { at, damaged } })
    }

    /// Read each of `keys` with a point read and compare with the model. `Ok(false)`: an error ended the
    /// verification (not excused, or the database is closed).
    fn verify_by_gets(&mut self, world: &mut World, context: &str, keys: &[u32]) -> Result<bool, Violation> {
        for &key in keys {
            let Some(db) = &self.db else { return Ok(false) };
            match db.get(RenderedKey::new(key).as_bytes()) {
                Ok(value) => self.verify_read(world, key, value.as_deref().map(sig_of), context)?,
                Err(error) => {
                    // An armed crash cut the verification (the framework recovers and verifies again), or a fault
                    // excused the error; a closed database cannot be read further.
                    let closed = matches!(error, engine::Error::Closed { .. });
                    let excused = world.tolerate_verify(context, &format!("get k{key:06}"), &system_error(&error))?;
                    if !excused || closed {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_reads_stretch_while_scans_fail_where_they_start() {
        let stretches: Vec<usize> = [true, true, true, false, true]
            .iter()
            .scan(1, |last, &stalled| {
                *last = point_read_stretch(*last, stalled);
                Some(*last)
            })
            .collect();
        assert_eq!(stretches, [2, 4, 8, 1, 2]);
        assert_eq!(point_read_stretch(POINT_READ_STRETCH_MAX, true), POINT_READ_STRETCH_MAX);
        assert_eq!(point_read_stretch(0, true), 1);
    }
}
