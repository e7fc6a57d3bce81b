//! Sanitizing a typical five-field argument object (identifier, identifier, money, text memo,
//! e-mail), clean and with a stripped memo; single strings of each kind; and the walk of an
//! `opaque` list of eight enum members (`sanitize_opaque/enum_list_walked`): what such a field
//! cost on every call before its schema settled it at registration (a dispatcher now skips it).
//!
//! `cargo bench -p toolguard-benches --bench sanitize -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use toolguard::spec::{FieldKind, FieldSpec};

#[path = "support/transfer_fields.rs"]
mod transfer_fields;

use transfer_fields::{ASCII_MEMO, args, sanitizer, spec};

fn bench(c: &mut Criterion) {
    let spec = spec();
    let sanitizer = sanitizer();
    let clean = args(ASCII_MEMO);
    let unicode = args("Loyer de mars pour Zoë 🏠 — merci beaucoup, à bientôt");
    let stripped = args("Rent for Ma\u{200B}rch, split with O'Brien; thanks!");
    let mut group = c.benchmark_group("sanitize_transfer");
    for (name, value) in [
        ("ascii_clean", &clean),
        ("unicode_clean", &unicode),
        ("stripped", &stripped),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || value.clone(),
                |args| black_box(sanitizer.sanitize(&spec, args)),
                criterion::BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("sanitize_str");
    let field = |kind| FieldSpec::new("f").with_kind(kind);
    for (name, kind, value) in [
        ("identifier", FieldKind::Identifier, "acct_1029384756"),
        (
            "text_ascii",
            FieldKind::Text,
            "Rent for March, split with O'Brien; thanks!",
        ),
        (
            "text_unicode",
            FieldKind::Text,
            "Loyer de mars pour Zoë 🏠 — merci beaucoup, à bientôt",
        ),
        ("name", FieldKind::Name, "Siobhán Ní Bhriain"),
        ("email", FieldKind::Email, "ann.obrien@example.com"),
        (
            "url",
            FieldKind::Url,
            "https://example.com/search?q=O%27Brien&page=2",
        ),
    ] {
        let f = field(kind);
        group.bench_function(name, |b| {
            b.iter(|| black_box(sanitizer.sanitize_str("t", &f, black_box(value))))
        });
    }
    group.finish();
}

/// The walk of an opaque list of enum members, as the sanitizer does it for a field whose
/// schema it is not told settles it.
fn opaque(c: &mut Criterion) {
    let sanitizer = toolguard::sanitize::Sanitizer::new();
    let schema = serde_json::json!({"type": "object", "properties": {
        "rails": {"type": "array", "items": {"$ref": "#/$defs/Rail"}}},
        "$defs": {"Rail": {"type": "string", "enum": ["sepa", "swift", "ach", "fps", "rtp"]}}});
    let mut spec = toolguard::spec::ToolSpec::new("route", "Routes", schema, serde_json::json!({}));
    spec.fields = vec![FieldSpec::new("rails").with_kind(FieldKind::Opaque)];
    let args =
        serde_json::json!({"rails": ["rtp", "fps", "ach", "swift", "sepa", "rtp", "fps", "ach"]});
    let mut group = c.benchmark_group("sanitize_opaque");
    group.bench_function("enum_list_walked", |b| {
        b.iter_batched_ref(
            || args.clone(),
            |args| black_box(sanitizer.sanitize(&spec, args)),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench, opaque);
criterion_main!(benches);
