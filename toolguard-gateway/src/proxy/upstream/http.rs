//! An upstream reached over MCP Streamable HTTP: rmcp's client on `reqwest` built without a TLS
//! stack, so only `http://` URLs are accepted (an `https://` URL is refused before anything is
//! sent; put the proxy on the upstream's host or network, or a TLS-terminating proxy in between).
//!
//! The bearer token sent to the upstream is read from the environment variable the policy file
//! names in `[proxy] upstream_token_env`; the file never holds the secret.
//!
//! What the upstream sends is read under the same size limit as a line of a stdio upstream
//! ([`MAX_MESSAGE_BYTES`](crate::server::MAX_MESSAGE_BYTES)): a JSON response body and each SSE
//! event (of a response stream or of the standalone stream) are counted as they arrive and
//! refused once they pass it, before anything is parsed; they are never held whole. A refused
//! answer fails the request it answers, with an error naming the limit; the session goes on.

use super::{UpstreamEvents, UpstreamTarget};
use crate::proxy::ProxyError;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use toolguard_policy::{Policy, PolicyError};

/// The bearer token for `target`: the value of `[proxy] upstream_token_env`, which must be set
/// when named, and may only be named for a URL upstream.
pub(super) fn bearer_token(
    target: &UpstreamTarget,
    policy: &Policy,
) -> Result<Option<String>, ProxyError> {
    let Some(var) = &policy.proxy.upstream_token_env else {
        return Ok(None);
    };
    let error = |message: String| PolicyError {
        file: policy.file().to_path_buf(),
        line: policy.key_line("upstream_token_env"),
        message,
    };
    if let UpstreamTarget::Command(_) = target {
        return Err(error(format!(
            "`upstream_token_env = \"{var}\"` applies to an upstream reached with `--upstream-url`; the upstream here is the command {target}: remove the key"
        ))
        .into());
    }
    match std::env::var(var) {
        Ok(token) if !token.is_empty() && !token.chars().any(char::is_control) => Ok(Some(token)),
        Ok(_) => Err(error(format!(
            "the environment variable `{var}` (`upstream_token_env`) is empty or holds control characters: set it to the upstream's bearer token"
        ))
        .into()),
        Err(_) => Err(error(format!(
            "the environment variable `{var}` (`upstream_token_env`) is not set: export the upstream's bearer token in it"
        ))
        .into()),
    }
}

/// Checks that `url` is an `http://` URL with a host.
pub(super) fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    match parsed.scheme() {
        "http" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        "http" => Err("the URL names no host".to_owned()),
        "https" => Err(
            "`https://` upstreams are not supported: this build has no TLS stack; reach the upstream over `http://` on its host or private network, or through a TLS-terminating proxy"
                .to_owned(),
        ),
        other => Err(format!(
            "scheme `{other}:` is not supported: give the upstream's Streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp`"
        )),
    }
}

/// Initializes an MCP session with the Streamable HTTP endpoint `url`.
#[cfg(feature = "upstream-http")]
pub(super) async fn connect(
    url: &str,
    token: Option<String>,
    events: UpstreamEvents,
) -> Result<RunningService<RoleClient, UpstreamEvents>, String> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    check_url(url)?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(crate::server::MAX_MESSAGE_BYTES)
        .max_sse_event_size(crate::server::MAX_MESSAGE_BYTES);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = super::tap::Tapped::new(
        StreamableHttpClientTransport::from_config(config),
        events.relay.clone(),
    );
    events
        .serve(transport)
        .await
        .map_err(|e| format!("did not initialize an MCP session: {e}"))
}

/// Without the `mcp-proxy-upstream-http` feature: a clear error.
#[cfg(not(feature = "upstream-http"))]
pub(super) async fn connect(
    url: &str,
    _token: Option<String>,
    _events: UpstreamEvents,
) -> Result<RunningService<RoleClient, UpstreamEvents>, String> {
    check_url(url)?;
    Err("an upstream over Streamable HTTP needs the `mcp-proxy-upstream-http` feature (the `toolguard` command: cargo install toolguard-cli --features upstream-http)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn only_plain_http_urls_with_a_host_are_accepted() {
        assert!(check_url("http://127.0.0.1:3001/mcp").is_ok());
        let https = check_url("https://mcp.example.com/mcp").unwrap_err();
        assert!(https.contains("no TLS stack"), "{https}");
        let ws = check_url("ws://127.0.0.1/mcp").unwrap_err();
        assert!(ws.contains("scheme `ws:`"), "{ws}");
        assert!(check_url("127.0.0.1:3001").is_err());
        assert!(check_url("not a url").unwrap_err().starts_with("not a URL"));
    }
}
