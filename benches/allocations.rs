//! Heap allocations per guarded call, counted by a counting global allocator, beside the budget
//! of each call, and the bytes a call leaves allocated: what the memory stores and the audit
//! trail keep of it, with its share of their tables' growth. Prints one line per call;
//! `TOOLGUARD_ENFORCE_BUDGETS=1` makes a call over its budget fail the run (allocation counts are
//! exact, the same run to run).
//!
//! ```sh
//! cargo bench -p toolguard-benches --bench allocations
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[path = "support/calls.rs"]
mod calls;

use calls::{BUDGETS, Fixture, runtime};

/// The system allocator, counting allocations (`alloc`, `alloc_zeroed`, `realloc`), the bytes
/// they asked for and the bytes live (allocated and not yet freed).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Counts an allocation of `size` bytes.
fn allocated(size: usize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(size as u64, Ordering::Relaxed);
    LIVE.fetch_add(size as i64, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` unchanged; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        allocated(new_size);
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Calls measured per kind; the figure is the mean per call (every call allocates the same).
const CALLS: u64 = 1_000;

/// (allocations, bytes) per call of `f`, over [`CALLS`] calls.
fn per_call(rt: &tokio::runtime::Runtime, mut f: impl AsyncFnMut()) -> (u64, u64) {
    let (a0, b0) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    rt.block_on(async {
        for _ in 0..CALLS {
            f().await;
        }
    });
    let (a1, b1) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    ((a1 - a0) / CALLS, (b1 - b0) / CALLS)
}

/// Bytes per call still allocated since the live count was `from` ([`CALLS`] calls).
fn kept_since(from: i64) -> i64 {
    (LIVE.load(Ordering::Relaxed) - from) / CALLS as i64
}

/// One call kind's counts: allocations and bytes asked for per call, bytes kept per call.
struct Counted {
    name: &'static str,
    allocations: u64,
    bytes: u64,
    kept: i64,
}

/// Counts [`CALLS`] calls of `f` as `name`.
fn count(rt: &tokio::runtime::Runtime, name: &'static str, f: impl AsyncFnMut()) -> Counted {
    let from = LIVE.load(Ordering::Relaxed);
    let (allocations, bytes) = per_call(rt, f);
    Counted {
        name,
        allocations,
        bytes,
        kept: kept_since(from),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects calls by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let enforce = std::env::var_os("TOOLGUARD_ENFORCE_BUDGETS").is_some_and(|v| v == "1");
    let rt = runtime();
    let fixture = Fixture::new(&rt);
    let mut over = Vec::new();
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let mut measured = Vec::new();
    if wanted("direct") {
        measured.push(count(&rt, "direct", async || {
            std::hint::black_box(fixture.direct().await);
        }));
    }
    if wanted("low") {
        measured.push(count(&rt, "low", async || drop(fixture.low().await)));
    }
    if wanted("high") {
        // The fresh key's arguments are made outside the allocation count; what the calls keep
        // of them counts as kept (the live count is read before they are made and after the
        // rest is freed).
        let from = LIVE.load(Ordering::Relaxed);
        let calls: Vec<_> = (0..CALLS).map(|_| fixture.high_call()).collect();
        let mut calls = calls.into_iter();
        let (allocations, bytes) = per_call(&rt, async || {
            if let Some(call) = calls.next() {
                drop(fixture.dispatcher.dispatch(call, &fixture.principal).await);
            }
        });
        drop(calls);
        measured.push(Counted {
            name: "high",
            allocations,
            bytes,
            kept: kept_since(from),
        });
    }
    if wanted("replay") {
        measured.push(count(&rt, "replay", async || drop(fixture.replay().await)));
    }
    println!("allocations per call (release build, memory stores, audit on, {CALLS} calls each)");
    for Counted {
        name,
        allocations,
        bytes,
        kept,
    } in measured
    {
        let budget = BUDGETS.iter().find(|(n, _, _)| *n == name).map(|b| b.2);
        let verdict = match budget {
            Some(b) if allocations > b => {
                over.push(name);
                format!("budget {b}: OVER")
            }
            Some(b) => format!("budget {b}: ok"),
            None => "no budget".to_owned(),
        };
        println!(
            "{name:>8}: {allocations:>5} allocations, {bytes:>7} bytes, {kept:>6} bytes kept   ({verdict})"
        );
    }
    if !over.is_empty() {
        println!("over budget: {}", over.join(", "));
        if enforce {
            std::process::exit(1);
        }
    }
}
