//! "Did you mean": the candidates closest to a misspelt word.
//!
//! Two measures share one core (`likely_typos`): which candidates are
//! close enough to be a likely typo, not a guess.
//! - [`closest`] ranks names by edit distance, up to three: the "close
//!   names" of diagnostics and the CLI's lookups. On generated names such
//!   as `edge0-0` or `h0-1-1` a typo is a character or two, and edits
//!   rank the name it came from first (`edge9-0` -> `edge0-0`).
//! - `best_guess` picks one candidate by Jaro-Winkler similarity, which
//!   weighs a shared beginning most: the "did you mean `x`?" of keywords
//!   (keys, kinds, modes, ...; `hold` -> `hold_time`, 5 edits away) and of
//!   the names in `[[topology.links]]` and `[[external]]`.
//!
//! Neither measure can replace the other without changing diagnostics
//! that the golden files pin: edit distance loses `hold` -> `hold_time`
//! and guesses `r1` for `r3`; Jaro-Winkler reorders most lists of close
//! names and drops `edge0-0` for `edge9-0`.

/// Up to three of `candidates` closest to `name` by edit distance, best
/// first; only those within half the name's length (at least 2 edits), so
/// a suggestion is a likely typo, not a guess.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = name.len().max(4) / 2;
    let mut scored: Vec<(usize, &str)> = likely_typos(candidates, |c| {
        let edits = strsim::levenshtein(name, c);
        (edits <= limit).then_some(edits)
    })
    .collect();
    // Equally close names in alphabetical order.
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

/// The one of `choices` most like `input` by Jaro-Winkler similarity (the
/// last of equally close ones), if it is at least 0.8.
pub(crate) fn best_guess<'a>(
    input: &str,
    choices: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    likely_typos(choices, |c| {
        let similarity = strsim::jaro_winkler(input, c);
        (similarity >= 0.8).then_some(similarity)
    })
    .max_by(|a, b| a.0.total_cmp(&b.0))
    .map(|(_, c)| c)
}

/// Every candidate that `measure` finds close enough to be a likely typo
/// (`Some(score)`), with its score, in the order of `candidates`.
fn likely_typos<'a, S>(
    candidates: impl IntoIterator<Item = &'a str>,
    measure: impl Fn(&str) -> Option<S>,
) -> impl Iterator<Item = (S, &'a str)> {
    candidates
        .into_iter()
        .filter_map(move |c| Some((measure(c)?, c)))
}

#[cfg(test)]
mod tests {
    use super::{best_guess, closest, did_you_mean};

    #[test]
    fn suggests_close_names_best_first() {
        let names = ["edge0-0", "edge0-1", "agg0-0", "core0"];
        assert_eq!(closest("edge0-2", names), ["edge0-0", "edge0-1"]);
        assert_eq!(closest("cor0", names), ["core0"]);
        assert!(closest("spine7", names).is_empty());
        assert_eq!(did_you_mean("cor0", names), " (did you mean core0?)");
        assert_eq!(did_you_mean("spine7", names), "");
    }

    #[test]
    fn guesses_keywords_from_their_beginning() {
        let kinds = ["fat-tree", "leaf-spine", "hpn", "custom"];
        assert_eq!(best_guess("leafspine", kinds), Some("leaf-spine"));
        assert_eq!(best_guess("zzz", kinds), None);
        let keys = ["mode", "agent", "hold_time", "keepalive", "connect_retry"];
        assert_eq!(best_guess("hold", keys), Some("hold_time"));
        assert!(closest("hold", keys).is_empty());
        assert_eq!(best_guess("r3", ["r1", "r2"]), None);
        assert_eq!(closest("r3", ["r1", "r2"]), ["r1", "r2"]);
    }
}
