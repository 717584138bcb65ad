//! A [`Picture`] as SVG (with the `svg` crate) or as Graphviz text.

use std::fmt::Write as _;

use svg::Document;
use svg::node::element::{Group, Line, Rectangle, Text, Title};
use turbonet_topo::{Fabric, Role};

use crate::{Edge, Item, Picture, State};

/// Rail colours (Tableau 10), rail `r` takes colour `r % 10`.
const RAILS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
    "#e15759", "#bab0ac",
];
const DOWN: &str = "#d62728";
const IDLE: &str = "#9aa0a6";

const ROW_HEIGHT: f64 = 150.0;
const MARGIN: f64 = 40.0;
const BOX_HEIGHT: f64 = 34.0;

/// Width of a box: a node's name, or a group's two lines.
fn box_width(item: &Item) -> f64 {
    if item.is_group() { 92.0 } else { 64.0 }
}

/// A box's fill: ToRs by rail, other tiers by role.
fn fill(item: &Item) -> &'static str {
    match (item.role, item.rail) {
        (_, Some(r)) => RAILS[r as usize % RAILS.len()],
        (Role::Core, _) => "#3b4a6b",
        (Role::Agg | Role::Spine, _) => "#5b6f95",
        (Role::Tor | Role::Edge | Role::Leaf | Role::Switch, _) => "#7f93b8",
        (Role::Host, _) => "#c9d2e3",
    }
}

/// The text on a box: its node's name, or its count and what they share.
fn label(item: &Item, fabric: &Fabric) -> (String, Option<String>) {
    if !item.is_group() {
        return (fabric.node(item.members[0]).name.clone(), None);
    }
    let mut shared = Vec::new();
    if let Some(p) = item.pod {
        shared.push(format!("pod {p}"));
    }
    if let Some(p) = item.plane {
        shared.push(format!("plane {p}"));
    }
    if let Some(r) = item.rail {
        shared.push(format!("rail {r}"));
    }
    (
        format!("{} {}", item.members.len(), plural(item.role)),
        (!shared.is_empty()).then(|| shared.join(" ")),
    )
}

fn plural(role: Role) -> &'static str {
    match role {
        Role::Host => "hosts",
        Role::Tor => "ToRs",
        Role::Edge => "edges",
        Role::Leaf => "leaves",
        Role::Agg => "aggs",
        Role::Spine => "spines",
        Role::Core => "cores",
        Role::Switch => "switches",
    }
}

/// Where every box is: its centre, row by row; and the picture's width.
fn places(picture: &Picture) -> (Vec<Vec<(f64, f64)>>, f64) {
    let gap = 14.0;
    let widths: Vec<f64> = picture
        .rows
        .iter()
        .map(|row| row.iter().map(|i| box_width(i) + gap).sum::<f64>())
        .collect();
    let width = widths.iter().copied().fold(400.0, f64::max) + 2.0 * MARGIN;
    let places = picture
        .rows
        .iter()
        .zip(&widths)
        .enumerate()
        .map(|(r, (row, used))| {
            // Spread the row over the width: extra space between boxes.
            let spare = (width - 2.0 * MARGIN - used) / row.len().max(1) as f64;
            let y = MARGIN + 30.0 + r as f64 * ROW_HEIGHT + BOX_HEIGHT / 2.0;
            let mut x = MARGIN;
            row.iter()
                .map(|item| {
                    let w = box_width(item) + gap + spare;
                    let centre = x + w / 2.0;
                    x += w;
                    (centre, y)
                })
                .collect()
        })
        .collect();
    (places, width)
}

/// What a line looks like: how many of its links are down, and its
/// busiest link's load.
fn edge_state(edge: &Edge, state: &State) -> (usize, Option<f64>) {
    let down = edge
        .links
        .iter()
        .filter(|l| state.links_down.contains(l))
        .count();
    let load = edge
        .links
        .iter()
        .filter_map(|l| state.load.get(l).copied())
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    (down, load)
}

/// A load from 0 to 1 as a colour from grey through orange to red.
/// The colour of a link at `load` (0 to 1): grey through orange to red.
pub fn load_colour(load: f64) -> String {
    let t = load.clamp(0.0, 1.0);
    let (r, g, b) = if t < 0.5 {
        let u = t * 2.0;
        (
            154.0 + u * (242.0 - 154.0),
            160.0 + u * (142.0 - 160.0),
            166.0 - u * 123.0,
        )
    } else {
        let u = (t - 0.5) * 2.0;
        (242.0 - u * 28.0, 142.0 - u * 103.0, 43.0 - u * 3.0)
    };
    format!("#{:02x}{:02x}{:02x}", r as u8, g as u8, b as u8)
}

