"""An MCP server over stdio that answers like a broken or hostile server would, for the
gateway's limits on what it reads from an upstream (tests/tests/proxy_hostile_upstream.rs).

It speaks newline-delimited JSON-RPC by hand (no SDK: the SDK would never send these lines).
Its tool `answer(kind)` is answered with: `wide` a result object of 70 000 keys,
`duplicate` a result that repeats a key, `long` a line of 5 MiB, `fine` an ordinary result.
Its tool `nested(xs)` offers an input schema whose branches multiply: sixteen levels of twenty
`anyOf` branches, each a `$ref` to the next level (20^16 checks of one value).
"""

import json
import sys


def send(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result(request_id, value) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value}))


TOOL = {
    "name": "answer",
    "description": "Answers in the way asked.",
    "inputSchema": {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": ["wide", "duplicate", "long", "fine"]}},
        "required": ["kind"],
    },
}

NESTED = {
    "name": "nested",
    "description": "Takes nested lists.",
    "inputSchema": {
        "type": "object",
        "properties": {"xs": {"$ref": "#/$defs/L0", "description": "Lists."}},
        "$defs": {
            **{
                f"L{level}": {
                    "type": "array",
                    "anyOf": [{"$ref": f"#/$defs/L{level + 1}"} for _ in range(20)],
                }
                for level in range(16)
            },
            "L16": {"type": "integer"},
        },
    },
}

for raw in sys.stdin:
    message = json.loads(raw)
    method = message.get("method")
    request_id = message.get("id")
    if request_id is None:
        continue
    if method == "initialize":
        result(request_id, {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1.0.0"},
        })
    elif method == "tools/list":
        result(request_id, {"tools": [TOOL, NESTED]})
    elif method == "tools/call":
        kind = message["params"]["arguments"]["kind"]
        rid = json.dumps(request_id)
        if kind == "wide":
            members = ",".join(f'"k{i}":0' for i in range(70_000))
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":{%s}}}' % (rid, members))
        elif kind == "duplicate":
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"a"}],"isError":false,"isError":true}}' % rid)
        elif kind == "long":
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}' % (rid, "x" * (5 << 20)))
        else:
            result(request_id, {"content": [{"type": "text", "text": "fine"}]})
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}}))
