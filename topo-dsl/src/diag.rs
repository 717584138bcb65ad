//! Located diagnostics for scenario files.
//!
//! [`ScenarioErrors`] holds every error found in one file. It renders through
//! `miette` (file:line:col, a snippet, and a help line listing the valid
//! choices) and can also be walked error by error for plain or JSON output.

use std::fmt;
use std::ops::Range;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource};
use serde::Serialize;

use crate::suggest;

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScenarioError {
    message: String,
    label: String,
    help: Option<String>,
    #[serde(skip)]
    span: Option<Range<usize>>,
    line_col: Option<(usize, usize)>,
}

impl ScenarioError {
    /// What is wrong, e.g. "`k` must be even".
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Short text shown under the offending value in the snippet.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What would be valid: the valid choices, a "did you mean" suggestion.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// Byte range of the offending text in the file.
    pub fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    /// 1-based line and column (in characters) where the offending text
    /// starts.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        self.line_col
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl Diagnostic for ScenarioError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        None
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.span.clone()?;
        let label = (!self.label.is_empty()).then(|| self.label.clone());
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(label, span.start..span.end),
        )))
    }
}

/// Every error found in one scenario file, with the file's text so they can
/// be rendered with source snippets.
#[derive(Debug)]
pub struct ScenarioErrors {
    origin: String,
    source: NamedSource<String>,
    errors: Vec<ScenarioError>,
}

impl ScenarioErrors {
    /// Number of errors (at least 1).
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Always false: a `ScenarioErrors` holds at least one error.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors, in file order.
    pub fn iter(&self) -> std::slice::Iter<'_, ScenarioError> {
        self.errors.iter()
    }

    /// The file name given to [`crate::parse`].
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Renders all errors as miette's graphical report without colors, for
    /// terminals that do not want ANSI codes and for golden tests.
    pub fn render_plain(&self, width: usize) -> String {
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(width)
            .with_links(false);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = handler.render_report(&mut out, self);
        out
    }
}

impl<'a> IntoIterator for &'a ScenarioErrors {
    type Item = &'a ScenarioError;
    type IntoIter = std::slice::Iter<'a, ScenarioError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errors.as_slice() {
            [one] => f.write_str(&one.message),
            many => write!(f, "{} errors in scenario `{}`", many.len(), self.origin),
        }
    }
}

impl std::error::Error for ScenarioErrors {}

impl Diagnostic for ScenarioErrors {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        None
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.errors.as_slice() {
            [one] => Diagnostic::help(one),
            _ => None,
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self.errors.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.errors.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|e| e as &dyn Diagnostic))),
        }
    }
}

/// Collects errors while a file is checked.
#[derive(Debug)]
pub(crate) struct Diags<'t> {
    text: &'t str,
    errors: Vec<ScenarioError>,
}

impl<'t> Diags<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Diags {
            text,
            errors: Vec::new(),
        }
    }

    /// Records an error at `span` (clamped to the text).
    pub(crate) fn error(
        &mut self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ErrorBuilder<'_> {
        let span = span.map(|s| {
            let mut start = s.start.min(self.text.len());
            while !self.text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = s.end.clamp(start, self.text.len());
            while !self.text.is_char_boundary(end) {
                end += 1;
            }
            start..end
        });
        let line_col = span.as_ref().map(|s| line_col(self.text, s.start));
        self.errors.push(ScenarioError {
            message: message.into(),
            label: String::new(),
            help: None,
            span,
            line_col,
        });
        ErrorBuilder {
            error: self.errors.last_mut().expect("just pushed"),
        }
    }

    /// 1-based line and column of a byte offset.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        line_col(self.text, offset)
    }

    pub(crate) fn count(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn finish(mut self, origin: &str) -> Result<(), ScenarioErrors> {
        if self.errors.is_empty() {
            return Ok(());
        }
        // File order; errors without a location last.
        self.errors
            .sort_by_key(|e| e.span.as_ref().map_or(usize::MAX, |s| s.start));
        self.errors.dedup();
        Err(ScenarioErrors {
            origin: origin.to_owned(),
            source: NamedSource::new(origin, self.text.to_owned()),
            errors: self.errors,
        })
    }
}

/// Adds a label and help to a just-recorded error.
#[derive(Debug)]
pub(crate) struct ErrorBuilder<'a> {
    error: &'a mut ScenarioError,
}

impl ErrorBuilder<'_> {
    pub(crate) fn label(self, label: impl Into<String>) -> Self {
        self.error.label = label.into();
        self
    }

    pub(crate) fn help(self, help: impl Into<String>) -> Self {
        let help = help.into();
        if !help.is_empty() {
            self.error.help = Some(help);
        }
        self
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    (line, col)
}

/// "did you mean `x`? valid {what}: a, b, c".
pub(crate) fn choices_help(input: &str, what: &str, choices: &[&str]) -> String {
    let list = choices.join(", ");
    match suggest::best_guess(input, choices.iter().copied()) {
        Some(guess) => format!("did you mean `{guess}`? valid {what}: {list}"),
        None => format!("valid {what}: {list}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 10), (2, 4));
    }
}