/// A line's colour: red when all its links are down, else by load when
/// known, else a host's links by the rail of their ToRs, else grey.
fn edge_colour(picture: &Picture, edge: &Edge, down: usize, load: Option<f64>) -> String {
    if down == edge.links.len() {
        return DOWN.to_owned();
    }
    // Below 1% a link is idle (keepalives, ARP).
    if let Some(l) = load.filter(|l| *l >= 0.01) {
        return load_colour(l);
    }
    let (upper, lower) = (picture.item(edge.upper), picture.item(edge.lower));
    match (upper.rail, lower.role) {
        (Some(r), Role::Host) => RAILS[r as usize % RAILS.len()].to_owned(),
        _ => IDLE.to_owned(),
    }
}

/// The picture as an SVG document: boxes with tooltips (`<title>`), ids
/// `node-NAME` (single nodes) and `link-NAME` (single links) for scripts.
pub fn svg(picture: &Picture, fabric: &Fabric, state: &State, title: &str) -> String {
    let (places, width) = places(picture);
    let height =
        MARGIN + 30.0 + (picture.rows.len().max(1) - 1) as f64 * ROW_HEIGHT + BOX_HEIGHT + 50.0;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, width as i64, height as i64))
        .set("width", width as i64)
        .set("height", height as i64)
        .set("font-family", "sans-serif")
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(
            Text::new(title)
                .set("x", MARGIN)
                .set("y", MARGIN)
                .set("font-size", 18)
                .set("font-weight", "bold"),
        );
    // Lines first, under the boxes.
    let mut lines = Group::new().set("id", "links");
    for edge in &picture.edges {
        let (a, b) = (
            places[edge.upper.0][edge.upper.1],
            places[edge.lower.0][edge.lower.1],
        );
        let (down, load) = edge_state(edge, state);
        let n = edge.links.len();
        let colour = edge_colour(picture, edge, down, load);
        let mut line = Line::new()
            .set("x1", a.0)
            .set("y1", a.1 + BOX_HEIGHT / 2.0)
            .set("x2", b.0)
            .set("y2", b.1 - BOX_HEIGHT / 2.0)
            .set("stroke", colour)
            .set("stroke-width", 1.0 + (n as f64).log2().max(0.0) * 0.8)
            .set("stroke-opacity", if n > 1 { 0.8 } else { 0.6 });
        if down > 0 {
            line = line.set("stroke-dasharray", "5,3");
        }
        let names: Vec<&str> = edge
            .links
            .iter()
            .map(|&l| fabric.link(l).name.as_str())
            .collect();
        let mut tip = match names.as_slice() {
            [one] => (*one).to_owned(),
            many => format!("{} links ({} ...)", many.len(), many[0]),
        };
        if down > 0 {
            let _ = write!(tip, ", {down} down");
        }
        if let Some(l) = load {
            let _ = write!(tip, ", load {:.0}%", l * 100.0);
        }
        let mut group = Group::new().add(Title::new(tip)).add(line);
        if let [one] = names.as_slice() {
            group = group.set("id", format!("link-{one}"));
        }
        if n > 1 {
            group = group.add(
                Text::new(n.to_string())
                    .set("x", (a.0 + b.0) / 2.0)
                    .set("y", (a.1 + b.1) / 2.0)
                    .set("font-size", 9)
                    .set("fill", "#555")
                    .set("text-anchor", "middle"),
            );
        }
        lines = lines.add(group);
    }
    doc = doc.add(lines);
    let mut boxes = Group::new().set("id", "nodes");
    for (r, row) in picture.rows.iter().enumerate() {
        for (i, item) in row.iter().enumerate() {
            let (x, y) = places[r][i];
            let w = box_width(item);
            let down = item
                .members
                .iter()
                .filter(|m| state.nodes_down.contains(m))
                .count();
            let (top, bottom) = label(item, fabric);
            let mut tip = top.clone();
            if let Some(b) = &bottom {
                let _ = write!(tip, " ({b})");
            }
            if down > 0 {
                let _ = write!(tip, ", {down} down");
            }
            let dark =
                matches!(item.role, Role::Core | Role::Agg | Role::Spine) && item.rail.is_none();
            let mut g = Group::new().add(Title::new(tip)).add(
                Rectangle::new()
                    .set("x", x - w / 2.0)
                    .set("y", y - BOX_HEIGHT / 2.0)
                    .set("width", w)
                    .set("height", BOX_HEIGHT)
                    .set("rx", 4)
                    .set("fill", fill(item))
                    .set("stroke", if down > 0 { DOWN } else { "#333" })
                    .set("stroke-width", if down > 0 { 3 } else { 1 }),
            );
            if !item.is_group() {
                g = g.set("id", format!("node-{top}"));
            }
            let text_y = if bottom.is_some() { y - 3.0 } else { y + 4.0 };
            g = g.add(
                Text::new(top)
                    .set("x", x)
                    .set("y", text_y)
                    .set("font-size", if item.is_group() { 11 } else { 9 })
                    .set("fill", if dark { "white" } else { "black" })
                    .set("text-anchor", "middle"),
            );
            if let Some(b) = bottom {
                g = g.add(
                    Text::new(b)
                        .set("x", x)
                        .set("y", y + 10.0)
                        .set("font-size", 8)
                        .set("fill", if dark { "white" } else { "black" })
                        .set("text-anchor", "middle"),
                );
            }
            if down > 0 {
                g = g.add(
                    Line::new()
                        .set("x1", x - w / 2.0)
                        .set("y1", y - BOX_HEIGHT / 2.0)
                        .set("x2", x + w / 2.0)
                        .set("y2", y + BOX_HEIGHT / 2.0)
                        .set("stroke", DOWN)
                        .set("stroke-width", 2),
                );
            }
            boxes = boxes.add(g);
        }
    }
    doc = doc.add(boxes);
    doc = doc.add(
        Text::new(footnote(picture, fabric))
            .set("x", MARGIN)
            .set("y", height - 20.0)
            .set("font-size", 11)
            .set("fill", "#555"),
    );
    doc.to_string()
}

