//! What a benchmark reports: lines of text and tables, in order, for the
//! command line to lay out.

/// One part of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A line of text.
    Text(String),
    /// A table.
    Table(Table),
}

/// A table: its header, its rows, and which columns align right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Cells, a row at a time.
    pub rows: Vec<Vec<String>>,
    /// Columns (from 0) that hold numbers and align right.
    pub right: Vec<usize>,
}

/// A benchmark's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Its parts, in order.
    pub items: Vec<Item>,
}

impl Report {
    /// Adds a line of text.
    pub fn text(&mut self, text: impl Into<String>) {
        self.items.push(Item::Text(text.into()));
    }

    /// Adds a table.
    pub fn table(
        &mut self,
        header: &[&str],
        rows: impl IntoIterator<Item = Vec<String>>,
        right: &[usize],
    ) {
        self.items.push(Item::Table(Table {
            header: header.iter().map(|&h| h.to_owned()).collect(),
            rows: rows.into_iter().collect(),
            right: right.to_vec(),
        }));
    }
}

/// `1234567` as `1,234,567`.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(16_256), "16,256");
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
