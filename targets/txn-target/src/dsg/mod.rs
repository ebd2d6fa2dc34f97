//! An incremental serializability checker over the committed history: Adya's direct serialization graph (DSG), as
//! Jepsen's Elle builds it (ADR-0032).
//!
//! Versions of a key are ordered by commit sequence (the engine installs them in that order). For each committed
//! transaction the checker adds:
//! * **ww** `Ti → Tj`: `Tj` wrote the version of a key right after `Ti`'s;
//! * **wr** `Ti → Tj`: `Tj` read the version `Ti` wrote;
//! * **rw** `Ti → Tj`: `Ti` read a version and `Tj` wrote the next one (an anti-dependency); for a **scan** (a
//!   predicate read), `Tj` wrote the next version, after the one `Ti` observed, of any key in the scanned range —
//!   including a key `Ti` saw as absent (a phantom).
//!
//! An anti-dependency is an **item** one when the reader read the version itself (a point read, or a scan that
//! returned the key) and a **predicate** one when only the scan's range covered it (the scan saw the key absent:
//! never written, deleted, or not yet written — a phantom). Predicate dependencies cover the versions a predicate
//! read did *not* return; the ones it returned are item reads too (Elle's `elle.closed-predicate` documents
//! Adya's model the same way), so an anti-dependency that is both is counted as an item one. (A scan that saw a key
//! absent also gets an anti-dependency on a next version that is a tombstone again; it does not change what the
//! scan matches, so Adya would draw no edge there. The checker keeps it, conservatively, as a predicate one.)
//!
//! Every new edge touches the transaction being added, so a cycle appears exactly when one passes through it: the
//! check after each commit is a search from the new node. When there is one, the most severe class of cycle
//! through the node is searched for first, in Elle's order (G0, G1c, G-single, G2-item, G2). A cycle is reported
//! with its Adya class, transactions, keys and edge kinds (`G2-item: T3 -rw(k2)-> T5 -rw(k7)-> T3`; see
//! [`AdyaClass`]) and can be drawn as Graphviz DOT.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

mod cycle;
#[cfg(test)]
mod tests;

pub use cycle::{AdyaClass, Cycle};

/// A transaction's id in the history.
pub type TxnId = u64;
/// The writer of the initial (empty) state of every key.
pub const INITIAL: TxnId = 0;
/// The most transactions the graph holds (a leak is a bug).
pub const TRANSACTIONS_MAX: usize = 1 << 20;

/// What a committed transaction did, in terms of versions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommittedTxn {
    pub id: TxnId,
    /// Point reads: (key, the writer of the version observed; [`INITIAL`] for the initial absence).
    pub reads: Vec<(Vec<u8>, TxnId)>,
    /// Scans: (start, end (None = unbounded), for every key in range the writer of the version observed —
    /// including tombstones and absences the scan skipped, as far as the history knows them).
    pub scans: Vec<Scan>,
    /// Keys written (in commit order, this transaction's version follows the previous one).
    pub writes: Vec<Vec<u8>>,
    /// The keys of `writes` whose new version is a tombstone (a delete): a scan that observes it sees the key
    /// absent, so an anti-dependency from that observation is a predicate one.
    pub deletes: Vec<Vec<u8>>,
}

/// A predicate read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    /// The version observed for each key the history has in the range: (key, writer).
    pub observed: Vec<(Vec<u8>, TxnId)>,
}

impl Scan {
    fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_ref().is_none_or(|end| key < end.as_slice())
    }
}

/// The kind of a dependency edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Write-write: the target wrote the version right after the source's.
    Ww,
    /// Write-read: the target read the version the source wrote.
    Wr,
    /// Read-write (an anti-dependency): the source read a version the target then overwrote.
    Rw,
}

impl EdgeKind {
    fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
        }
    }
}

/// One edge of a reported cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    pub from: TxnId,
    pub to: TxnId,
    pub kind: EdgeKind,
    /// The key the dependency is on.
    pub key: Vec<u8>,
    /// A predicate dependency: the reader's scan covered `key` without returning a version of it (it saw the key
    /// absent). False for item dependencies and for every `ww` edge. Absent in evidence written before it existed.
    #[serde(default)]
    pub predicate: bool,
}

impl Edge {
    /// An item dependency.
    pub fn item(from: TxnId, to: TxnId, kind: EdgeKind, key: &[u8]) -> Self {
        Self { from, to, kind, key: key.to_vec(), predicate: false }
    }

    /// A predicate dependency (an `rw` or `wr` edge from a scan that saw `key` absent).
    pub fn predicate(from: TxnId, to: TxnId, kind: EdgeKind, key: &[u8]) -> Self {
        Self { from, to, kind, key: key.to_vec(), predicate: true }
    }