/// What the picture leaves out, and how to open it up.
fn footnote(picture: &Picture, fabric: &Fabric) -> String {
    let mut s = format!(
        "{} of {} nodes, {} of {} links",
        picture.shown,
        fabric.nodes.len(),
        picture.links,
        fabric.links.len()
    );
    if picture.summarised {
        s.push_str("; wide tiers grouped (narrow with --pod, --segment, --plane)");
    }
    s.push_str("; red: down, orange to red: load");
    s
}

/// The picture as a Graphviz graph (`dot -Tsvg`): a rank per tier, the
/// same boxes and lines as the SVG.
pub fn dot(picture: &Picture, fabric: &Fabric, state: &State, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "graph \"{}\" {{", title.replace('"', "'"));
    let _ = writeln!(
        out,
        "  rankdir=TB; splines=false; nodesep=0.15; ranksep=1.2;"
    );
    let _ = writeln!(
        out,
        "  node [shape=box, style=\"rounded,filled\", fontname=\"sans-serif\", fontsize=9];"
    );
    let _ = writeln!(out, "  edge [fontname=\"sans-serif\", fontsize=8];");
    let id = |r: usize, i: usize| format!("n{r}_{i}");
    for (r, row) in picture.rows.iter().enumerate() {
        let _ = writeln!(out, "  {{ rank=same;");
        for (i, item) in row.iter().enumerate() {
            let (top, bottom) = label(item, fabric);
            let text = match bottom {
                Some(b) => format!("{top}\\n{b}"),
                None => top,
            };
            let down = item.members.iter().any(|m| state.nodes_down.contains(m));
            let _ = writeln!(
                out,
                "    {} [label=\"{text}\", fillcolor=\"{}\"{}];",
                id(r, i),
                fill(item),
                if down {
                    format!(", color=\"{DOWN}\", penwidth=3")
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(out, "  }}");
    }
    for edge in &picture.edges {
        let (down, load) = edge_state(edge, state);
        let n = edge.links.len();
        let colour = edge_colour(picture, edge, down, load);
        let mut attrs = format!(
            "color=\"{colour}\", penwidth={:.1}",
            1.0 + (n as f64).log2().max(0.0) * 0.8
        );
        if n > 1 {
            let _ = write!(attrs, ", label=\"{n}\"");
        }
        if down > 0 {
            attrs.push_str(", style=dashed");
        }
        let _ = writeln!(
            out,
            "  {} -- {} [{attrs}];",
            id(edge.upper.0, edge.upper.1),
            id(edge.lower.0, edge.lower.1)
        );
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Filter, MAX_PER_ROW, layout};

    #[test]
    fn the_svg_marks_what_is_down_and_names_nodes_and_links() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scenarios/fat-tree-k4.toml"
        ))
        .unwrap();
        let lab = turbonet_topo::parse("k4", &text).unwrap();
        let f = &lab.fabric;
        let picture = layout(f, &Filter::default(), MAX_PER_ROW);
        let mut state = State::default();
        let link = f.link_by_name("edge0-0--agg0-0").unwrap().id;
        state.links_down.insert(link);
        state.nodes_down.insert(f.node_by_name("core1").unwrap().id);
        state
            .load
            .insert(f.link_by_name("agg0-0--core0").unwrap().id, 0.9);
        let svg = svg(&picture, f, &state, "k4");
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("id=\"node-core0\""));
        assert!(svg.contains("id=\"link-edge0-0--agg0-0\""));
        assert_eq!(
            svg.matches(DOWN).count(),
            1 + 2,
            "a link, a box and its cross"
        );
        assert!(svg.contains(&load_colour(0.9)));
        let dot = dot(&picture, f, &state, "k4");
        assert!(dot.starts_with("graph \"k4\""));
        assert_eq!(dot.matches(" -- ").count(), f.links.len());
    }

    #[test]
    fn loads_run_from_grey_to_red() {
        assert_eq!(load_colour(0.0), IDLE);
        assert_eq!(load_colour(1.0), "#d62728");
    }
}
