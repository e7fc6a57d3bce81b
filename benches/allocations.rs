//! Heap allocations per guarded call, counted by a counting global allocator, beside the budget
//! of each call. Prints one line per call; `TOOLGUARD_ENFORCE_BUDGETS=1` makes a call over its
//! budget fail the run (allocation counts are exact, the same run to run).
//!
//! ```sh
//! cargo bench -p toolguard-benches --bench allocations
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

#[path = "support/calls.rs"]
mod calls;

use calls::{BUDGETS, Fixture, runtime};

/// The system allocator, counting allocations (`alloc`, `alloc_zeroed`, `realloc`) and bytes.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` unchanged; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
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
        let direct = per_call(&rt, async || {
            std::hint::black_box(fixture.direct().await);
        });
        measured.push(("direct", direct));
    }
    if wanted("low") {
        measured.push(("low", per_call(&rt, async || drop(fixture.low().await))));
    }
    if wanted("high") {
        // The fresh key's arguments are made outside the count.
        let calls: Vec<_> = (0..CALLS).map(|_| fixture.high_call()).collect();
        let mut calls = calls.into_iter();
        let high = per_call(&rt, async || {
            if let Some(call) = calls.next() {
                drop(fixture.dispatcher.dispatch(call, &fixture.principal).await);
            }
        });
        measured.push(("high", high));
    }
    if wanted("replay") {
        measured.push((
            "replay",
            per_call(&rt, async || drop(fixture.replay().await)),
        ));
    }
    println!("allocations per call (release build, memory stores, audit on, {CALLS} calls each)");
    for (name, (allocations, bytes)) in measured {
        let budget = BUDGETS.iter().find(|(n, _, _)| *n == name).map(|b| b.2);
        let verdict = match budget {
            Some(b) if allocations > b => {
                over.push(name);
                format!("budget {b}: OVER")
            }
            Some(b) => format!("budget {b}: ok"),
            None => "no budget".to_owned(),
        };
        println!("{name:>8}: {allocations:>5} allocations, {bytes:>7} bytes   ({verdict})");
    }
    if !over.is_empty() {
        println!("over budget: {}", over.join(", "));
        if enforce {
            std::process::exit(1);
        }
    }
}