    fn is_predicate_rw(&self) -> bool {
        self.kind == EdgeKind::Rw && self.predicate
    }
}

/// The growing graph of committed transactions.
#[derive(Clone, Debug, Default)]
pub struct DependencyGraph {
    /// Per key: writers in version order (commit order), starting after [`INITIAL`].
    versions: BTreeMap<Vec<u8>, Vec<TxnId>>,
    /// The versions that are tombstones: (key, writer).
    tombstones: BTreeSet<(Vec<u8>, TxnId)>,
    /// Who read which version: (key, writer observed) → readers (point reads and scans alike), each with whether
    /// it read the version only through a predicate (a scan that saw the key absent).
    readers: BTreeMap<(Vec<u8>, TxnId), BTreeMap<TxnId, bool>>,
    /// Scans, kept to find predicate anti-dependencies on keys first written later.
    scans: Vec<(TxnId, Scan)>,
    edges: BTreeMap<TxnId, Vec<Edge>>,
    transactions: usize,
}

/// Which edges a cycle search may follow, and how many `rw` edges a cycle may hold (`None`: any number).
struct Search {
    admits: fn(&Edge) -> bool,
    rw_max: Option<usize>,
}

/// The searches for a cycle of each class, the weakest isolation level violated first (Elle's order,
/// `elle.txn/base-cycle-anomaly-specs`): each finds a cycle only if no earlier one did.
const SEARCHES_BY_SEVERITY: [Search; 4] = [
    // G0: write-write edges only.
    Search { admits: |edge| edge.kind == EdgeKind::Ww, rw_max: None },
    // G1c: no anti-dependency.
    Search { admits: |edge| edge.kind != EdgeKind::Rw, rw_max: None },
    // G-single: at most (so, after G1c found none, exactly) one anti-dependency.
    Search { admits: |_| true, rw_max: Some(1) },
    // G2-item: item anti-dependencies only.
    Search { admits: |edge| !edge.is_predicate_rw(), rw_max: None },
];

