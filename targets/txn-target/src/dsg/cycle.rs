//! A cycle of the dependency graph and its Adya class.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{Edge, EdgeKind};

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
