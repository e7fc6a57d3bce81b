//! Lowering under hostile and random schemas.
//!
//! * A 100,000-deep schema, a `$ref` cycle, a very wide schema and an exponential `$ref` DAG are
//!   refused with a typed error by every lowering and export; nothing hangs or overflows.
//! * Property (seeded generator): a value valid under a strict lowered schema, mapped back
//!   (`null` → absent), is either valid under the canonical schema or rejected by canonical
//!   validation only for a keyword the lowering recorded as lossy — never silently accepted, and
//!   never rejected for a reason the lowering did not announce. The same holds for Gemini's
//!   OpenAPI subset (read as JSON Schema, `nullable` as a union with `null`).

mod provider_specs;

use serde_json::{Map, Value, json};
use toolguard::ToolSpec;
use toolguard::providers::{
    ExportError, ExportOptions, LowerError, Lowered, anthropic, gemini, lower_anthropic_strict,
    lower_gemini_openapi, lower_openai_strict, mcp, openai, restore_optional_nulls,
};

/// Takes a deep value apart without recursion (dropping it whole would recurse).
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn deep_schema(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..levels {
        let mut props = Map::new();
        props.insert("a".to_owned(), schema);
        let mut object = Map::new();
        object.insert("type".to_owned(), json!("object"));
        object.insert("properties".to_owned(), Value::Object(props));
        schema = Value::Object(object);
    }
    schema
}

fn all_lowerings(schema: &Value) -> Vec<(&'static str, Result<Lowered, LowerError>)> {
    vec![
        ("openai_strict", lower_openai_strict(schema)),
        ("anthropic_strict", lower_anthropic_strict(schema)),
        ("gemini_openapi", lower_gemini_openapi(schema)),
    ]
}

fn all_exports(spec: &ToolSpec) -> Vec<(&'static str, Result<(), ExportError>)> {
    let lenient = ExportOptions {
        allow_non_strict: true,
        anthropic_strict: true,
        ..Default::default()
    };
    let openapi = ExportOptions {
        gemini_openapi: true,
        ..Default::default()
    };
    let d = ExportOptions::default();
    vec![
        ("chat", openai::chat_tool(spec, &lenient).map(drop)),
        ("responses", openai::responses_tool(spec, &d).map(drop)),
        ("anthropic", anthropic::tool(spec, &d).map(drop)),
        (
            "anthropic_strict",
            anthropic::tool(spec, &lenient).map(drop),
        ),
        ("gemini", gemini::function_declaration(spec, &d).map(drop)),
        (
            "gemini_openapi",
            gemini::function_declaration(spec, &openapi).map(drop),
        ),
        ("mcp", mcp::tool(spec, &d).map(drop)),
    ]
}

#[test]
fn a_100000_deep_schema_is_too_deep_everywhere() {
    let schema = deep_schema(100_000);
    for (name, result) in all_lowerings(&schema) {
        assert!(
            matches!(result, Err(LowerError::TooDeep { limit: 64 })),
            "{name}: {result:?}"
        );
    }
    let spec = ToolSpec::new("deep", "d", schema, json!({"type": "object"}));
    for (name, result) in all_exports(&spec) {
        assert!(
            matches!(
                result,
                Err(ExportError::Schema {
                    error: LowerError::TooDeep { .. },
                    ..
                })
            ),
            "{name}: {result:?}"
        );
    }
    // Restoring nulls walks the arguments only as deep as its own bound.
    let mut args = deep_args(100_000);
    assert!(restore_optional_nulls(&spec.input_schema, &mut args).is_ok());
    dismantle(args);
    dismantle(spec.input_schema);
}

fn deep_args(levels: usize) -> Value {
    let mut value = Value::Null;
    for _ in 0..levels {
        let mut m = Map::new();
        m.insert("a".to_owned(), value);
        value = Value::Object(m);
    }
    value
}