impl DependencyGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many committed transactions the graph holds.
    pub fn len(&self) -> usize {
        self.transactions
    }

    /// True when no transaction has committed.
    pub fn is_empty(&self) -> bool {
        self.transactions == 0
    }

    /// The writer of the version right after `writer`'s version of `key`, if any has committed.
    fn next_writer(&self, key: &[u8], writer: TxnId) -> Option<TxnId> {
        let chain = self.versions.get(key)?;
        if writer == INITIAL {
            return chain.first().copied();
        }
        let position = chain.iter().position(|&w| w == writer)?;
        chain.get(position + 1).copied()
    }

    /// Whether `writer`'s version of `key` holds a value (the initial state and tombstones do not).
    fn live(&self, key: &[u8], writer: TxnId) -> bool {
        writer != INITIAL && !self.tombstones.contains(&(key.to_vec(), writer))
    }

    fn edge(&mut self, from: TxnId, to: TxnId, kind: EdgeKind, key: &[u8], predicate: bool) {
        if from == to || from == INITIAL {
            return;
        }
        self.edges.entry(from).or_default().push(Edge { from, to, kind, key: key.to_vec(), predicate });
    }

    /// Add a committed transaction (in commit order). Returns the cycle through it, if one formed.
    pub fn commit(&mut self, txn: &CommittedTxn) -> Option<Cycle> {
        assert!(txn.id != INITIAL, "transaction id 0 is the initial state");
        assert!(self.transactions < TRANSACTIONS_MAX, "dependency graph over TRANSACTIONS_MAX");
        self.transactions += 1;
        // (key, writer, through a predicate only): a point read is an item read, and so is a scan's read of a
        // version it returned; a scan that saw the key absent read it through its predicate.
        let observed: Vec<(Vec<u8>, TxnId, bool)> = txn
            .reads
            .iter()
            .map(|(key, writer)| (key.clone(), *writer, false))
            .chain(txn.scans.iter().flat_map(|scan| {
                scan.observed.iter().map(|(key, writer)| (key.clone(), *writer, !self.live(key, *writer)))
            }))
            .collect();
        for (key, writer, predicate) in &observed {
            self.edge(*writer, txn.id, EdgeKind::Wr, key, *predicate);
            // Anti-dependency on a later version already committed (the reader committed after its writer).
            if let Some(next) = self.next_writer(key, *writer) {
                self.edge(txn.id, next, EdgeKind::Rw, key, *predicate);
            }
            // An item read of the same version wins over a predicate one.
            let readers = self.readers.entry((key.clone(), *writer)).or_default();
            readers.entry(txn.id).and_modify(|only| *only &= *predicate).or_insert(*predicate);
        }
        for scan in &txn.scans {
            // Keys in the range the scan did not observe at all: their first version is a phantom for it.
            for (key, chain) in self.versions.range(scan.start.clone()..) {
                if !scan.contains(key) {
                    break;
                }
                if !scan.observed.iter().any(|(seen, _)| seen == key) {
                    let first = chain[0];
                    self.edges.entry(txn.id).or_default().push(Edge::predicate(txn.id, first, EdgeKind::Rw, key));
                }
            }
            self.scans.push((txn.id, scan.clone()));
        }
        for key in &txn.writes {
            let previous = self.versions.get(key).and_then(|chain| chain.last().copied()).unwrap_or(INITIAL);
            self.edge(previous, txn.id, EdgeKind::Ww, key, false);
            let readers: Vec<(TxnId, bool)> = self
                .readers
                .get(&(key.clone(), previous))
                .map(|r| r.iter().map(|(&reader, &predicate)| (reader, predicate)).collect())
                .unwrap_or_default();
            for (reader, predicate) in readers {
                self.edge(reader, txn.id, EdgeKind::Rw, key, predicate);
            }
            let phantoms: Vec<TxnId> = self
                .scans
                .iter()
                .filter(|(reader, scan)| {
                    *reader != txn.id && scan.contains(key) && !scan.observed.iter().any(|(seen, _)| seen == key)
                })
                .map(|(reader, _)| *reader)
                .collect();
            if previous == INITIAL {
                for reader in phantoms {
                    self.edge(reader, txn.id, EdgeKind::Rw, key, true);
                }
            }
            self.versions.entry(key.clone()).or_default().push(txn.id);
            if txn.deletes.contains(key) {
                self.tombstones.insert((key.clone(), txn.id));
            }
        }
        self.cycle_through(txn.id)
    }

    /// The most severe cycle through `start`, if there is one: the first class of [`SEARCHES_BY_SEVERITY`] that
    /// has a cycle through it, else (G2) any cycle. Only a failing commit pays for more than one search.
    fn cycle_through(&self, start: TxnId) -> Option<Cycle> {
        let any = self.search(start, &Search { admits: |_| true, rw_max: None })?;
        let edges = SEARCHES_BY_SEVERITY.iter().find_map(|search| self.search(start, search)).unwrap_or(any);
        Some(Cycle::new(edges))
    }

    /// A cycle through `start` following only edges `search` admits, with at most `search.rw_max` anti-dependencies,
    /// by depth-first search over (transaction, anti-dependencies so far) (bounded by the graph's size).
    fn search(&self, start: TxnId, search: &Search) -> Option<Vec<Edge>> {
        let rw_cost = |edge: &Edge| usize::from(search.rw_max.is_some() && edge.kind == EdgeKind::Rw);
        let mut stack: Vec<(TxnId, usize, usize)> = vec![(start, 0, 0)];
        let mut path: Vec<Edge> = Vec::new();
        let mut visited: BTreeSet<(TxnId, usize)> = BTreeSet::from([(start, 0)]);
        while let Some((node, rw, next_edge)) = stack.pop() {
            let edges = self.edges.get(&node).map(Vec::as_slice).unwrap_or(&[]);
            let Some(edge) = edges.get(next_edge) else {
                path.pop();
                continue;
            };
            stack.push((node, rw, next_edge + 1));
            let rw_after = rw + rw_cost(edge);
            if !(search.admits)(edge) || search.rw_max.is_some_and(|max| rw_after > max) {
                continue;
            }
            if edge.to == start {
                path.push(edge.clone());
                return Some(without_loops(path));
            }
            if visited.insert((edge.to, rw_after)) {
                path.push(edge.clone());
                stack.push((edge.to, rw_after, 0));
            }
        }
        None
    }

    /// Would committing `txn` close a cycle? (For classifying aborts: an abort whose transaction would not have
    /// closed one was a false abort.) The graph is left unchanged.
    pub fn would_cycle(&self, txn: &CommittedTxn) -> bool {
        self.clone().commit(txn).is_some()
    }
}

/// A closed walk from a transaction back to it, as a simple cycle: a search counting anti-dependencies may pass
/// a transaction twice (with different counts); the loop between the two passes is cut out. The cycle keeps a
/// subset of the walk's edges, so it is admitted by the same search.
fn without_loops(walk: Vec<Edge>) -> Vec<Edge> {
    let last = walk.len().saturating_sub(1);
    let mut cycle: Vec<Edge> = Vec::with_capacity(walk.len());
    for (index, edge) in walk.into_iter().enumerate() {
        match cycle.iter().position(|earlier| earlier.from == edge.to) {
            // Back at a transaction the cycle already left: drop the loop, this edge included.
            Some(position) if index != last => cycle.truncate(position),
            _ => cycle.push(edge),
        }
    }
    cycle
}
