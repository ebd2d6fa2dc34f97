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

/// The phenomenon a serializability failure exhibits, named as Adya, Liskov and O'Neil name it ("Generalized
/// Isolation Level Definitions", ICDE 2000; Adya's thesis, MIT 1999) and as Jepsen's Elle reports it.
///
/// The cycle classes ([`AdyaClass::of_cycle`]) follow Elle's cycle explainer (`elle.txn/cycle-explainer`), which
/// looks at the anti-dependency (`rw`) edges first, so the classes are disjoint and each names the weakest
/// isolation level the cycle violates:
/// * exactly one `rw` edge: **G-single**, whatever else the cycle holds (a cycle with `ww` and `wr` edges and one
///   `rw` is G-single, not G1c; snapshot isolation proscribes it);
/// * two or more `rw` edges, every one an item anti-dependency: **G2-item** (repeatable read proscribes it: with
///   long item read locks every item edge points forward in commit order);
/// * two or more `rw` edges, at least one a predicate anti-dependency: **G2** (only serializability proscribes
///   it). Elle calls a cycle G2 when any of its edges is a predicate one; here only the anti-dependencies count,
///   since a predicate `wr` edge (a scan that saw a key deleted) cannot form a cycle repeatable read allows;
/// * no `rw` edge, at least one `wr`: **G1c** (circular information flow; read committed proscribes it);
/// * only `ww` edges: **G0** (a write cycle; read uncommitted proscribes it).
///
/// Elle also reports **G-nonadjacent** (two or more `rw` edges, no two adjacent: proscribed by snapshot
/// isolation); it is Elle's refinement, not one of Adya's phenomena, and here such a cycle is G2-item or G2.
///
/// **G1a** (aborted read) and **G1b** (intermediate read) are not cycles, and [`AdyaClass::of_cycle`] never
/// returns them. Adya defines both on a *committed* reader; the target compares every read with the version
/// history at the reader's snapshot (`snapshot_read.get`, `snapshot_read.scan`), so a read of an aborted or an
/// intermediate value fails at the read itself, before its transaction can commit, with the value's writer named
/// in the report (`k000003 = v17(33B) by T4`). Those failures are reported under `snapshot_read.*`, not as G1a or
/// G1b: the phenomenon as Adya defines it never completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AdyaClass {
    /// Write cycle: only `ww` edges.
    #[serde(rename = "G0")]
    G0,
    /// Aborted read (not a cycle; see the type's documentation).
    #[serde(rename = "G1a")]
    G1a,
    /// Intermediate read (not a cycle; see the type's documentation).
    #[serde(rename = "G1b")]
    G1b,
    /// Circular information flow: `ww` and `wr` edges, at least one `wr`.
    #[serde(rename = "G1c")]
    G1c,
    /// Single anti-dependency cycle: exactly one `rw` edge.
    #[serde(rename = "G-single")]
    GSingle,
    /// Item anti-dependency cycle: two or more `rw` edges, all item anti-dependencies.
    #[serde(rename = "G2-item")]
    G2Item,
    /// Anti-dependency cycle: two or more `rw` edges, at least one a predicate anti-dependency.
    #[serde(rename = "G2")]
    G2,
}

impl AdyaClass {
    /// Every class, weakest-level-violated first (the order Elle searches in).
    pub const ALL: [AdyaClass; 7] = [
        AdyaClass::G0,
        AdyaClass::G1a,
        AdyaClass::G1b,
        AdyaClass::G1c,
        AdyaClass::GSingle,
        AdyaClass::G2Item,
        AdyaClass::G2,
    ];