#[test]
fn ref_cycles_are_refused() {
    let cycle = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "required": ["a"],
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
    });
    for (name, result) in all_lowerings(&cycle) {
        assert!(
            matches!(
                result,
                Err(LowerError::Recursive { .. }) | Err(LowerError::NotStrict { .. })
            ),
            "{name}: {result:?}"
        );
    }
    let mut args = json!({"a": {"a": {"a": null}}});
    assert!(restore_optional_nulls(&cycle, &mut args).is_ok());

    // A real recursive type: fine for OpenAI strict (which allows `$ref` recursion), refused by
    // the dialects that cannot express it.
    let tree = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name", "children"]
    });
    assert!(lower_openai_strict(&tree).is_ok());
    assert!(matches!(
        lower_anthropic_strict(&tree),
        Err(LowerError::NotStrict { .. })
    ));
    assert!(matches!(
        lower_gemini_openapi(&tree),
        Err(LowerError::Recursive { .. })
    ));
    let mut args = json!({"name": "r", "children": [{"name": "c", "children": []}]});
    assert_eq!(restore_optional_nulls(&tree, &mut args), Ok(0));
}

#[test]
fn branching_ref_cycle_behind_an_optional_property_finishes_quickly() {
    // `A` is only ever itself, twice: a null check that follows every branch to a depth cap
    // takes about 2^depth steps. Strict lowering asks it for the optional `a`, and so does null
    // restoration on every call.
    let schema = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"type": "string"}},
        "required": ["b"],
        "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}}
    });
    let started = std::time::Instant::now();
    for (name, result) in all_lowerings(&schema) {
        // Any defined answer will do; what matters is that there is one, quickly.
        let _ = (name, result);
    }
    let mut args = json!({"a": null, "b": "x"});
    assert_eq!(restore_optional_nulls(&schema, &mut args), Ok(1));
    assert_eq!(args, json!({"b": "x"}));
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn wide_and_exponential_schemas_are_too_large() {
    let mut props = Map::new();
    for i in 0..20_000 {
        props.insert(format!("p{i}"), json!({"type": "string"}));
    }
    let wide = json!({"type": "object", "properties": props});
    for (name, result) in all_lowerings(&wide) {
        assert!(
            matches!(result, Err(LowerError::TooLarge { .. })),
            "{name}: {result:?}"
        );
    }
    // 40 definitions, each referring twice to the next: small as written, 2^40 nodes inlined.
    let mut defs = Map::new();
    for i in 0..40 {
        let next = if i == 39 {
            json!({"type": "string"})
        } else {
            json!({"$ref": format!("#/$defs/D{}", i + 1)})
        };
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {"l": next.clone(), "r": next}, "required": ["l", "r"]}),
        );
    }
    let dag = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let started = std::time::Instant::now();
    assert!(matches!(
        lower_gemini_openapi(&dag),
        Err(LowerError::TooLarge { .. }) | Err(LowerError::TooDeep { .. })
    ));
    assert!(
        lower_openai_strict(&dag).is_ok(),
        "refs stay refs in strict mode"
    );
    assert!(started.elapsed().as_secs() < 5);
}

// --- Property test ----------------------------------------------------------------------------

/// xorshift64*: a small seeded generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A random canonical sub-schema, in the shapes schemars produces (and some it does not).
fn gen_schema(rng: &mut Rng, depth: u32, defs: &mut Map<String, Value>) -> Value {
    let pick = if depth >= 3 {
        rng.below(6)
    } else {
        rng.below(11)
    };
    let mut schema = match pick {
        0 => {
            let mut s = json!({"type": "string"});
            if rng.chance(40) {
                s["minLength"] = json!(rng.below(4));
            }
            if rng.chance(40) {
                s["maxLength"] = json!(3 + rng.below(6));
            }
            if rng.chance(25) {
                s["pattern"] = json!("^[a-z]*$");
            }
            if rng.chance(15) {
                s["format"] = json!("email");
            }
            s
        }
        1 => {
            let mut s = json!({"type": "integer", "format": "int32"});
            if rng.chance(50) {
                s["minimum"] = json!(rng.below(5));
            }
            if rng.chance(50) {
                s["maximum"] = json!(5 + rng.below(50));
            }
            if rng.chance(20) {
                s["multipleOf"] = json!(2);
            }
            s
        }
        2 => json!({"type": "number", "format": "double"}),
        3 => json!({"type": "boolean"}),
        4 => json!({"type": "string", "enum": ["a", "b", "c"]}),
        5 => json!({"const": "fixed", "type": "string"}),
        6 => {
            let mut s = json!({"type": "array", "items": gen_schema(rng, depth + 1, defs)});
            if rng.chance(30) {
                s["uniqueItems"] = json!(true);
            }
            if rng.chance(30) {
                s["maxItems"] = json!(1 + rng.below(3));
            }
            s
        }
        7 => gen_object(rng, depth + 1, defs),
        8 => {
            let name = format!("D{}", defs.len());
            let target = gen_object(rng, depth + 1, defs);
            defs.insert(name.clone(), target);
            json!({"$ref": format!("#/$defs/{name}")})
        }
        9 => json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"type": "string", "const": "x"}, "v": {"type": "integer"}},
             "required": ["kind", "v"], "additionalProperties": false},
            {"type": "object", "properties": {"kind": {"type": "string", "const": "y"}},
             "required": ["kind"], "additionalProperties": false}
        ]}),
        _ => json!({"type": "string", "minLength": 2, "not": {"const": "no"}}),
    };
    if rng.chance(15) {
        // Option<T>, the way schemars writes it.
        schema = match schema.get("type").and_then(Value::as_str) {
            Some(t) if schema.get("enum").is_none() && schema.get("const").is_none() => {
                schema["type"] = json!([t, "null"]);
                schema
            }
            _ => json!({"anyOf": [schema, {"type": "null"}]}),
        };
    }
    schema
}

