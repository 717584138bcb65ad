//! JUnit XML for CI: a run's expectations (`junit.xml`) and a graded lab's
//! tasks (`lab check --junit`), one test suite of test cases each.

use std::fmt::Write as _;

/// A test suite.
#[derive(Debug, Clone)]
pub struct Suite<'a> {
    /// Its name.
    pub name: &'a str,
    /// Every case's class name.
    pub classname: &'a str,
    /// Seconds it took.
    pub time: f64,
    /// Inside a `<testsuites>` element that counts the cases too.
    pub wrapped: bool,
    /// Its cases.
    pub cases: Vec<Case>,
}

/// A test case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name.
    pub name: String,
    /// How it went.
    pub outcome: Outcome,
}

/// How a test case went.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// It passed, with what it printed, if anything.
    Passed(Option<String>),
    /// It failed: the failure's message attribute, and its text if any.
    Failed(String, Option<String>),
}

/// The suite as JUnit XML.
pub fn write(suite: &Suite<'_>) -> String {
    let n = suite.cases.len();
    let failures = (suite.cases.iter())
        .filter(|c| matches!(c.outcome, Outcome::Failed(..)))
        .count();
    let mut xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".to_owned();
    let indent = if suite.wrapped {
        let _ = writeln!(xml, "<testsuites tests=\"{n}\" failures=\"{failures}\">");
        "  "
    } else {
        ""
    };
    let _ = writeln!(
        xml,
        "{indent}<testsuite name=\"{}\" tests=\"{n}\" failures=\"{failures}\" time=\"{:.3}\">",
        escape(suite.name),
        suite.time,
    );
    for case in &suite.cases {
        let _ = write!(
            xml,
            "{indent}  <testcase classname=\"{}\" name=\"{}\">",
            escape(suite.classname),
            escape(&case.name)
        );
        match &case.outcome {
            Outcome::Passed(Some(out)) => {
                let _ = writeln!(xml, "<system-out>{}</system-out></testcase>", escape(out));
                continue;
            }
            Outcome::Passed(None) => xml.push('\n'),
            Outcome::Failed(message, None) => {
                let _ = writeln!(
                    xml,
                    "\n{indent}    <failure message=\"{}\"/>",
                    escape(message)
                );
            }
            Outcome::Failed(message, Some(text)) => {
                let _ = writeln!(
                    xml,
                    "\n{indent}    <failure message=\"{}\">{}</failure>",
                    escape(message),
                    escape(text)
                );
            }
        }
        let _ = writeln!(xml, "{indent}  </testcase>");
    }
    let _ = writeln!(xml, "{indent}</testsuite>");
    if suite.wrapped {
        xml.push_str("</testsuites>\n");
    }
    xml
}

/// `s` with XML's special characters in text and attributes escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_nests_its_suite_and_prints_what_passed() {
        let suite = Suite {
            name: "e.toml",
            classname: "lab",
            time: 1.5,
            wrapped: true,
            cases: vec![
                Case {
                    name: "a".into(),
                    outcome: Outcome::Passed(Some("1 < 2".into())),
                },
                Case {
                    name: "b".into(),
                    outcome: Outcome::Failed("\"x\" & y".into(), None),
                },
            ],
        };
        assert_eq!(
            write(&suite),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuites tests=\"2\" failures=\"1\">\n  \
             <testsuite name=\"e.toml\" tests=\"2\" failures=\"1\" time=\"1.500\">\n    \
             <testcase classname=\"lab\" name=\"a\"><system-out>1 &lt; 2</system-out></testcase>\n    \
             <testcase classname=\"lab\" name=\"b\">\n      \
             <failure message=\"&quot;x&quot; &amp; y\"/>\n    \
             </testcase>\n  \
             </testsuite>\n\
             </testsuites>\n"
        );
    }

    #[test]
    fn a_grade_is_one_suite_with_failures_spelt_out() {
        let suite = Suite {
            name: "lab",
            classname: "lab",
            time: 0.25,
            wrapped: false,
            cases: vec![
                Case {
                    name: "t: title".into(),
                    outcome: Outcome::Passed(None),
                },
                Case {
                    name: "u: other".into(),
                    outcome: Outcome::Failed("0 of 2 points".into(), Some("a\nb".into())),
                },
            ],
        };
        assert_eq!(
            write(&suite),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuite name=\"lab\" tests=\"2\" failures=\"1\" time=\"0.250\">\n  \
             <testcase classname=\"lab\" name=\"t: title\">\n  \
             </testcase>\n  \
             <testcase classname=\"lab\" name=\"u: other\">\n    \
             <failure message=\"0 of 2 points\">a\nb</failure>\n  \
             </testcase>\n\
             </testsuite>\n"
        );
    }
}
