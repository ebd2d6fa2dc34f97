//! Writes the seed corpus of the decoder targets from real databases run on `SimEnv`:
//! `cargo run --example make_corpus` from `fuzz/` (stable is enough). Overwrites `corpus/{wal,sstable,manifest}_decode/`
//! files of the same names; the output is deterministic, so a rerun changes nothing unless a format changed.
//!
//! (An example, not a `[[bin]]`: cargo-fuzz treats every `[[bin]]` of this crate as a fuzz target.)
//!
//! The `recovery` target's seeds are not written here: its input is an `arbitrary` byte stream, not a file image,
//! so its seeds are a minimised corpus from a fuzzing run (see README.md).

use std::path::{Path, PathBuf};

use engine::sstable::{decode_footer, decode_index};
use engine::wal::{Record, decode_record_at, decode_segment};
use engine::{Db, Options};
use env::{Env, SimEnv};

const DIR: &str = "/db";

/// The files of a database on `SimEnv` after `run`, by name; `durable` keeps only what survives a power cut.
fn database(seed: u64, options: Options, durable: bool, run: impl FnOnce(&Db<SimEnv>)) -> Vec<(String, Vec<u8>)> {
    let env = SimEnv::new(seed);
    let db = Db::open(env.clone(), DIR, options).expect("open");
    run(&db);
    drop(db);
    let mut files = Vec::new();
    for path in env.list_dir(Path::new(DIR)).expect("list") {
        let bytes = if durable { env.read_durable(&path) } else { env.read_current(&path) };
        if let Some(bytes) = bytes {
            files.push((path.file_name().expect("name").to_string_lossy().into_owned(), bytes));
        }
    }
    files.sort();
    files
}

fn puts(db: &Db<SimEnv>, range: std::ops::Range<u32>, value_bytes: usize) {
    for i in range {
        let key = format!("key{i:04}");
        let value: Vec<u8> = (0..value_bytes).map(|j| (i as usize + j) as u8).collect();
        db.put(key.as_bytes(), &value).expect("put");
    }
}

struct Corpus {
    root: PathBuf,
    written: usize,
}

impl Corpus {
    #[expect(clippy::disallowed_methods, reason = "writes the committed corpus: real files by design")]
    fn write(&mut self, target: &str, name: &str, bytes: &[u8]) {
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("create the corpus directory");
        std::fs::write(dir.join(name), bytes).expect("write a seed");
        self.written += 1;
    }

    /// A table, and each of its parts with the CRC stripped (the harness tries every part sealed too).
    fn table(&mut self, label: &str, bytes: &[u8]) {
        self.write("sstable_decode", &format!("{label}.sst"), bytes);
        let footer_at = bytes.len() - 64;
        let footer = decode_footer(&bytes[footer_at..], bytes.len() as u64).expect("a real table's footer");
        self.write("sstable_decode", &format!("{label}.footer60"), &bytes[footer_at..footer_at + 60]);
        let part = |offset: u64, size: u32| &bytes[offset as usize..(offset + u64::from(size)) as usize - 4];
        self.write("sstable_decode", &format!("{label}.index"), part(footer.index.offset, footer.index.size_bytes));
        self.write("sstable_decode", &format!("{label}.bloom"), part(footer.bloom.offset, footer.bloom.size_bytes));
        self.write(
            "sstable_decode",
            &format!("{label}.learned"),
            part(footer.learned.offset, footer.learned.size_bytes),
        );
        self.write("sstable_decode", &format!("{label}.meta"), part(footer.meta.offset, footer.meta.size_bytes));
        let index_end = footer.index.offset + u64::from(footer.index.size_bytes);
        let index = decode_index(&bytes[footer.index.offset as usize..index_end as usize]).expect("a real index");
        self.write("sstable_decode", &format!("{label}.block0"), part(index[0].offset, index[0].size_bytes));
    }

    /// A log segment, and the payload of its first batch record (the harness decodes the input as a batch too).
    fn wal(&mut self, label: &str, bytes: &[u8]) {
        self.write("wal_decode", &format!("{label}.log"), bytes);
        if let Some((offset, Record::Batch(_))) = decode_segment(bytes).records.first() {
            let (_, _, end) = decode_record_at(bytes, *offset as usize).expect("a scanned record");
            self.write("wal_decode", &format!("{label}.batch"), &bytes[*offset as usize + 24..end]);
        }
    }

    fn database(&mut self, label: &str, files: &[(String, Vec<u8>)]) {
        for (name, bytes) in files {
            let stem = name.replace('.', "-");
            if name.ends_with(".sst") {
                self.table(&format!("{label}-{stem}"), bytes);
            } else if name.ends_with(".log") && !bytes.is_empty() {
                self.wal(&format!("{label}-{stem}"), bytes);
            } else if name.starts_with("MANIFEST") {
                self.write("manifest_decode", &format!("{label}-{stem}"), bytes);
            }
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut corpus = Corpus { root, written: 0 };

    // A closed database: a sealed log with puts and a delete, and the manifest naming it.
    let closed = database(1, Options::default(), false, |db| {
        puts(db, 0..6, 12);
        db.delete(b"key0002").expect("delete");
        db.close().expect("close");
    });
    corpus.database("closed", &closed);

    // Small blocks, flushed then compacted: multi-block tables with restarts, a learned index and a manifest with
    // tables on two levels.
    let small = Options::default().with_block_size_bytes(64);
    let compacted = database(2, small.clone(), false, |db| {
        puts(db, 0..40, 20);
        db.flush().expect("flush");
        puts(db, 20..30, 5);
        db.delete(b"key0003").expect("delete");
        db.flush().expect("flush");
        db.compact().expect("compact");
        puts(db, 100..104, 3);
        db.flush().expect("flush");
        db.close().expect("close");
    });
    corpus.database("compacted", &compacted);

    // Abandoned mid-write (no close, no seal) and kept only as far as durable: an unsealed log.
    let abandoned = database(3, Options::default(), true, |db| puts(db, 0..3, 100));
    corpus.database("abandoned", &abandoned);

    println!("make_corpus: wrote {} seed files under {}", corpus.written, corpus.root.display());
}