fn gen_object(rng: &mut Rng, depth: u32, defs: &mut Map<String, Value>) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in 0..(1 + rng.below(4)) {
        let name = format!("f{i}");
        let mut sub = gen_schema(rng, depth, defs);
        if rng.chance(60) {
            required.push(json!(name));
        } else if rng.chance(30) {
            sub["default"] = Value::Null;
        }
        props.insert(name, sub);
    }
    let mut object = json!({"type": "object", "properties": props, "required": required});
    if rng.chance(70) {
        object["additionalProperties"] = json!(false);
    }
    object
}

fn gen_canonical(rng: &mut Rng) -> Value {
    let mut defs = Map::new();
    let mut root = gen_object(rng, 0, &mut defs);
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    if !defs.is_empty() {
        root["$defs"] = Value::Object(defs);
    }
    root
}

/// A random value shaped by a lowered schema (not always valid: callers filter).
fn gen_value(rng: &mut Rng, schema: &Value, root: &Value, depth: u32) -> Value {
    if depth > 12 {
        return Value::Null;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let target = if r == "#" {
            root
        } else {
            let name = r.trim_start_matches("#/$defs/");
            root.get("$defs")
                .and_then(|d| d.get(name))
                .unwrap_or(&Value::Null)
        };
        return gen_value(rng, target, root, depth + 1);
    }
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        let i = rng.below(branches.len() as u64) as usize;
        return gen_value(rng, &branches[i], root, depth + 1);
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values[rng.below(values.len() as u64) as usize].clone();
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts[rng.below(ts.len() as u64) as usize]
            .as_str()
            .unwrap_or("null")
            .to_owned(),
        _ => "null".to_owned(),
    };
    match ty.as_str() {
        "string" => {
            let alphabet: &[u8] = if rng.chance(70) { b"abcxyz" } else { b"aZ0@.-" };
            let len = rng.below(9);
            Value::String(
                (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize] as char)
                    .collect(),
            )
        }
        "integer" => {
            let lo = schema.get("minimum").and_then(Value::as_i64).unwrap_or(-5);
            let hi = schema.get("maximum").and_then(Value::as_i64).unwrap_or(60);
            json!(lo + rng.below((hi - lo + 1).max(1) as u64) as i64)
        }
        "number" => json!(rng.below(1000) as f64 / 7.0),
        "boolean" => json!(rng.chance(50)),
        "array" => {
            let max = schema.get("maxItems").and_then(Value::as_u64).unwrap_or(3);
            let items = schema.get("items").cloned().unwrap_or(Value::Null);
            Value::Array(
                (0..rng.below(max + 1))
                    .map(|_| gen_value(rng, &items, root, depth + 1))
                    .collect(),
            )
        }
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    if required.contains(&name.as_str()) || rng.chance(50) {
                        out.insert(name.clone(), gen_value(rng, sub, root, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

/// The canonical schema without what the lowering recorded as dropped, moved to a description
/// or weakened (`oneOf` → `anyOf`): the schema the lowered one claims to still enforce.
fn relaxed(canonical: &Value, lowered: &Lowered) -> Value {
    let mut relaxed = canonical.clone();
    for step in &lowered.lossy {
        let Some((parent, token)) = step.pointer.rsplit_once('/') else {
            continue;
        };
        let token = token.replace("~1", "/").replace("~0", "~");
        let Some(Value::Object(map)) = relaxed.pointer_mut(parent) else {
            continue;
        };
        if step.what.ends_with("moved to description") || step.what.ends_with("dropped") {
            map.remove(&token);
        } else if step.what == "oneOf lowered to anyOf"
            && !map.contains_key("anyOf")
            && let Some(branches) = map.remove("oneOf")
        {
            map.insert("anyOf".to_owned(), branches);
        }
    }
    relaxed
}

#[derive(Default, Debug)]
struct Tally {
    schemas: usize,
    values: usize,
    accepted: usize,
    rejected_for_lossy: usize,
}

fn check_lowering(canonical: &Value, lowered: &Lowered, rng: &mut Rng, tally: &mut Tally) {
    let low = jsonschema::validator_for(&lowered.schema)
        .unwrap_or_else(|e| panic!("lowered schema compiles: {e}\n{}", lowered.schema));
    let canon = jsonschema::validator_for(canonical).expect("canonical schema compiles");
    let relaxed = relaxed(canonical, lowered);
    let relaxed = jsonschema::validator_for(&relaxed).expect("relaxed schema compiles");
    tally.schemas += 1;
    for _ in 0..40 {
        let mut value = gen_value(rng, &lowered.schema, &lowered.schema, 0);
        if !low.is_valid(&value) {
            continue;
        }
        tally.values += 1;
        restore_optional_nulls(canonical, &mut value).expect("bounded");
        if canon.is_valid(&value) {
            tally.accepted += 1;
            continue;
        }
        // Rejected by local validation: only for what the lowering said it loosened.
        tally.rejected_for_lossy += 1;
        assert!(
            relaxed.is_valid(&value),
            "canonical rejects {value} for a reason the lowering did not record\n\
             canonical: {canonical}\nlowered: {}\nlossy: {:?}",
            lowered.schema,
            lowered.lossy
        );
    }
}

#[test]
fn strict_lowered_values_map_back_or_are_rejected_for_recorded_reasons() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut tally = Tally::default();
    for spec in provider_specs::specs() {
        for lowered in [
            lower_openai_strict(&spec.input_schema),
            lower_anthropic_strict(&spec.input_schema),
        ]
        .into_iter()
        .flatten()
        {
            check_lowering(&spec.input_schema, &lowered, &mut rng, &mut tally);
        }
    }
    for _ in 0..400 {
        let canonical = gen_canonical(&mut rng);
        for lowered in [
            lower_openai_strict(&canonical),
            lower_anthropic_strict(&canonical),
        ]
        .into_iter()
        .flatten()
        {
            check_lowering(&canonical, &lowered, &mut rng, &mut tally);
        }
    }
    assert!(tally.schemas > 500, "{tally:?}");
    assert!(tally.values > 5_000, "{tally:?}");
    assert!(tally.accepted > tally.values / 2, "{tally:?}");
    assert!(tally.rejected_for_lossy > 0, "{tally:?}");
    eprintln!("{tally:?}");
}

/// Gemini's OpenAPI subset read as JSON Schema: `nullable: true` becomes a union with `null`.
fn openapi_as_json_schema(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let converted = match key.as_str() {
            "properties" => Value::Object(
                value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| (k.clone(), openapi_as_json_schema(v)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" => openapi_as_json_schema(value),
            "anyOf" => Value::Array(
                value
                    .as_array()
                    .map(|b| b.iter().map(openapi_as_json_schema).collect())
                    .unwrap_or_default(),
            ),
            "nullable" => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if map.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(t)) = out.get("type").cloned() {
            out.insert("type".to_owned(), json!([t, "null"]));
        }
        if let Some(Value::Array(values)) = out.get_mut("enum") {
            values.push(Value::Null);
        }
        if !out.contains_key("type")
            && let Some(Value::Array(branches)) = out.get_mut("anyOf")
        {
            branches.push(json!({"type": "null"}));
        }
    }
    Value::Object(out)
}

#[test]
fn gemini_openapi_values_are_valid_or_rejected_for_recorded_reasons() {
    let mut rng = Rng(0x5eed_9e41_0000_0002);
    let mut tally = Tally::default();
    let check = |canonical: &Value, rng: &mut Rng, tally: &mut Tally| {
        let Ok(lowered) = lower_gemini_openapi(canonical) else {
            return;
        };
        let as_json = openapi_as_json_schema(&lowered.schema);
        let low = jsonschema::validator_for(&as_json).expect("lowered schema compiles");
        let canon = jsonschema::validator_for(canonical).expect("canonical compiles");
        let relaxed = jsonschema::validator_for(&relaxed(canonical, &lowered)).expect("compiles");
        tally.schemas += 1;
        for _ in 0..40 {
            let value = gen_value(rng, &as_json, &as_json, 0);
            if !low.is_valid(&value) {
                continue;
            }
            tally.values += 1;
            if canon.is_valid(&value) {
                tally.accepted += 1;
                continue;
            }
            tally.rejected_for_lossy += 1;
            assert!(
                relaxed.is_valid(&value),
                "canonical rejects {value} for a reason the lowering did not record\n\
                 canonical: {canonical}\nlowered: {}\nlossy: {:?}",
                lowered.schema,
                lowered.lossy
            );
        }
    };
    for spec in provider_specs::specs() {
        check(&spec.input_schema, &mut rng, &mut tally);
    }
    for _ in 0..400 {
        let canonical = gen_canonical(&mut rng);
        check(&canonical, &mut rng, &mut tally);
    }
    assert!(tally.schemas > 300, "{tally:?}");
    assert!(tally.accepted > tally.values / 2, "{tally:?}");
    eprintln!("{tally:?}");
}

#[test]
fn strict_moves_combinators_and_pattern_properties_into_the_description() {
    let canonical = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "allOf": [{"minLength": 1}]},
            "b": {"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 10},
                "else": {"maximum": 5}},
            "c": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"],
                "patternProperties": {"^y_": {"type": "string"}}}
        },
        "required": ["a", "b", "c"]
    });
    for (name, lowered) in [
        ("openai", lower_openai_strict(&canonical)),
        ("anthropic", lower_anthropic_strict(&canonical)),
    ] {
        let lowered = lowered.unwrap_or_else(|e| panic!("{name}: {e}"));
        let props = &lowered.schema["properties"];
        for (prop, keys) in [
            ("a", &["allOf"][..]),
            ("b", &["if", "then", "else"][..]),
            ("c", &["patternProperties"][..]),
        ] {
            let node = &props[prop];
            let description = node["description"].as_str().unwrap_or_default();
            for key in keys {
                assert!(node.get(*key).is_none(), "{name}: {key} left in {node}");
                assert!(
                    description.contains(&format!("{key}: ")),
                    "{name}: {key} not in the description of {node}"
                );
                let pointer = format!("/properties/{prop}/{key}");
                assert!(
                    lowered
                        .lossy
                        .iter()
                        .any(|s| s.pointer == pointer
                            && s.what == format!("{key} moved to description")),
                    "{name}: {pointer} not recorded: {:?}",
                    lowered.lossy
                );
            }
        }
        assert_eq!(props["c"]["additionalProperties"], false, "{name}");
    }
}

