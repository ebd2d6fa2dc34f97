use super::*;

fn key(name: &str) -> Vec<u8> {
    name.as_bytes().to_vec()
}

#[test]
fn write_skew_is_a_two_rw_cycle() {
    let mut graph = DependencyGraph::new();
    // T1 and T2 both read x and y initially; T1 writes x, T2 writes y.
    let t1 =
        CommittedTxn { id: 1, reads: vec![(key("x"), 0), (key("y"), 0)], writes: vec![key("x")], ..Default::default() };
    let t2 =
        CommittedTxn { id: 2, reads: vec![(key("x"), 0), (key("y"), 0)], writes: vec![key("y")], ..Default::default() };
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
    let t2 = CommittedTxn { id: 2, reads: vec![(key("x"), 1)], writes: vec![key("x"), key("y")], ..Default::default() };
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
        (vec![rw(1, 2, "x"), Edge::predicate(2, 3, EdgeKind::Wr, b"y"), rw(3, 1, "z")], AdyaClass::G2Item, "G2-item"),
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
    let t1 = CommittedTxn { id: 1, writes: vec![key("p"), key("q")], deletes: vec![key("q")], ..Default::default() };
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
    let into_t2: Vec<bool> = graph.edges[&1].iter().filter(|edge| edge.to == 2).map(|edge| edge.predicate).collect();
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
        CommittedTxn { id: 1, reads: vec![(key("x"), 0), (key("y"), 0)], writes: vec![key("x")], ..Default::default() },
        CommittedTxn { id: 2, reads: vec![(key("x"), 0), (key("y"), 0)], writes: vec![key("y")], ..Default::default() },
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
