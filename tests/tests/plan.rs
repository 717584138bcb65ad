//! `turbonet plan --machines`: a lab planned over machines as a user runs
//! it (no root, nothing created).

use serde_json::Value;
use turbonet_tests::{run, text, workspace};

fn scenario(name: &str) -> String {
    workspace()
        .join("scenarios")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_pods_over_four_machines_print_a_table_and_json_that_agree() {
    let file = scenario("hpn-pods.toml");
    let out = run(&["plan", "--machines", "4", &file]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for expected in [
        "92 nodes and 248 links over 4 machines",
        "cut links: ",
        "│ tor-agg",
        "│ 0 - 1",
        "a random placement of the nodes",
        "balance: namespaces",
    ] {
        assert!(shown.contains(expected), "{expected}: {shown}");
    }

    let json = run(&["plan", "--machines", "4", "--json", &file]);
    assert!(json.status.success(), "{}", text(&json));
    let plan: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(plan["lab"], "hpnpods");
    assert_eq!(plan["parts"].as_array().unwrap().len(), 4);
    let hash = plan["hash"].as_str().unwrap();
    assert!(shown.contains(&format!("partition {hash}")), "{shown}");
    let cut = plan["cut_links"].as_array().unwrap();
    assert_eq!(cut[0]["vni"], 1);
    assert!(
        shown.contains(&format!("cut links: {} of 248", cut.len())),
        "{shown}"
    );
    // Every worker computes the same plan.
    let again = run(&["plan", "--machines", "4", "--json", &file]);
    assert_eq!(again.stdout, json.stdout);
}

#[test]
fn what_cannot_be_planned_over_machines_is_refused_with_the_reason() {
    let triangle = scenario("custom-triangle.toml");
    for (args, expected) in [
        (
            vec!["--machines", "0"],
            "not a number of machines: 1 or more",
        ),
        (vec!["--machines", "4"], "use at most 3 machines"),
        (
            vec!["--machines", "2", "--switch", "s1=64x100G"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["plan"];
        all.extend(args);
        all.push(&triangle);
        let out = run(&all);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(expected), "{expected}: {}", text(&out));
    }
    let out = run(&[
        "plan",
        "--machines",
        "2",
        &scenario("fat-tree-k4-soft.toml"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("only a netns lab"), "{}", text(&out));
    let out = run(&["plan", "--machines", "2", "no-such-scenario.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot read"), "{}", text(&out));
}
