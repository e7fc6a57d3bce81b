//! The PASS/FAIL report the examples print. Every line comes from a real check; an example exits
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