    /// The name in the literature: `G0`, `G1a`, `G1b`, `G1c`, `G-single`, `G2-item`, `G2`.
    pub fn name(self) -> &'static str {
        match self {
            AdyaClass::G0 => "G0",
            AdyaClass::G1a => "G1a",
            AdyaClass::G1b => "G1b",
            AdyaClass::G1c => "G1c",
            AdyaClass::GSingle => "G-single",
            AdyaClass::G2Item => "G2-item",
            AdyaClass::G2 => "G2",
        }
    }

    /// The class named `name` (as [`AdyaClass::name`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.name() == name)
    }

    /// The class of a dependency cycle, from its edges alone (see the type's documentation for the rules and
    /// their source). An empty edge list has no anti-dependency and no information flow: G0.
    pub fn of_cycle(edges: &[Edge]) -> Self {
        let rw = edges.iter().filter(|edge| edge.kind == EdgeKind::Rw).count();
        match rw {
            1 => AdyaClass::GSingle,
            2.. if edges.iter().any(Edge::is_predicate_rw) => AdyaClass::G2,
            2.. => AdyaClass::G2Item,
            0 if edges.iter().any(|edge| edge.kind == EdgeKind::Wr) => AdyaClass::G1c,
            0 => AdyaClass::G0,
        }
    }
}

impl std::fmt::Display for AdyaClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A dependency cycle: the committed history is not serializable. It travels as a failure's structured evidence
/// ([`holdfast::Violation::with_evidence`]), its class included as a value, and is drawn back from it
/// ([`Cycle::to_dot`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredCycle")]
pub struct Cycle {
    /// The Adya class, as classified when the cycle was found ([`AdyaClass::of_cycle`]).
    pub class: AdyaClass,
    pub edges: Vec<Edge>,
}

/// A cycle as evidence stores it; evidence written before the class existed has none, and gets it classified.
#[derive(Deserialize)]
struct StoredCycle {
    class: Option<AdyaClass>,
    edges: Vec<Edge>,
}

impl From<StoredCycle> for Cycle {
    fn from(stored: StoredCycle) -> Self {
        let class = stored.class.unwrap_or_else(|| AdyaClass::of_cycle(&stored.edges));
        Self { class, edges: stored.edges }
    }
}

