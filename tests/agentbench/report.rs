//! The per-domain figures of a replay and the table `BENCHMARKS.md` shows.

use std::fmt::Write;

use toolguard::Status;

use super::Mode;
use super::replay::{DomainRuns, Run};

/// The figures of one domain in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// User tasks.
    pub user_tasks: usize,
    /// User tasks done without a human, alone.
    pub clean_done: usize,
    /// (user task × injection task) pairs.
    pub pairs: usize,
    /// Pairs where a result the agent read carried the planted instruction.
    pub reached: usize,
    /// Of those, pairs where the attacker's goal was not reached.
    pub stopped: usize,
    /// Pairs where the user task was done without a human.
    pub done_under_attack: usize,
    /// Attacker calls made, and how many of them the pipeline held for a human.
    pub attacker_calls: usize,
    /// Attacker calls held (`pending_approval`).
    pub attacker_held: usize,
}

impl Figures {
    /// Counts the runs of one domain.
    pub fn of(runs: &DomainRuns) -> Figures {
        let count = |runs: &[Run], f: fn(&Run) -> bool| runs.iter().filter(|r| f(r)).count();
        let attacker = runs.attacked.iter().flat_map(|r| &r.attacker_steps);
        Figures {
            user_tasks: runs.clean.len(),
            clean_done: count(&runs.clean, |r| r.user_done),
            pairs: runs.attacked.len(),
            reached: count(&runs.attacked, |r| r.reached),
            stopped: count(&runs.attacked, |r| r.reached && !r.goal_reached),
            done_under_attack: count(&runs.attacked, |r| r.user_done),
            attacker_calls: attacker.clone().count(),
            attacker_held: attacker
                .filter(|s| s.status == Status::PendingApproval)
                .count(),
        }
    }

    /// The sum of several domains' figures.
    pub fn total(all: impl IntoIterator<Item = Figures>) -> Figures {
        all.into_iter().fold(Figures::default(), |a, b| Figures {
            user_tasks: a.user_tasks + b.user_tasks,
            clean_done: a.clean_done + b.clean_done,
            pairs: a.pairs + b.pairs,
            reached: a.reached + b.reached,
            stopped: a.stopped + b.stopped,
            done_under_attack: a.done_under_attack + b.done_under_attack,
            attacker_calls: a.attacker_calls + b.attacker_calls,
            attacker_held: a.attacker_held + b.attacker_held,
        })
    }
}

/// `part / whole` as a percentage with one decimal (`—` for an empty whole).
pub fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        "—".to_owned()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

fn cells(f: Option<&Figures>) -> [String; 3] {
    match f {
        None => ["not measured".into(), "—".into(), "—".into()],
        Some(f) => [
            format!(
                "{}/{} ({})",
                f.stopped,
                f.reached,
                percent(f.stopped, f.reached)
            ),
            format!(
                "{}/{} ({})",
                f.clean_done,
                f.user_tasks,
                percent(f.clean_done, f.user_tasks)
            ),
            format!(
                "{}/{} ({})",
                f.done_under_attack,
                f.pairs,
                percent(f.done_under_attack, f.pairs)
            ),
        ],
    }
}

/// The markdown table: one row per domain and a total, both modes side by side. `rows` holds
/// `(domain, mode, figures)`; a mode with no figures shows as not measured.
pub fn table(rows: &[(&'static str, Mode, Figures)]) -> String {
    let mut domains: Vec<&str> = Vec::new();
    for (d, _, _) in rows {
        if !domains.contains(d) {
            domains.push(d);
        }
    }
    let find = |d: &str, m: Mode| rows.iter().find(|r| r.0 == d && r.1 == m).map(|r| r.2);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| domain | tasks × attacks | injection reached the agent | mode | attacker goals stopped without a human | user tasks done, clean | user tasks done, under attack |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    let mut names: Vec<&str> = domains.clone();
    names.push("all");
    for d in names {
        for mode in Mode::ALL {
            let f = if d == "all" {
                let per: Vec<Figures> = domains.iter().filter_map(|d| find(d, mode)).collect();
                (!per.is_empty()).then(|| Figures::total(per))
            } else {
                find(d, mode)
            };
            let any = find_any(rows, d);
            let [stopped, clean, attacked] = cells(f.as_ref());
            let _ = writeln!(
                out,
                "| {d} | {} × {} | {} of {} pairs | {} | {stopped} | {clean} | {attacked} |",
                any.user_tasks,
                any.pairs.checked_div(any.user_tasks).unwrap_or(0),
                any.reached,
                any.pairs,
                mode.label()
            );
        }
    }
    out
}

/// The figures of any mode for `domain` (`all`: the total of the first mode's), for the columns
/// that do not depend on the mode.
fn find_any(rows: &[(&'static str, Mode, Figures)], domain: &str) -> Figures {
    if domain == "all" {
        let first = rows.first().map(|r| r.1);
        Figures::total(rows.iter().filter(|r| Some(r.1) == first).map(|r| r.2))
    } else {
        rows.iter()
            .find(|r| r.0 == domain)
            .map(|r| r.2)
            .unwrap_or_default()
    }
}

/// Per injection task whose goal was reached in some pair: how often (of the pairs it reached
/// the agent in) and the attacker's calls that ran, one line each.
pub fn misses(runs: &DomainRuns) -> Vec<String> {
    let mut ids: Vec<&str> = Vec::new();
    for r in &runs.attacked {
        if let Some(id) = r.injection_task.filter(|_| r.reached && r.goal_reached)
            && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    ids.into_iter()
        .map(|id| {
            let of: Vec<&Run> = runs
                .attacked
                .iter()
                .filter(|r| r.injection_task == Some(id) && r.reached)
                .collect();
            let hits: Vec<&&Run> = of.iter().filter(|r| r.goal_reached).collect();
            let mut calls: Vec<String> = Vec::new();
            for s in hits.iter().flat_map(|r| &r.attacker_steps) {
                let c = format!("{} {}", s.tool, s.status.as_str());
                if !calls.contains(&c) {
                    calls.push(c);
                }
            }
            format!(
                "{} {id}: reached in {} of {} pairs ({})",
                runs.domain,
                hits.len(),
                of.len(),
                calls.join(", ")
            )
        })
        .collect()
}
