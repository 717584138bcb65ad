//! "Did you mean": the names closest to a misspelt one.

/// Up to three of `candidates` closest to `name` by edit distance, best
/// first; only those within half the name's length (at least 2 edits), so a
/// suggestion is a likely typo, not a guess.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = name.len().max(4) / 2;
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// `" (did you mean X?)"` for a misspelt `name`, when one of `candidates`
/// is close; empty otherwise. Meant to follow "no link foo--bar".
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates)
        .first()
        .map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{closest, did_you_mean};

    #[test]
    fn suggests_close_names_best_first() {
        let names = ["edge0-0", "edge0-1", "agg0-0", "core0"];
        assert_eq!(closest("edge0-2", names), ["edge0-0", "edge0-1"]);
        assert_eq!(closest("cor0", names), ["core0"]);
        assert!(closest("spine7", names).is_empty());
        assert_eq!(did_you_mean("cor0", names), " (did you mean core0?)");
        assert_eq!(did_you_mean("spine7", names), "");
    }
}
