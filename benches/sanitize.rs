//! Sanitizing a typical five-field argument object (identifier, identifier, money, text memo,
//! e-mail), clean and with a stripped memo; and single strings of each kind.
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

criterion_group!(benches, bench);
criterion_main!(benches);