fn render_key(key: &[u8]) -> String {
    String::from_utf8(key.to_vec())
        .unwrap_or_else(|_| format!("0x{}", key.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

impl Cycle {
    /// The cycle of `edges` (each edge's `to` is the next one's `from`, the last one's `to` the first one's
    /// `from`), classified.
    pub fn new(edges: Vec<Edge>) -> Self {
        Self { class: AdyaClass::of_cycle(&edges), edges }
    }

    /// What a serializability failure reports: `G2-item: T3 -rw(k2)-> T5 -rw(k7)-> T3`.
    pub fn report(&self) -> String {
        format!("{}: {}", self.class, self.render())
    }

    /// `T3 -rw(k2)-> T5 -rw(k7)-> T3`.
    pub fn render(&self) -> String {
        let mut text = format!("T{}", self.edges.first().map_or(0, |e| e.from));
        for edge in &self.edges {
            let _ = write!(text, " -{}({})-> T{}", edge.kind.name(), render_key(&edge.key), edge.to);
        }
        text
    }

    /// The cycle as a Graphviz DOT digraph, labelled with its class; a predicate dependency's edge says so.
    pub fn to_dot(&self) -> String {
        let mut dot = format!("digraph cycle {{\n  label=\"{}\";\n  labelloc=t;\n", self.class);
        dot.push_str("  rankdir=LR;\n  node [shape=circle];\n");
        for edge in &self.edges {
            let style = if edge.kind == EdgeKind::Rw { "dashed" } else { "solid" };
            let predicate = if edge.predicate { " predicate" } else { "" };
            let label = format!("{}({}){predicate}", edge.kind.name(), render_key(&edge.key)).replace('"', "\\\"");
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
        assert_eq!(cycle.class, AdyaClass::G2Item);
        assert_eq!(cycle.report(), "G2-item: T2 -rw(x)-> T1 -rw(y)-> T2");
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
        assert!(cycle.edges.iter().all(|edge| edge.predicate), "{cycle:?}");
        assert_eq!(cycle.class, AdyaClass::G2);
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
        let cycle = graph.clone().commit(&lost).expect("a lost update");
        assert_eq!((cycle.class, cycle.render().as_str()), (AdyaClass::GSingle, "T4 -rw(x)-> T2 -ww(x)-> T4"));
    }

    fn rw(from: TxnId, to: TxnId, name: &str) -> Edge {
        Edge::item(from, to, EdgeKind::Rw, name.as_bytes())
    }

    fn wr(from: TxnId, to: TxnId, name: &str) -> Edge {
        Edge::item(from, to, EdgeKind::Wr, name.as_bytes())
    }

    fn ww(from: TxnId, to: TxnId, name: &str) -> Edge {
        Edge::item(from, to, EdgeKind::Ww, name.as_bytes())
    }

    fn predicate_rw(from: TxnId, to: TxnId, name: &str) -> Edge {
        Edge::predicate(from, to, EdgeKind::Rw, name.as_bytes())
    }

    #[test]
    fn each_cycle_class_is_named_from_its_edges() {
        let cases = [
            (vec![ww(1, 2, "x"), ww(2, 1, "y")], AdyaClass::G0, "G0"),
            (vec![ww(1, 2, "x"), wr(2, 1, "y")], AdyaClass::G1c, "G1c"),
            (vec![wr(1, 2, "x"), wr(2, 3, "y"), wr(3, 1, "z")], AdyaClass::G1c, "G1c"),
            // Elle's precedence: one anti-dependency makes a G-single, whatever ww and wr edges come with it.
            (vec![ww(1, 2, "x"), wr(2, 3, "y"), rw(3, 1, "z")], AdyaClass::GSingle, "G-single"),
            (vec![predicate_rw(1, 2, "x"), ww(2, 1, "y")], AdyaClass::GSingle, "G-single"),
            (vec![rw(1, 2, "x"), rw(2, 1, "y")], AdyaClass::G2Item, "G2-item"),
            (vec![rw(1, 2, "x"), wr(2, 3, "y"), rw(3, 1, "z")], AdyaClass::G2Item, "G2-item"),
            // A predicate wr edge (a scan saw a deleted key) does not make a G2: only anti-dependencies count.
            (
                vec![rw(1, 2, "x"), Edge::predicate(2, 3, EdgeKind::Wr, b"y"), rw(3, 1, "z")],
                AdyaClass::G2Item,
                "G2-item",
            ),
            (vec![rw(1, 2, "x"), predicate_rw(2, 1, "y")], AdyaClass::G2, "G2"),
            (vec![predicate_rw(1, 2, "x"), predicate_rw(2, 1, "y")], AdyaClass::G2, "G2"),
        ];
        for (edges, class, name) in cases {
            let cycle = Cycle::new(edges);
            assert_eq!(cycle.class, class, "{}", cycle.render());
            assert_eq!(AdyaClass::of_cycle(&cycle.edges), class);
            assert_eq!(class.name(), name);
            assert_eq!(class.to_string(), name);
            assert_eq!(AdyaClass::from_name(name), Some(class));
            assert_eq!(serde_json::to_value(class).expect("serializes"), serde_json::json!(name));
            assert!(cycle.report().starts_with(&format!("{name}: T")), "{}", cycle.report());
        }
        let names: Vec<&str> = AdyaClass::ALL.iter().map(|class| class.name()).collect();
        assert_eq!(names, ["G0", "G1a", "G1b", "G1c", "G-single", "G2-item", "G2"]);
        for class in AdyaClass::ALL {
            let json = serde_json::to_value(class).expect("serializes");
            assert_eq!(serde_json::from_value::<AdyaClass>(json).expect("reads back"), class);
        }
        assert_eq!(AdyaClass::from_name("G2-predicate"), None);
    }

    #[test]
    fn the_class_travels_with_the_evidence_and_labels_the_dot() {
        let cycle = Cycle::new(vec![rw(2, 1, "x"), predicate_rw(1, 2, "y")]);
        let evidence = serde_json::to_value(&cycle).expect("a cycle serializes");
        assert_eq!(evidence["class"], serde_json::json!("G2"), "{evidence}");
        assert_eq!(evidence["edges"][1]["predicate"], serde_json::json!(true), "{evidence}");
        assert_eq!(serde_json::from_value::<Cycle>(evidence.clone()).expect("reads back"), cycle);
        // The class is a recorded value, not recomputed on reading.
        let mut recorded = evidence;
        recorded["class"] = serde_json::json!("G2-item");
        assert_eq!(serde_json::from_value::<Cycle>(recorded).expect("reads back").class, AdyaClass::G2Item);
        // Evidence written before the class (and the predicate flag) existed is classified on reading.
        let old = serde_json::json!({"edges": [
            {"from": 2, "to": 1, "kind": "rw", "key": [120]},
            {"from": 1, "to": 2, "kind": "rw", "key": [121]},
        ]});
        assert_eq!(
            serde_json::from_value::<Cycle>(old).expect("old evidence reads"),
            Cycle::new(vec![rw(2, 1, "x"), rw(1, 2, "y")])
        );
        let dot = cycle.to_dot();
        assert!(dot.starts_with("digraph cycle {\n  label=\"G2\";\n  labelloc=t;\n"), "{dot}");
        assert!(dot.contains("T2 -> T1 [label=\"rw(x)\", style=dashed];"), "{dot}");
        assert!(dot.contains("T1 -> T2 [label=\"rw(y) predicate\", style=dashed];"), "{dot}");
    }

    #[test]
    fn the_graph_marks_predicate_anti_dependencies() {
        let mut graph = DependencyGraph::new();
        // T1 writes p and deletes q. T2 scans [a, z): it returns p (an item read) and sees q deleted and r never
        // written (predicate reads). T3 then overwrites p and q and creates r: T2 -rw-> T3 on each key, an item
        // anti-dependency on p only.
        let t1 =
            CommittedTxn { id: 1, writes: vec![key("p"), key("q")], deletes: vec![key("q")], ..Default::default() };
        let scan = Scan { start: key("a"), end: Some(key("z")), observed: vec![(key("p"), 1), (key("q"), 1)] };
        let t2 = CommittedTxn { id: 2, scans: vec![scan], ..Default::default() };
        let t3 = CommittedTxn { id: 3, writes: vec![key("p"), key("q"), key("r")], ..Default::default() };
        for txn in [&t1, &t2, &t3] {
            assert_eq!(graph.commit(txn), None);
        }
        let from_t2: Vec<(String, EdgeKind, bool)> = graph.edges[&2]
            .iter()
            .map(|edge| (String::from_utf8(edge.key.clone()).expect("utf-8"), edge.kind, edge.predicate))
            .collect();
        let expected = [("p", EdgeKind::Rw, false), ("q", EdgeKind::Rw, true), ("r", EdgeKind::Rw, true)];
        assert_eq!(from_t2, expected.map(|(name, kind, predicate)| (name.to_string(), kind, predicate)));
        let into_t2: Vec<bool> =
            graph.edges[&1].iter().filter(|edge| edge.to == 2).map(|edge| edge.predicate).collect();
        assert_eq!(into_t2, [false, true], "wr(p) is an item read, wr(q) saw a tombstone");
    }

    #[test]
    fn a_graph_forms_g1c_g_single_g2_item_and_g2() {
        // G1c: T2 read x from T1 before T1 committed (the history a dirty read would give), and T1 read T2's y.
        let mut graph = DependencyGraph::new();
        let t2 = CommittedTxn { id: 2, reads: vec![(key("x"), 1)], writes: vec![key("y")], ..Default::default() };
        let t1 = CommittedTxn { id: 1, reads: vec![(key("y"), 2)], writes: vec![key("x")], ..Default::default() };
        assert_eq!(graph.commit(&t2), None);
        let cycle = graph.commit(&t1).expect("circular information flow");
        assert_eq!(cycle.report(), "G1c: T1 -wr(x)-> T2 -wr(y)-> T1");
        // G-single (a lost update), G2-item (write skew) and G2 (a phantom) are the other tests' cycles; here the
        // classes of the ones the graph finds are checked together.
        let lost = [
            CommittedTxn { id: 1, writes: vec![key("x")], ..Default::default() },
            CommittedTxn { id: 2, reads: vec![(key("x"), 1)], writes: vec![key("x")], ..Default::default() },
            CommittedTxn { id: 3, reads: vec![(key("x"), 1)], writes: vec![key("x")], ..Default::default() },
        ];
        let skew = [
            CommittedTxn {
                id: 1,
                reads: vec![(key("x"), 0), (key("y"), 0)],
                writes: vec![key("x")],
                ..Default::default()
            },
            CommittedTxn {
                id: 2,
                reads: vec![(key("x"), 0), (key("y"), 0)],
                writes: vec![key("y")],
                ..Default::default()
            },
        ];
        let empty = Scan { start: key("a"), end: Some(key("z")), observed: vec![] };
        let phantom = [
            CommittedTxn { id: 1, scans: vec![empty.clone()], writes: vec![key("m")], ..Default::default() },
            CommittedTxn { id: 2, scans: vec![empty], writes: vec![key("n")], ..Default::default() },
        ];
        for (history, class) in
            [(&lost[..], AdyaClass::GSingle), (&skew[..], AdyaClass::G2Item), (&phantom[..], AdyaClass::G2)]
        {
            let mut graph = DependencyGraph::new();
            let (last, before) = history.split_last().expect("a history");
            assert!(before.iter().all(|txn| graph.commit(txn).is_none()));
            let cycle = graph.commit(last).expect("a cycle");
            assert_eq!(cycle.class, class, "{}", cycle.report());
        }
    }

    #[test]
    fn the_most_severe_cycle_through_the_commit_is_reported() {
        // T3 closes two cycles: T3 -rw(a)-> T1 -rw(b)-> T2 -ww(y)-> T3 (G2-item, the one a plain depth-first search
        // meets first) and T3 -rw(c)-> T4 -ww(x)-> T3 (G-single, a weaker isolation level violated).
        let mut graph = DependencyGraph::new();
        let history = [
            CommittedTxn { id: 1, reads: vec![(key("b"), 0)], writes: vec![key("a")], ..Default::default() },
            CommittedTxn { id: 2, writes: vec![key("b"), key("y")], ..Default::default() },
            CommittedTxn { id: 4, writes: vec![key("c"), key("x")], ..Default::default() },
        ];
        assert!(history.iter().all(|txn| graph.commit(txn).is_none()));
        let t3 = CommittedTxn {
            id: 3,
            reads: vec![(key("a"), 0), (key("c"), 0)],
            writes: vec![key("y"), key("x")],
            ..Default::default()
        };
        let cycle = graph.commit(&t3).expect("a cycle");
        assert_eq!(cycle.report(), "G-single: T3 -rw(c)-> T4 -ww(x)-> T3");
        let first = graph.search(3, &Search { admits: |_| true, rw_max: None }).expect("a cycle");
        assert_eq!(Cycle::new(first).report(), "G2-item: T3 -rw(a)-> T1 -rw(b)-> T2 -ww(y)-> T3");
    }

    #[test]
    fn a_walk_through_a_transaction_twice_becomes_a_simple_cycle() {
        let walk = vec![rw(1, 2, "a"), wr(2, 3, "b"), rw(3, 2, "c"), ww(2, 1, "d")];
        assert_eq!(without_loops(walk), vec![rw(1, 2, "a"), ww(2, 1, "d")]);
        let simple = vec![rw(1, 2, "a"), rw(2, 1, "b")];
        assert_eq!(without_loops(simple.clone()), simple);
    }
}
