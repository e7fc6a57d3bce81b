//! The PASS/FAIL report the examples print, and how they print an outcome. Every line comes from a real check; an example exits
//! non-zero when any claim fails, and its integration test asserts every claim.

/// One checked claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// What is claimed.
    pub what: String,
    /// Whether the check held.
    pub passed: bool,
}

/// The claims of one run, in order.
#[derive(Debug, Default)]
pub struct Claims {
    claims: Vec<Claim>,
}

#[allow(dead_code)]
impl Claims {
    /// Records and prints a claim.
    pub fn check(&mut self, what: impl Into<String>, passed: bool) -> bool {
        let what = what.into();
        println!("  [{}] {what}", if passed { "PASS" } else { "FAIL" });
        self.claims.push(Claim { what, passed });
        passed
    }

    /// Prints a step heading.
    pub fn step(&self, title: &str) {
        println!("\n{title}");
    }

    /// Every claim so far.
    pub fn all(&self) -> &[Claim] {
        &self.claims
    }

    /// The claims that failed.
    pub fn failed(&self) -> Vec<&Claim> {
        self.claims.iter().filter(|c| !c.passed).collect()
    }

    /// Prints the summary and returns the process exit code.
    pub fn finish(&self) -> i32 {
        let failed = self.failed().len();
        println!("\n{} passed, {} failed", self.claims.len() - failed, failed);
        i32::from(failed > 0)
    }
}

/// Prints one outcome on a line: what was tried, the status, and the data or reason code.
#[allow(dead_code)]
pub fn show(what: &str, out: &toolguard::ToolOutcome) {
    let detail = match (out.status, &out.reason) {
        (toolguard::Status::Ok, _) => out.data().map(|v| v.to_string()).unwrap_or_default(),
        (_, Some(r)) => format!("reason={r}"),
        _ => String::new(),
    };
    let replay = if out.replayed { " (replayed)" } else { "" };
    println!(
        "     {what:<46} -> {:<20} {detail}{replay}",
        out.status.as_str()
    );
}

/// The approval id of a `pending_approval` outcome (empty otherwise).
#[allow(dead_code)]
pub fn approval_id(out: &toolguard::ToolOutcome) -> String {
    out.approval
        .as_ref()
        .map(|t| t.approval_id.clone())
        .unwrap_or_default()
}
