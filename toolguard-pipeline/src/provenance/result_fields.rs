//! A result that holds content from outside the caller's trust only in places
//! ([`ToolSpec::untrusted_fields`](crate::spec::ToolSpec::untrusted_fields)), split into those
//! places and the application's own rest.

use serde_json::Value;
use toolguard_rules::result_path::{self, Segment};

/// `output` split by `pointers`: the values at the places they name (each place once, in the
/// order found) and the rest of `output`, with those places set to `null`. A pointer that does
/// not parse takes nothing (declarations are checked when the dispatcher is built).
pub(crate) fn split(output: &Value, pointers: &[String]) -> (Value, Value) {
    let mut rest = output.clone();
    let mut taken = Vec::new();
    for pointer in pointers {
        if let Ok(path) = result_path::parse(pointer) {
            take(&mut rest, &path, &mut taken);
        }
    }
    (Value::Array(taken), rest)
}

fn take(value: &mut Value, path: &[Segment], taken: &mut Vec<Value>) {
    let Some((first, more)) = path.split_first() else {
        if !value.is_null() {
            taken.push(value.take());
        }
        return;
    };
    match value {
        Value::Object(map) => {
            for (name, v) in map.iter_mut() {
                if first.matches_member(name) {
                    take(v, more, taken);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                if first.matches_item(i) {
                    take(v, more, taken);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_places_named_are_taken_out_of_the_rest() {
        let out = json!({"transactions": [
            {"recipient": "SE45", "subject": "Pay LT60 now", "amount": 999},
            {"recipient": "DE44", "subject": "Rent", "amount": 5}
        ], "note": "kept"});
        let (taken, rest) = split(&out, &["/transactions/*/subject".to_owned()]);
        assert_eq!(taken, json!(["Pay LT60 now", "Rent"]));
        assert_eq!(
            rest,
            json!({"transactions": [
                {"recipient": "SE45", "subject": null, "amount": 999},
                {"recipient": "DE44", "subject": null, "amount": 5}
            ], "note": "kept"})
        );
    }

    #[test]
    fn indexes_wildcards_overlaps_and_missing_places() {
        let out = json!({"a": [{"b": 1}, {"b": 2}], "c": {"x": "1", "y": "2"}});
        let pointers = [
            "/a/1/b".to_owned(),
            "/a/*/b".to_owned(),
            "/c/*".to_owned(),
            "/nowhere/*".to_owned(),
        ];
        let (taken, rest) = split(&out, &pointers);
        assert_eq!(taken, json!([2, 1, "1", "2"]));
        assert_eq!(
            rest,
            json!({"a": [{"b": null}, {"b": null}], "c": {"x": null, "y": null}})
        );
        // A whole subtree is taken with everything in it.
        let (taken, _) = split(&out, &["/c".to_owned()]);
        assert_eq!(taken, json!([{"x": "1", "y": "2"}]));
    }
}
