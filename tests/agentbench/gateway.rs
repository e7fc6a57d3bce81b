//! The suite through `toolguard mcp-proxy`: the policy file that declares a domain's tools to the
//! proxy (written from the tools' own specs, so both paths guard the same declarations), and the
//! upstream MCP server process that serves one pair's environment and reports its checks.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolguard::{Egress, FieldKind};

use super::replay::host_keys;
use super::{Domain, Env};

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The proxy's policy file for domain `D`: its audit store at `store`, the local principal, and
/// one `[tools.NAME]` per tool with the risk, effect, output trust (and untrusted fields), egress and string fields of
/// the tool's spec (URL allowlists from [`Domain::URL_HOSTS`]; `sensitive` marks are left out).
pub fn policy_toml<D: Domain>(store: &Path) -> String {
    let dispatcher = D::tools(Arc::new(Env::new(D::environment())))
        .host_keys(host_keys())
        .build()
        .expect("the domain's tools form a valid registry");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "[proxy]\nname = \"agentbench-{}\"\nstore = {}\n\n[principal]\ntenant = \"bench\"\n\
         subject = \"emma\"\nroles = [\"agent\"]\n",
        D::NAME,
        quoted(&store.display().to_string())
    );
    for spec in dispatcher.specs() {
        let _ = writeln!(out, "[tools.{}]", spec.name);
        let _ = writeln!(out, "description = {}", quoted(&spec.description));
        let _ = writeln!(out, "risk = \"{}\"", spec.risk.as_str());
        let _ = writeln!(out, "read_only = {}", spec.read_only);
        if spec.idempotent {
            let _ = writeln!(out, "idempotent = true");
        }
        let output = if spec.untrusted_output {
            "untrusted"
        } else {
            "trusted"
        };
        let _ = writeln!(out, "output = \"{output}\"");
        if !spec.untrusted_fields.is_empty() {
            // The proxy sees the MCP result: the tool's object is its `structuredContent`.
            let places: Vec<String> = spec
                .untrusted_fields
                .iter()
                .map(|p| quoted(&format!("/structuredContent{p}")))
                .collect();
            let _ = writeln!(out, "untrusted_fields = [{}]", places.join(", "));
        }
        match spec.egress {
            Egress::Open => {
                let _ = writeln!(out, "egress = \"open\"");
            }
            Egress::Allowlisted => {
                let _ = writeln!(out, "egress = \"allowlisted\"");
            }
            _ => {}
        }
        for field in spec.fields.iter().filter(|f| f.kind != FieldKind::Opaque) {
            let kind = serde_json::to_value(field.kind).expect("a kind serializes");
            let mut decl = format!("kind = {kind}");
            if let Some(max) = field.max_len {
                let _ = write!(decl, ", max_len = {max}");
            }
            // `sensitive` is left out: the proxy has no host keys to key its digests with yet,
            // and refuses a sensitive field without them.
            let hosts = D::URL_HOSTS
                .iter()
                .find(|(tool, name, _)| *tool == spec.name && *name == field.name);
            if let Some((_, _, hosts)) = hosts {
                let list: Vec<String> = hosts.iter().map(|h| quoted(h)).collect();
                let _ = write!(decl, ", allow_hosts = [{}]", list.join(", "));
            }
            let _ = writeln!(out, "fields.\"/{}\" = {{ {decl} }}", field.name);
        }
        out.push('\n');
    }
    out
}

/// Writes `(user task done, attacker goal reached)` of `pair` on `state` to `path`, atomically.
#[cfg(feature = "mcp")]
fn report_checks<D: Domain>(pair: super::replay::Pair<'_>, state: &D::State, path: &Path) {
    let (user, goal) = super::replay::checks::<D>(pair, state);
    let tmp = path.with_extension("tmp");
    let text = serde_json::json!({ "user": user, "goal": goal }).to_string();
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// Serves domain `D`'s tools over MCP on stdio, on `pair`'s environment (injection planted),
/// unguarded (the proxy in front guards them); after every access to the environment the
/// pair's checks are written to `status`.
#[cfg(feature = "mcp")]
pub async fn serve<D: Domain>(
    user: usize,
    injection: Option<usize>,
    status: PathBuf,
) -> Result<(), Box<dyn std::error::Error>> {
    use super::replay::{Pair, environment};
    use toolguard::provenance::FlowPolicy;
    use toolguard::{Principal, RiskPolicy};

    let pair = move |session| Pair {
        domain: D::NAME,
        user,
        injection,
        session,
    };
    let state = environment::<D>(pair(""));
    report_checks::<D>(pair(""), &state, &status);
    let observer = Box::new(move |s: &D::State| report_checks::<D>(pair(""), s, &status));
    let env = Arc::new(Env::observed(state, observer));
    let dispatcher = D::tools(env)
        .policy(RiskPolicy::new().flow(FlowPolicy::allow_all()))
        .host_keys(host_keys())
        .build()?;
    let principal = Principal::new("bench", "emma", "upstream");
    toolguard::mcp::McpServer::new(dispatcher, principal)?
        .with_name(format!("agentbench-{}", D::NAME))
        .serve_stdio()
        .await?;
    Ok(())
}

/// Without the `mcp` feature there is no MCP server to serve from.
#[cfg(not(feature = "mcp"))]
pub async fn serve<D: Domain>(
    user: usize,
    injection: Option<usize>,
    status: PathBuf,
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = (user, injection, status);
    Err("agentbench serve needs the `mcp` feature of toolguard-tests".into())
}
