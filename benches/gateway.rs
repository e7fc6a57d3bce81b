//! What the MCP gateway (`toolguard mcp-proxy`) adds to a forwarded low-risk tool call, and how
//! many calls it serves to 64 concurrent clients over Streamable HTTP.
//!
//! The upstream is the reference memory server (`@modelcontextprotocol/server-memory` from npm,
//! installed by `.ci/run` under `TOOLGUARD_NPM_PREFIX`) started as a child process; the call is
//! its read-only `read_graph`, declared `risk = "low"` in the gateway's policy.
//!
//! - `gateway/direct`: rmcp's client calls the upstream over its stdio.
//! - `gateway/through`: rmcp's client calls the gateway (in this process, over an in-memory
//!   pipe, each message read strictly as over stdio: `GuardedServer::serve_io`), which runs the
//!   guard pipeline (stores and audit trail in SQLite) and forwards the call to a second
//!   instance of the same upstream.
//! - the dispatcher alone: the gateway's dispatcher called in this process (pipeline, store and
//!   forwarding, without the client's MCP hop), and one MCP hop over the in-memory pipe to a
//!   server that answers at once, to show where the added latency goes.
//!
//! - with `TOOLGUARD_BIN` naming a `toolguard` binary built with `mcp-proxy`: rmcp's client calls
//!   `toolguard mcp-proxy` in a process of its own over its stdio (as a host runs it), in front of
//!   a third instance of the upstream.
//!
//! All run in the same run, interleaved; the difference of the medians is printed as the added
//! latency. Then 64 clients call the gateway served over Streamable HTTP (loopback) for a few
//! seconds and the calls per second are printed.
//!
//! The SQLite store is opened with `Durability::Full`, but a read-only call's audit entry is
//! answered at commit and synced right after (`AuditSink::append_unsynced`), so the read does
//! not wait for the disk; a state-changing call's entry still does. Run with `TMPDIR=/dev/shm`
//! (the store on tmpfs) to see what is left without the disk.
//!
//! `TOOLGUARD_GATEWAY_ONLY=direct|through|dispatcher|hop` runs 20,000 calls of that kind alone
//! (`TOOLGUARD_GATEWAY_CALLS` to change the number) and prints their median: to profile one
//! path, or to count the instructions of its calls under callgrind.
//!
//! `cargo bench -p toolguard-benches --bench gateway`

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use toolguard::gateway::{Guard, GuardedServer, UpstreamTarget};
use toolguard::{HostKeys, RawArguments, Status, ToolCall};

const TOKEN: &str = "bench-token-0123456789abcdef";
const CLIENTS: usize = 64;
const THROUGHPUT_RUN: Duration = Duration::from_secs(5);

fn memory_server() -> Option<Vec<String>> {
    let prefix = std::env::var("TOOLGUARD_NPM_PREFIX").ok()?;
    let entry = PathBuf::from(prefix)
        .join("node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    entry
        .exists()
        .then(|| vec!["node".to_owned(), entry.display().to_string()])
}

fn policy(dir: &std::path::Path) -> PathBuf {
    let file = dir.join("policy.toml");
    std::fs::write(
        &file,
        format!(
            r#"[proxy]
store = "bench.sqlite"
reload_poll_secs = 0

[principal]
tenant = "bench"
subject = "agent"
roles = ["agent"]

[[tokens]]
token = "{TOKEN}"
tenant = "bench"
subject = "agent"
roles = ["agent"]

[tools.read_graph]
risk = "low"
read_only = true
output = "trusted"
"#
        ),
    )
    .expect("policy");
    file
}

/// `toolguard mcp-proxy` in a process of its own (the binary `TOOLGUARD_BIN`), with the policy
/// in `dir`, in front of `command`.
async fn command_proxy(
    dir: &std::path::Path,
    command: &[String],
) -> Option<RunningService<RoleClient, ()>> {
    let bin = std::env::var_os("TOOLGUARD_BIN")?;
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("mcp-proxy")
        .arg("--policy")
        .arg(policy(dir))
        .arg("--")
        .args(command)
        .current_dir(dir)
        .env("TOOLGUARD_HOST_KEYS", format!("bench:{}", "07".repeat(32)))
        .env("MEMORY_FILE_PATH", dir.join("memory.jsonl"));
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn the proxy");
    Some(().serve(transport).await.expect("initialize the proxy"))
}

fn read_graph() -> CallToolRequestParams {
    CallToolRequestParams::new("read_graph").with_arguments(Default::default())
}

async fn direct(command: &[String]) -> RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]).env(
        "MEMORY_FILE_PATH",
        std::env::temp_dir().join(format!("tg-bench-{}.jsonl", std::process::id())),
    );
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn the upstream");
    ().serve(transport).await.expect("initialize the upstream")
}

async fn through(guard: Arc<Guard>) -> RunningService<RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    // As over stdio: every message read strictly before the SDK sees it.
    tokio::spawn(GuardedServer::new(guard).serve_io(read, write));
    ().serve(client_io).await.expect("initialize the gateway")
}

/// An MCP server that answers every `tools/call` at once with an empty result: what one MCP hop
/// over the in-memory pipe costs, without a pipeline or an upstream.
#[derive(Clone)]
struct Answering;

impl rmcp::ServerHandler for Answering {
    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        Ok(rmcp::model::CallToolResult::success(vec![]).into())
    }
}

