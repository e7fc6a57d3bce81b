//! "Did you mean" for unknown option keys, risk levels and kinds (rule 10).

/// Levenshtein distance over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The entry of `known` closest to `word`, if it is close enough to be a misspelling (at most a
/// third of the longer word's characters differ, at least one may).
pub fn closest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .min_by_key(|(d, _)| *d)
        .filter(|(d, k)| *d <= (k.chars().count().max(word.chars().count()) / 3).max(1))
        .map(|(_, k)| k)
}

/// What follows an "unknown ..." sentence: a suggestion of the closest of `known` when it is
/// close enough, then the list of what is valid (`what` names them: "options", "kinds").
pub fn suggestion_and_list(word: &str, known: &[&str], what: &str) -> String {
    match closest(word, known) {
        Some(k) => format!(": did you mean `{k}`? The {what} are {}", list(known)),
        None => format!(". The {what} are {}", list(known)),
    }
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_get_a_suggestion_and_far_words_only_the_list() {
        let known = ["approval_over", "approvals", "idempotent"];
        assert_eq!(closest("aproval_over", &known), Some("approval_over"));
        assert_eq!(closest("idempotnet", &known), Some("idempotent"));
        assert_eq!(closest("colour", &known), None);
        assert_eq!(
            suggestion_and_list("hgh", &["low", "high"], "risk levels"),
            ": did you mean `high`? The risk levels are `low`, `high`"
        );
        assert_eq!(
            suggestion_and_list("zzzzzz", &["low"], "risk levels"),
            ". The risk levels are `low`"
        );
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest("x", &[]), None);
    }
}
