//! Nodes and links by the names users type, or a [`Error::NotFound`] that
//! names the lab and the closest names.

use turbonet_topo::experiment::Job;
use turbonet_topo::suggest::did_you_mean;
use turbonet_topo::{Lab, Link, Node};

use crate::error::{Error, Result};

/// Node `name` of `lab`.
pub fn node<'a>(lab: &'a Lab, name: &str) -> Result<&'a Node> {
    lab.fabric.node_by_name(name).ok_or_else(|| {
        Error::NotFound(format!(
            "lab {} has no node {name}{}",
            lab.name,
            did_you_mean(name, lab.fabric.nodes.iter().map(|n| n.name.as_str()))
        ))
    })
}

/// Job `name` of `lab` (`[[job]]`).
pub fn job<'a>(lab: &'a Lab, name: &str) -> Result<&'a Job> {
    lab.jobs.iter().find(|j| j.name == name).ok_or_else(|| {
        let hint = if lab.jobs.is_empty() {
            " (its scenario declares no `[[job]]`)".to_owned()
        } else {
            did_you_mean(name, lab.jobs.iter().map(|j| j.name.as_str()))
        };
        Error::NotFound(format!("lab {} has no job {name}{hint}", lab.name))
    })
}

/// Link `name` of `lab`; `b--a` finds `a--b`.
pub fn link<'a>(lab: &'a Lab, name: &str) -> Result<&'a Link> {
    let fabric = &lab.fabric;
    if let Some(link) = fabric.link_by_name(name) {
        return Ok(link);
    }
    if let Some((a, b)) = name.split_once("--")
        && let Some(link) = fabric.link_by_name(&format!("{b}--{a}"))
    {
        return Ok(link);
    }
    let hint = match did_you_mean(name, fabric.links.iter().map(|l| l.name.as_str())) {
        hint if hint.is_empty() => " (`turbonet show links` lists them)".to_owned(),
        hint => hint,
    };
    Err(Error::NotFound(format!(
        "lab {} has no link {name}{hint}",
        lab.name
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> Lab {
        turbonet_topo::parse(
            "t.toml",
            "[lab]\nname = \"t\"\n[topology]\nkind = \"fat-tree\"\nk = 4\n",
        )
        .unwrap()
    }

    #[test]
    fn links_are_found_either_way_round_and_misspellings_get_a_hint() {
        let lab = lab();
        let link = link(&lab, "agg0-0--edge0-0").unwrap();
        assert_eq!(link.name, "edge0-0--agg0-0");
        let e = super::link(&lab, "edge0-0--agg0-9").unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::NotFound);
        assert!(e.to_string().contains("did you mean"), "{e}");
        let e = node(&lab, "cor0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "lab t has no node cor0 (did you mean core0?)"
        );
    }
}