#[test]
fn a_root_that_is_not_an_object_is_refused_everywhere() {
    for root in [
        json!({"type": "string"}),
        json!({"type": "array", "items": {"type": "string"}}),
        json!({"anyOf": [{"type": "object"}, {"type": "null"}]}),
        json!({"type": ["object", "null"], "properties": {}}),
        json!(true),
        json!([]),
    ] {
        for (name, result) in all_lowerings(&root) {
            assert!(
                matches!(result, Err(LowerError::Unsupported { ref pointer, .. }) if pointer.is_empty()),
                "{name} {root}: {result:?}"
            );
        }
        let spec = ToolSpec::new("t", "d", root.clone(), json!({}));
        for (name, result) in all_exports(&spec) {
            assert!(
                matches!(
                    result,
                    Err(ExportError::Schema {
                        error: LowerError::Unsupported { .. },
                        ..
                    })
                ),
                "{name} {root}: {result:?}"
            );
        }
    }
}

#[test]
fn gemini_drops_id_and_records_it() {
    let canonical = json!({
        "$id": "https://example.com/args.json",
        "type": "object",
        "properties": {"a": {"$id": "#a", "type": "string"}},
        "required": ["a"]
    });
    let lowered = lower_gemini_openapi(&canonical).unwrap();
    assert_eq!(
        lowered.schema,
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    );
    for pointer in ["/$id", "/properties/a/$id"] {
        assert!(
            lowered
                .lossy
                .iter()
                .any(|s| s.pointer == pointer && s.what == "$id dropped"),
            "{pointer}: {:?}",
            lowered.lossy
        );
    }
}
