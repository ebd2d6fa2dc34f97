//! Running a model to completion and reporting it: state counts, depth, wall time, and each property's outcome
//! with its trace (a counterexample for an invariant, an example for a reachability property).

use std::fmt::{Debug, Write as _};
use std::hash::Hash;

use env::Env as _;
use stateright::{Checker, Expectation, HasDiscoveries, Model};

/// A model this crate checks.
pub trait Spec: Model + Send + Sync + 'static {
    /// The model's name (`Mvcc`, `Ssi`, `Storage`).
    fn name(&self) -> &'static str;
    /// A one-line description of the bounds (and the variant, when not the shipped protocol).
    fn bounds(&self) -> String;
    /// A state, described for the end of a trace.
    fn describe_state(&self, state: &Self::State) -> String;
}

/// One property's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyReport {
    pub name: &'static str,
    /// `always` (an invariant) or `sometimes` (a state the bounds must reach, so the check is not vacuous).
    pub kind: &'static str,
    pub ok: bool,
    /// The counterexample (for a failed invariant) or example (for a reached state), as a numbered trace.
    pub trace: Option<String>,
}

/// A finished check.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub model: &'static str,
    pub bounds: String,
    pub distinct_states: usize,
    pub states_generated: usize,
    pub max_depth: usize,
    pub wall_seconds: f64,
    pub properties: Vec<PropertyReport>,
}

impl Report {
    /// Every invariant holds and every reachability property was reached.
    pub fn ok(&self) -> bool {
        self.properties.iter().all(|property| property.ok)
    }

    /// The counterexample trace of a failed invariant.
    pub fn counterexample(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|property| property.name == name && property.kind == "always" && !property.ok)
            .and_then(|property| property.trace.as_deref())
    }

    /// The names of the invariants that failed.
    pub fn violated(&self) -> Vec<&'static str> {
        self.properties.iter().filter(|p| p.kind == "always" && !p.ok).map(|p| p.name).collect()
    }

    /// The log text: each property with its trace, then the summary lines (the last seven lines, in this order).
    pub fn render(&self) -> String {
        let mut text = String::new();
        // The check stops at the first violated invariant: the others were only checked on the states seen.
        let stopped = !self.violated().is_empty();
        for property in &self.properties {
            let verdict = match (property.kind, property.ok) {
                ("always", true) if stopped => "no counterexample before the check stopped",
                ("always", true) => "holds",
                ("always", false) => "VIOLATED",
                (_, true) => "reached",
                (_, false) if stopped => "not reached before the check stopped",
                (_, false) => "NOT REACHED",
            };
            let _ = writeln!(text, "property {} ({}): {verdict}", property.name, property.kind);
            if let Some(trace) = &property.trace
                && (!property.ok || property.kind == "always")
            {
                let _ = writeln!(text, "{trace}");
            }
        }
        let _ = writeln!(text, "model: {}", self.model);
        let _ = writeln!(text, "bounds: {}", self.bounds);
        let _ = writeln!(text, "distinct_states: {}", self.distinct_states);
        let _ = writeln!(text, "states_generated: {}", self.states_generated);
        let _ = writeln!(text, "max_depth: {}", self.max_depth);
        let _ = writeln!(text, "wall_seconds: {:.1}", self.wall_seconds);
        let _ = writeln!(text, "result: {}", if self.ok() { "ok" } else { "violation" });
        text
    }
}

/// Check `model` exhaustively, breadth first (so traces are shortest), stopping early at the first violated
/// invariant.
pub fn check<M>(model: M, threads: usize) -> Report
where
    M: Spec,
    M::State: Clone + Debug + Hash + Send + Sync + 'static,
    M::Action: Clone + Debug + Send + Sync + 'static,
{
    check_with(model, threads, false)
}

/// Check `model` exhaustively: depth first when `depth_first` (memory grows with the depth, not the breadth:
/// for the large bounds), else breadth first. Stops early at the first violated invariant.
pub fn check_with<M>(model: M, threads: usize, depth_first: bool) -> Report
where
    M: Spec,
    M::State: Clone + Debug + Hash + Send + Sync + 'static,
    M::Action: Clone + Debug + Send + Sync + 'static,
{
    let clock = env::RealEnv::new();
    let (name, bounds) = (model.name(), model.bounds());
    let properties = model.properties();
    let builder = model.checker().threads(threads).finish_when(HasDiscoveries::AnyFailures);
    if depth_first {
        report(builder.spawn_dfs().join(), name, bounds, &properties, clock.now().as_secs_f64())
    } else {
        report(builder.spawn_bfs().join(), name, bounds, &properties, clock.now().as_secs_f64())
    }
}

fn report<M, C>(
    checker: C,
    name: &'static str,
    bounds: String,
    properties: &[stateright::Property<M>],
    wall_seconds: f64,
) -> Report
where
    M: Spec,
    M::State: Clone + Debug + Hash + Send + Sync + 'static,
    M::Action: Clone + Debug + Send + Sync + 'static,
    C: Checker<M>,
{
    let model = checker.model();
    let reports = properties
        .iter()
        .map(|property| {
            let path = checker.discovery(property.name);
            let always = property.expectation == Expectation::Always;
            let trace = path.map(|path| {
                let mut trace = String::new();
                let steps = path.into_vec();
                let _ = writeln!(trace, "  trace ({} steps):", steps.len() - 1);
                let mut last = None;
                for (index, (state, action)) in steps.into_iter().enumerate() {
                    match action {
                        Some(action) => {
                            let _ = writeln!(trace, "  {:>3}. {}", index + 1, model.format_action(&action));
                        }
                        None => last = Some(state),
                    }
                }
                if let Some(state) = last {
                    let _ = write!(trace, "  final state:\n{}", model.describe_state(&state));
                }
                trace.trim_end().to_string()
            });
            PropertyReport {
                name: property.name,
                kind: if always { "always" } else { "sometimes" },
                ok: always == trace.is_none(),
                trace,
            }
        })
        .collect();
    Report {
        model: name,
        bounds,
        distinct_states: checker.unique_state_count(),
        states_generated: checker.state_count(),
        max_depth: checker.max_depth(),
        wall_seconds,
        properties: reports,
    }
}
