//! `JUnit` through Maven Surefire and through Gradle.

use super::lines::Line;
use super::{Sink, Slot};

const BODY_LINES: u32 = 200;
/// Frames of the test framework and the JDK, passed over for the test's own place.
const FRAMEWORK: [&str; 8] =
    ["org.junit", "org.opentest4j", "java.", "jdk.", "sun.", "org.apache.maven", "junit.", "org.gradle"];

/// Surefire: `[ERROR] com.example.CalcTest.testAdd -- Time elapsed: 0.01 s <<< FAILURE!` (or the
/// older `[ERROR] testAdd(com.example.CalcTest)  Time elapsed: 0.01 s  <<< FAILURE!`), the
/// exception's line, and the stack. Gradle: `CalcTest > testAdd() FAILED`, the exception
/// indented under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Jvm {
    current: Option<Slot>,
    gradle: bool,
    left: u32,
}

impl Jvm {
    pub(super) fn line(&mut self, line: &Line<'_>, sink: &mut Sink) {
        let text = line.text;
        if let Some(name) = surefire_failure(text) {
            let slot = sink.fail("maven surefire", &name);
            self.start(slot, false, sink);
            return;
        }
        if let Some(name) = text.strip_suffix(" FAILED")
            && name.contains(" > ")
            && !name.starts_with("> ")
            && line.indent() == 0
        {
            let slot = sink.fail("gradle", name);
            self.start(slot, true, sink);
            return;
        }
        let Some(slot) = self.current else { return };
        self.left = self.left.saturating_sub(1);
        let trimmed = line.trimmed;
        if self.left == 0
            || trimmed.is_empty()
            || text.starts_with('[')
            || (self.gradle && line.indent() == 0)
        {
            self.current = None;
            return;
        }
        if let Some(frame) = trimmed.strip_prefix("at ") {
            if !FRAMEWORK.iter().any(|framework| frame.starts_with(framework)) {
                let place = frame.rsplit_once('(').map_or(frame, |(_, inside)| inside.trim_end_matches(')'));
                sink.locate(slot, place);
            }
            return;
        }
        if let Some((exception, place)) = trimmed.rsplit_once(" at ")
            && self.gradle
            && place.contains(':')
        {
            sink.detail(slot, exception);
            sink.locate(slot, place);
            return;
        }
        if !trimmed.starts_with("...") {
            sink.detail(slot, trimmed);
        }
    }

    fn start(&mut self, slot: Slot, gradle: bool, sink: &Sink) {
        self.current = sink.wants_details(slot).then_some(slot);
        self.gradle = gradle;
        self.left = BODY_LINES;
    }

    pub(super) fn capturing(&self) -> bool {
        self.current.is_some()
    }
}

/// The test's name in a Surefire failure line: `com.example.CalcTest.testAdd`.
fn surefire_failure(text: &str) -> Option<String> {
    let rest = text.strip_prefix("[ERROR] ")?;
    if !(rest.ends_with("<<< FAILURE!") || rest.ends_with("<<< ERROR!")) || rest.starts_with("Tests run:") {
        return None;
    }
    let (test, _) = rest.split_once(" Time elapsed")?;
    let test = test.trim().trim_end_matches("--").trim();
    // 2.x: `testAdd(com.example.CalcTest)`.
    if let Some((method, class)) = test.split_once('(')
        && let Some(class) = class.strip_suffix(')')
        && class.contains('.')
        && !method.contains('.')
    {
        return Some(format!("{class}.{method}"));
    }
    Some(test.to_string())
}
