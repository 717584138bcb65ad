//! The tables every verb prints for people (`--json` prints the same data
//! for scripts): rounded boxes, numbers right-aligned, sentences wrapped
//! to the terminal.

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

pub(crate) use turbonet_bench::report::count;

/// A table from a header and rows; columns whose header is in `right` are
/// right-aligned (numbers).
pub(crate) fn table<I, R>(header: &[&str], rows: I, right: &[usize]) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    build(header, rows, right).to_string()
}

/// A table of sentences, as [`table`] but no wider than the terminal: the
/// `prose` columns share what the others leave and wrap between words.
pub(crate) fn prose_table<I, R>(
    header: &[&str],
    rows: I,
    right: &[usize],
    prose: &[usize],
) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    fitted(terminal_width(), header, rows, right, prose)
}

/// [`prose_table`] no wider than `total` columns.
fn fitted<I, R>(total: usize, header: &[&str], rows: I, right: &[usize], prose: &[usize]) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut rows: Vec<Vec<String>> = rows.into_iter().map(|r| r.into_iter().collect()).collect();
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .flat_map(|cell| cell.lines())
            .chain([header[c]])
            .map(textwrap::core::display_width)
            .max()
            .unwrap_or(0)
    };
    let natural: Vec<usize> = (0..header.len()).map(width).collect();
    // Each column has a space either side; the borders one more than the columns.
    let room = total.saturating_sub(3 * header.len() + 1);
    let fixed: usize = (0..header.len())
        .filter(|c| !prose.contains(c))
        .map(|c| natural[c])
        .sum();
    let widths = share(
        room.saturating_sub(fixed),
        &prose.iter().map(|&c| natural[c]).collect::<Vec<_>>(),
    );
    for (&c, &w) in prose.iter().zip(&widths) {
        if w >= natural[c] {
            continue;
        }
        for cell in rows.iter_mut().filter_map(|r| r.get_mut(c)) {
            *cell = cell
                .lines()
                .flat_map(|line| {
                    textwrap::wrap(
                        line,
                        // Between words only: a link's name (`a--b`) stays whole.
                        textwrap::Options::new(w)
                            .word_separator(textwrap::WordSeparator::AsciiSpace)
                            .subsequent_indent("  "),
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    build(header, rows, right).to_string()
}

/// `room` shared between columns that want `wants`: each gets what it
/// wants if it fits, the widest are cut to an even share otherwise
/// (never below 12).
fn share(room: usize, wants: &[usize]) -> Vec<usize> {
    let mut widths = wants.to_vec();
    let mut left = room;
    let mut open: Vec<usize> = (0..wants.len()).collect();
    // Columns narrower than an even share keep their width; the rest split
    // what is left.
    loop {
        let even = left / open.len().max(1);
        let (fit, wide): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| wants[i] <= even);
        if fit.is_empty() || wide.is_empty() {
            for &i in &wide {
                widths[i] = even.max(12);
            }
            return widths;
        }
        left -= fit.iter().map(|&i| wants[i]).sum::<usize>();
        open = wide;
    }
}

/// How wide printed tables may be: `$COLUMNS`, else the terminal's width,
/// else 120 (a log or a pipe).
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
        .unwrap_or(120)
        .max(40)
}

/// The table itself, styled: rounded borders, the `right` columns right-aligned.
fn build<I, R>(header: &[&str], rows: I, right: &[usize]) -> tabled::Table
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut builder = Builder::default();
    builder.push_record(header.iter().map(std::string::ToString::to_string));
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::rounded());
    for &col in right {
        table.modify(Columns::one(col), Alignment::right());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_that_fit_keep_their_width_and_the_widest_share_the_rest() {
        assert_eq!(share(100, &[30, 40]), vec![30, 40]);
        // 20 fits an even share of 60; the other gets what is left.
        assert_eq!(share(60, &[20, 90]), vec![20, 40]);
        assert_eq!(share(60, &[80, 90]), vec![30, 30]);
        // Never narrower than 12, however small the terminal.
        assert_eq!(share(10, &[50]), vec![12]);
    }

    #[test]
    fn prose_wraps_between_words_and_indents_what_it_carries_over() {
        let out = fitted(
            40,
            &["task", "what is still wrong"],
            [[
                "mtu".to_owned(),
                "leaf2--spine1: leaf2's port spine1 has MTU 1500, not 9000\nsecond".to_owned(),
            ]],
            &[],
            &[1],
        );
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert!(out.contains("│ leaf2--spine1: leaf2's port"), "{out}");
        assert!(out.contains("│   spine1 has MTU 1500, not  │"), "{out}");
        assert!(out.contains("│ second"), "{out}");
    }
}
