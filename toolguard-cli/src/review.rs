//! The report of `toolguard policy check` against an upstream: the tools the policy would
//! refuse at load, each reason with the policy lines that fix it, then what guards every tool
//! (risk, egress, approval) and every field (kind, role, bounds, protection) as tables.

use toolguard::policy::{Policy, Review, ToolReview, ToolState};

/// Prints `review` of `policy`; returns whether loading would fail.
pub(crate) fn print(policy: &Policy, review: &Review) -> bool {
    let file = policy.file().display();
    let named = |exposed: bool| {
        let names: Vec<&str> = review
            .tools
            .iter()
            .filter(|t| match t.state {
                ToolState::Exposed(_) => exposed,
                ToolState::Hidden => !exposed,
                _ => false,
            })
            .map(|t| t.name.as_str())
            .collect();
        names.join(", ")
    };
    println!(
        "{file}: checked against the upstream, revision {}; exposed: {}; hidden: {}",
        policy.revision(),
        named(true),
        named(false)
    );
    for tool in &review.tools {
        print_problem(policy, tool);
    }
    println!();
    print_table(&tool_rows(review));
    println!();
    print_table(&field_rows(review));
    let refused = review.refuses();
    if refused {
        eprintln!("{file}: the proxy would refuse to start: fix the tools listed above");
    }
    refused
}

/// A refused or missing tool: each reason, with its fix.
fn print_problem(policy: &Policy, tool: &ToolReview) {
    let at = |line: Option<usize>| match line {
        Some(l) => format!("{}:{l}", policy.file().display()),
        None => policy.file().display().to_string(),
    };
    match &tool.state {
        ToolState::Refused(reasons) => {
            eprintln!(
                "{}: tool `{}` would be refused ({} reason(s), each with its fix on standard output)",
                at(tool.line),
                tool.name,
                reasons.len()
            );
            println!("REFUSED {} ({})", tool.name, at(tool.line));
            for r in reasons {
                let field = r
                    .field
                    .as_deref()
                    .map(|f| format!("field `{f}`: "))
                    .unwrap_or_default();
                println!("  - {field}{}", r.message);
                if let Some(fix) = &r.fix {
                    println!("    fix:");
                    for line in fix.lines() {
                        println!("      {line}");
                    }
                }
            }
        }
        ToolState::NotOffered(offered) => {
            eprintln!(
                "{}: tool `{}` is not offered by the upstream server; it offers: {}",
                at(tool.line),
                tool.name,
                offered.join(", ")
            );
            println!(
                "REFUSED {} ({}): the upstream does not offer it; it offers: {}",
                tool.name,
                at(tool.line),
                offered.join(", ")
            );
            println!(
                "    fix: remove `[tools.{}]`, or correct its name",
                tool.name
            );
        }
        _ => {}
    }
}

fn state_of(tool: &ToolReview) -> &'static str {
    match tool.state {
        ToolState::Exposed(_) => "exposed",
        ToolState::Hidden => "hidden",
        ToolState::Refused(_) => "REFUSED",
        ToolState::NotOffered(_) => "not offered",
        _ => "?",
    }
}

fn tool_rows(review: &Review) -> Vec<Vec<String>> {
    let head = ["tool", "state", "risk", "egress", "approval"];
    let mut rows = vec![head.map(str::to_owned).to_vec()];
    for t in &review.tools {
        let g = &t.guard;
        rows.push(vec![
            t.name.clone(),
            state_of(t).to_owned(),
            or_dash(&g.risk),
            or_dash(&g.egress),
            or_dash(&g.approval),
        ]);
    }
    rows
}

fn field_rows(review: &Review) -> Vec<Vec<String>> {
    let head = ["tool", "field", "kind", "role", "bounds", "protection"];
    let mut rows = vec![head.map(str::to_owned).to_vec()];
    for t in &review.tools {
        for f in &t.guard.fields {
            rows.push(vec![
                t.name.clone(),
                f.name.clone(),
                f.kind.clone(),
                f.role.clone(),
                f.bounds.clone(),
                f.protection.clone(),
            ]);
        }
    }
    rows
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s.to_owned()
    }
}

/// Prints `rows` (the first is the header) in aligned columns.
fn print_table(rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}
