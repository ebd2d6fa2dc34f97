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
//! Every new edge touches the transaction being added, so a cycle appears exactly when one passes through it: the
//! check after each commit is a search from the new node. A cycle is reported with its transactions, keys and edge
//! kinds (`T3 -rw(k2)-> T5 -rw(k7)-> T3`) and can be drawn as Graphviz DOT.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

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
}

/// A dependency cycle: the committed history is not serializable. It travels as a failure's structured evidence
/// ([`holdfast::Violation::with_evidence`]) and is drawn back from it ([`Cycle::to_dot`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cycle {
    pub edges: Vec<Edge>,
}

fn render_key(key: &[u8]) -> String {
    String::from_utf8(key.to_vec())
        .unwrap_or_else(|_| format!("0x{}", key.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

impl Cycle {
    /// `T3 -rw(k2)-> T5 -rw(k7)-> T3`.
    pub fn render(&self) -> String {
        let mut text = format!("T{}", self.edges.first().map_or(0, |e| e.from));
        for edge in &self.edges {
            let _ = write!(text, " -{}({})-> T{}", edge.kind.name(), render_key(&edge.key), edge.to);
        }
        text
    }

    /// The cycle as a Graphviz DOT digraph.
    pub fn to_dot(&self) -> String {
        let mut dot = String::from("digraph cycle {\n  rankdir=LR;\n  node [shape=circle];\n");
        for edge in &self.edges {
            let style = if edge.kind == EdgeKind::Rw { "dashed" } else { "solid" };
            let label = format!("{}({})", edge.kind.name(), render_key(&edge.key)).replace('"', "\\\"");
            let _ = writeln!(dot, "  T{} -> T{} [label=\"{label}\", style={style}];", edge.from, edge.to);
        }
        dot.push_str("}\n");
        dot
    }

    /// The edge kinds, in order.
    pub fn kinds(&self) -> Vec<EdgeKind> {
        self.edges.iter().map(|edge| edge.kind).collect()
    }
}

/// The growing graph of committed transactions.
#[derive(Clone, Debug, Default)]
pub struct DependencyGraph {
    /// Per key: writers in version order (commit order), starting after [`INITIAL`].
    versions: BTreeMap<Vec<u8>, Vec<TxnId>>,
    /// Who read which version: (key, writer observed) → readers (point reads and scans alike).
    readers: BTreeMap<(Vec<u8>, TxnId), BTreeSet<TxnId>>,
    /// Scans, kept to find predicate anti-dependencies on keys first written later.
    scans: Vec<(TxnId, Scan)>,
    edges: BTreeMap<TxnId, Vec<Edge>>,
    transactions: usize,
}

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

    fn edge(&mut self, from: TxnId, to: TxnId, kind: EdgeKind, key: &[u8]) {
        if from == to || from == INITIAL {
            return;
        }
        self.edges.entry(from).or_default().push(Edge { from, to, kind, key: key.to_vec() });
    }

    /// Add a committed transaction (in commit order). Returns the cycle through it, if one formed.
    pub fn commit(&mut self, txn: &CommittedTxn) -> Option<Cycle> {
        assert!(txn.id != INITIAL, "transaction id 0 is the initial state");
        assert!(self.transactions < TRANSACTIONS_MAX, "dependency graph over TRANSACTIONS_MAX");
        self.transactions += 1;
        let observed: Vec<(Vec<u8>, TxnId)> =
            txn.reads.iter().cloned().chain(txn.scans.iter().flat_map(|scan| scan.observed.iter().cloned())).collect();
        for (key, writer) in &observed {
            self.edge(*writer, txn.id, EdgeKind::Wr, key);
            // Anti-dependency on a later version already committed (the reader committed after its writer).
            if let Some(next) = self.next_writer(key, *writer) {
                self.edge(txn.id, next, EdgeKind::Rw, key);
            }
            self.readers.entry((key.clone(), *writer)).or_default().insert(txn.id);
        }
        for scan in &txn.scans {
            // Keys in the range the scan did not observe at all: their first version is a phantom for it.
            for (key, chain) in self.versions.range(scan.start.clone()..) {
                if !scan.contains(key) {
                    break;
                }
                if !scan.observed.iter().any(|(seen, _)| seen == key) {
                    let first = chain[0];
                    self.edges.entry(txn.id).or_default().push(Edge {
                        from: txn.id,
                        to: first,
                        kind: EdgeKind::Rw,
                        key: key.clone(),
                    });
                }
            }
            self.scans.push((txn.id, scan.clone()));
        }
        for key in &txn.writes {
            let previous = self.versions.get(key).and_then(|chain| chain.last().copied()).unwrap_or(INITIAL);
            self.edge(previous, txn.id, EdgeKind::Ww, key);
            let readers: Vec<TxnId> =
                self.readers.get(&(key.clone(), previous)).map(|r| r.iter().copied().collect()).unwrap_or_default();
            for reader in readers {
                self.edge(reader, txn.id, EdgeKind::Rw, key);
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
                    self.edge(reader, txn.id, EdgeKind::Rw, key);
                }
            }
            self.versions.entry(key.clone()).or_default().push(txn.id);
        }
        self.cycle_through(txn.id)
    }

    /// A cycle through `start`, by depth-first search (bounded by the graph's size).
    fn cycle_through(&self, start: TxnId) -> Option<Cycle> {
        let mut stack: Vec<(TxnId, usize)> = vec![(start, 0)];
        let mut path: Vec<Edge> = Vec::new();
        let mut visited: BTreeSet<TxnId> = BTreeSet::from([start]);
        while let Some((node, next_edge)) = stack.pop() {
            let edges = self.edges.get(&node).map(Vec::as_slice).unwrap_or(&[]);
            let Some(edge) = edges.get(next_edge) else {
                path.pop();
                continue;
            };
            stack.push((node, next_edge + 1));
            if edge.to == start {
                path.push(edge.clone());
                return Some(Cycle { edges: path });
            }
            if visited.insert(edge.to) {
                path.push(edge.clone());
                stack.push((edge.to, 0));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Vec<u8> {
        name.as_bytes().to_vec()
    }

    #[test]
    fn write_skew_is_a_two_rw_cycle() {
        let mut graph = DependencyGraph::new();
        // T1 and T2 both read x and y initially; T1 writes x, T2 writes y.
        let t1 = CommittedTxn {
            id: 1,
            reads: vec![(key("x"), 0), (key("y"), 0)],
            writes: vec![key("x")],
            ..Default::default()
        };
        let t2 = CommittedTxn {
            id: 2,
            reads: vec![(key("x"), 0), (key("y"), 0)],
            writes: vec![key("y")],
            ..Default::default()
        };
        assert_eq!(graph.commit(&t1), None);
        let cycle = graph.commit(&t2).expect("write skew is a cycle");
        assert_eq!(cycle.kinds(), vec![EdgeKind::Rw, EdgeKind::Rw]);
        let text = cycle.render();
        assert!(text == "T2 -rw(x)-> T1 -rw(y)-> T2", "{text}");
        assert!(cycle.to_dot().contains("T2 -> T1 [label=\"rw(x)\", style=dashed];"));
        let evidence = serde_json::to_value(&cycle).expect("a cycle serializes");
        assert_eq!(serde_json::from_value::<Cycle>(evidence).expect("and reads back"), cycle);
    }

    #[test]
    fn phantom_through_a_scan_is_caught() {
        let mut graph = DependencyGraph::new();
        // T1 scans [a, z) and sees nothing, then inserts m. T2 scans the same range, sees nothing, inserts n.
        let empty_scan = Scan { start: key("a"), end: Some(key("z")), observed: vec![] };
        let t1 = CommittedTxn { id: 1, scans: vec![empty_scan.clone()], writes: vec![key("m")], ..Default::default() };
        let t2 = CommittedTxn { id: 2, scans: vec![empty_scan], writes: vec![key("n")], ..Default::default() };
        assert_eq!(graph.commit(&t1), None);
        let cycle = graph.commit(&t2).expect("predicate write skew is a cycle");
        assert!(cycle.kinds().iter().all(|&kind| kind == EdgeKind::Rw), "{}", cycle.render());
    }

    #[test]
    fn serial_histories_have_no_cycle() {
        let mut graph = DependencyGraph::new();
        let t1 = CommittedTxn { id: 1, reads: vec![(key("x"), 0)], writes: vec![key("x")], ..Default::default() };
        let t2 =
            CommittedTxn { id: 2, reads: vec![(key("x"), 1)], writes: vec![key("x"), key("y")], ..Default::default() };
        let t3 = CommittedTxn {
            id: 3,
            scans: vec![Scan { start: key("a"), end: None, observed: vec![(key("x"), 2), (key("y"), 2)] }],
            ..Default::default()
        };
        assert_eq!(graph.commit(&t1), None);
        assert_eq!(graph.commit(&t2), None);
        assert_eq!(graph.commit(&t3), None);
        assert_eq!(graph.len(), 3);
        // A lost update (both read x's initial version and both write x) is a cycle: ww + rw.
        let lost = CommittedTxn { id: 4, reads: vec![(key("x"), 1)], writes: vec![key("x")], ..Default::default() };
        assert!(graph.would_cycle(&lost), "reading a stale version and overwriting is a cycle");
        assert_eq!(graph.len(), 3, "would_cycle leaves the graph unchanged");
    }
}