async fn hop() -> RunningService<RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = Answering.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io)
        .await
        .expect("initialize the answering server")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The pipeline and the forwarding alone: the gateway's dispatcher called in this process,
/// without the MCP hop between the client and the gateway.
async fn sample_pipeline(guard: &Guard, n: usize) -> Vec<Duration> {
    let current = guard.current();
    let principal = current
        .policy
        .local_principal(guard.session())
        .expect("the policy names a [principal]");
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let call = ToolCall::new(
            format!("bench-{i}"),
            "read_graph",
            RawArguments::Value(serde_json::json!({})),
        );
        let start = Instant::now();
        let outcome = current.dispatcher.dispatch(call, &principal).await;
        assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
        out.push(start.elapsed());
    }
    out
}

async fn sample(client: &RunningService<RoleClient, ()>, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let result = client.call_tool(read_graph()).await.expect("tools/call");
        assert_ne!(result.is_error, Some(true), "{result:?}");
        out.push(start.elapsed());
    }
    out
}

/// 64 clients over Streamable HTTP for [`THROUGHPUT_RUN`]: calls per second.
async fn throughput(guard: Arc<Guard>) -> f64 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(guard.serve_http(listener));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.clone(),
            )
            .auth_header(TOKEN.to_owned());
        let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
        clients.push(().serve(transport).await.expect("initialize over HTTP"));
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let calls = calls.clone();
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < THROUGHPUT_RUN {
                let r = client
                    .call_tool(read_graph())
                    .await
                    .expect("tools/call over HTTP");
                assert_ne!(r.is_error, Some(true), "{r:?}");
                calls.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    calls.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn gateway(c: &mut Criterion) {
    let Some(command) = memory_server() else {
        eprintln!(
            "gateway bench skipped: TOOLGUARD_NPM_PREFIX does not hold @modelcontextprotocol/server-memory (run .ci/run)"
        );
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("tg-bench-gateway-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let file = policy(&dir);
    // Host keys are always on in the gateway: approvals sealed, the trail anchored.
    let keys = HostKeys::new("bench", vec![7u8; 32]).expect("a host key");
    let target = UpstreamTarget::Command(command.clone());
    let guard = rt
        .block_on(Guard::start_with_keys(&file, &target, None, Some(keys)))
        .expect("the gateway starts");
    let direct = rt.block_on(direct(&command));
    let through = rt.block_on(through(guard.clone()));

    let hop = rt.block_on(hop());
    let process_dir = dir.join("process");
    std::fs::create_dir_all(&process_dir).expect("scratch dir");
    let process = rt.block_on(command_proxy(&process_dir, &command));

    // One kind of call alone (for a profiler, `perf stat` or callgrind): `TOOLGUARD_GATEWAY_ONLY=direct`,
    // `through`, `dispatcher` or `hop`, 20,000 calls (`TOOLGUARD_GATEWAY_CALLS`), their median printed.
    if let Ok(only) = std::env::var("TOOLGUARD_GATEWAY_ONLY") {
        let n = std::env::var("TOOLGUARD_GATEWAY_CALLS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20_000);
        let samples = rt.block_on(async {
            match only.as_str() {
                "direct" => sample(&direct, n).await,
                "through" => sample(&through, n).await,
                "dispatcher" => sample_pipeline(&guard, n).await,
                "hop" => sample(&hop, n).await,
                other => {
                    panic!("TOOLGUARD_GATEWAY_ONLY={other}: not direct, through, dispatcher or hop")
                }
            }
        });
        if n > 0 {
            eprintln!(
                "gateway: {only} alone, median of {n} calls {:?}",
                median(samples)
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }

    // The added latency, medians of interleaved samples of the same run; beside it, where it
    // goes: the dispatcher called in this process (no client hop) and one MCP hop over the pipe
    // to a server that answers at once.
    let (mut d, mut t, mut p, mut h, mut own) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..10 {
            d.extend(sample(&direct, 200).await);
            t.extend(sample(&through, 200).await);
            p.extend(sample_pipeline(&guard, 200).await);
            h.extend(sample(&hop, 200).await);
            if let Some(process) = &process {
                own.extend(sample(process, 200).await);
            }
        }
    });
    if !own.is_empty() {
        let (md, mc) = (median(d.clone()), median(own));
        eprintln!(
            "gateway: through `toolguard mcp-proxy` in its own process {mc:?}, added {:?} per low-risk call against direct {md:?}",
            mc.saturating_sub(md)
        );
    }
    let (md, mt, mp, mh) = (median(d), median(t), median(p), median(h));
    eprintln!(
        "gateway: median direct {md:?}, through the gateway {mt:?}, added {:?} per low-risk call (2000 calls each)",
        mt.saturating_sub(md),
    );
    eprintln!(
        "gateway: the dispatcher alone (pipeline and forwarding, no client hop) {mp:?}; one MCP hop over the pipe to a server answering at once {mh:?}"
    );

    let mut g = c.benchmark_group("gateway");
    g.bench_function("direct", |b| {
        b.to_async(&rt).iter(|| direct.call_tool(read_graph()))
    });
    g.bench_function("through", |b| {
        b.to_async(&rt).iter(|| through.call_tool(read_graph()))
    });
    g.finish();

    let per_second = rt.block_on(throughput(guard));
    eprintln!(
        "gateway: {CLIENTS} concurrent clients over Streamable HTTP: {per_second:.0} calls/s ({}s run)",
        THROUGHPUT_RUN.as_secs()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, gateway);
criterion_main!(benches);
