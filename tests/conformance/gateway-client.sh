#!/bin/sh
# The gateway as the client of the conformance suite's test server (client scenarios): the
# suite appends the server's URL and names the scenario in MCP_CONFORMANCE_SCENARIO. The gateway
# initializes with that server; a minimal MCP client on the gateway's stdio initializes, lists
# the tools and, for `tools_call`, calls `add_numbers` (the suite checks what reaches its server),
# then closes the session.
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"conformance-driver","version":"1.0.0"}}}'
initialized='{"jsonrpc":"2.0","method":"notifications/initialized"}'
list='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
call='{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add_numbers","arguments":{"a":2,"b":3}}}'
{
    printf '%s\n%s\n%s\n' "$init" "$initialized" "$list"
    if [ "$MCP_CONFORMANCE_SCENARIO" = "tools_call" ]; then
        printf '%s\n' "$call"
    fi
    sleep 2
} | "$TOOLGUARD_BIN" mcp-proxy --policy "$TOOLGUARD_CONFORMANCE_POLICY" --upstream-url "$1"
