#!/usr/bin/env python3
"""toolguard's MCP conformance fixture: a server that offers everything the suite checks.

The MCP conformance suite (npm `@modelcontextprotocol/conformance`, version pinned in `.ci/run`)
runs its server scenarios against a live server. `tests/tests/conformance.rs` starts this one,
runs the scenarios against it directly and through `toolguard mcp-proxy`, and drives its tools,
resources and prompts through the gateway in the other conformance tests.

    python3 tests/conformance/server.py --port 8123    # endpoint http://127.0.0.1:8123/mcp
    python3 tests/conformance/server.py --port 0       # a free port, printed as `listening PORT`

Written for toolguard with the official Python MCP SDK (`mcp`, pinned in `.ci/run`): the
low-level `Server` (it lets each tool carry its input schema as written, which the JSON Schema
2020-12 scenario needs) behind the SDK's Streamable HTTP session manager, with sessions, an
in-memory event store (resumable SSE streams with priming events and a retry hint) and DNS
rebinding protection (only loopback Host and Origin headers are accepted).

What it offers, by the name each scenario asks for:

- tools: `test_simple_text`, `test_image_content`, `test_audio_content`,
  `test_embedded_resource`, `test_resource_link`, `test_multiple_content_types`,
  `test_structured_content`, `test_tool_with_logging` (three log messages while it runs),
  `test_tool_with_progress` (0, 50, 100 of 100), `test_error_handling` (a tool error),
  `test_sampling` and `test_elicitation` (requests back to the client),
  `test_elicitation_sep1034_defaults` and `test_elicitation_sep1330_enums` (form schemas with
  defaults and with every enum shape), `json_schema_2020_12_tool` (`$schema`, `$defs`,
  `additionalProperties`) and `test_reconnection` (closes its SSE stream before answering when
  the client can resume);
- resources: `test://static-text`, `test://static-binary`, `test://watched-resource`
  (subscribe/unsubscribe) and the template `test://template/{id}/data`;
- prompts: `test_simple_prompt`, `test_prompt_with_arguments`,
  `test_prompt_with_embedded_resource`, `test_prompt_with_image`;
- completion of prompt and template arguments, `logging/setLevel` (later log messages below the
  level are not sent), `ping`.

The image (a 1x1 PNG) and the sound (a short silent WAV) are built here, byte by byte.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import logging
import re
import socket
import struct
import weakref
import zlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import McpError
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

# ---- media built here ---------------------------------------------------------------------------


def png_pixel() -> bytes:
    """A 1x1 opaque red PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def wav_silence(samples: int = 800, rate: int = 8000) -> bytes:
    """A tenth of a second of 8 kHz, 8-bit mono silence as a WAV file."""
    data = b"\x80" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


PNG_B64 = base64.b64encode(png_pixel()).decode()
WAV_B64 = base64.b64encode(wav_silence()).decode()

# ---- tools --------------------------------------------------------------------------------------

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def tool(name: str, description: str, schema: dict[str, Any] | None = None, **extra: Any) -> types.Tool:
    """A tool entry of the listing."""
    return types.Tool(name=name, description=description, inputSchema=schema or NO_ARGUMENTS, **extra)


def one_string(name: str, description: str) -> dict[str, Any]:
    """An input schema with one required string argument."""
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    }


SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

WEATHER_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "temperature": {"type": "number"},
        "conditions": {"type": "string"},
        "humidity": {"type": "number"},
    },
    "required": ["temperature", "conditions", "humidity"],
}

TOOLS: list[types.Tool] = [
    tool("test_simple_text", "Answers with one text block."),
    tool("test_image_content", "Answers with a 1x1 PNG image."),
    tool("test_audio_content", "Answers with a short silent WAV sound."),
    tool("test_embedded_resource", "Answers with an embedded text resource."),
    tool("test_resource_link", "Answers with a link to the static text resource."),
    tool("test_multiple_content_types", "Answers with text, an image and an embedded resource, in that order."),
    tool(
        "test_structured_content",
        "Answers with structured content that matches its output schema.",
        outputSchema=WEATHER_OUTPUT,
    ),
    tool("test_tool_with_logging", "Sends three log messages while it runs."),
    tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 when the call carries a token."),
    tool("test_error_handling", "Always fails with a tool error."),
    tool("test_sampling", "Asks the client to sample an LLM reply to a prompt.", one_string("prompt", "What to ask")),
    tool(
        "test_elicitation",
        "Asks the user, through the client, for a username and an email address.",
        one_string("message", "What to show the user"),
    ),
    tool("test_elicitation_sep1034_defaults", "Asks the user for a form whose fields all have default values."),
    tool("test_elicitation_sep1330_enums", "Asks the user for a form with each kind of enumerated field."),
    tool("json_schema_2020_12_tool", "Takes arguments described by a JSON Schema 2020-12 document.", SCHEMA_2020_12),
    tool("test_reconnection", "Closes its SSE stream before answering, when the client can resume the stream."),
]


def text(value: str) -> types.TextContent:
    """A text content block."""
    return types.TextContent(type="text", text=value)


def image() -> types.ImageContent:
    """The PNG as an image content block."""
    return types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")


def embedded(uri: str, mime: str, body: str) -> types.EmbeddedResource:
    """A text resource embedded in a result."""
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mimeType=mime, text=body)
    )


def fixed_result(name: str) -> list[types.ContentBlock] | None:
    """The answer of the tools whose answer never changes; `None` for the others."""
    match name:
        case "test_simple_text":
            return [text("This is a simple text response for testing.")]
        case "test_image_content":
            return [image()]
        case "test_audio_content":
            return [types.AudioContent(type="audio", data=WAV_B64, mimeType="audio/wav")]
        case "test_embedded_resource":
            return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]
        case "test_resource_link":
            link = types.ResourceLink(
                type="resource_link",
                uri="test://static-text",
                name="static-text",
                description="The static text resource",
                mimeType="text/plain",
            )
            return [text("The static text resource:"), link]
        case "test_multiple_content_types":
            body = json.dumps({"test": "data", "value": 123})
            return [
                text("Multiple content types test:"),
                image(),
                embedded("test://mixed-content-resource", "application/json", body),
            ]
    return None


# ---- per-session state: log level, subscriptions ------------------------------------------------

LEVELS: list[str] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
log_levels: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()
subscriptions: weakref.WeakKeyDictionary[ServerSession, set[str]] = weakref.WeakKeyDictionary()


class Fixture(Server):
    """The low-level server, announcing resource subscriptions (which it supports)."""

    def get_capabilities(
        self, notification_options: NotificationOptions, experimental_capabilities: dict[str, dict[str, Any]]
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(notification_options, experimental_capabilities)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


server = Fixture("toolguard-conformance-fixture", version="1.0.0")


def context() -> Any:
    """The context of the request being handled."""
    return server.request_context


async def log(message: str, level: types.LoggingLevel = "info") -> None:
    """A log message about the current request, unless the client asked for a higher level."""
    ctx = context()
    wanted = log_levels.get(ctx.session, "debug")
    if LEVELS.index(level) >= LEVELS.index(wanted):
        await ctx.session.send_log_message(level, message, logger="fixture", related_request_id=ctx.request_id)


@server.set_logging_level()
async def set_level(level: types.LoggingLevel) -> None:
    """Remembers the client's level for this session."""
    log_levels[context().session] = level


# ---- tools that talk back -----------------------------------------------------------------------


async def with_logging() -> list[types.ContentBlock]:
    """Three log messages, 50 ms apart."""
    await log("Tool execution started")
    await asyncio.sleep(0.05)
    await log("Tool processing data")
    await asyncio.sleep(0.05)
    await log("Tool execution completed")
    return [text("Tool with logging executed successfully")]


async def with_progress() -> list[types.ContentBlock]:
    """Progress 0, 50, 100 of 100 on the caller's token, 50 ms apart."""
    ctx = context()
    token = ctx.meta.progressToken if ctx.meta else None
    for step, value in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        if token is not None:
            await ctx.session.send_progress_notification(
                token, value, total=100, message=f"step {step + 1} of 3", related_request_id=ctx.request_id
            )
    return [text("Tool with progress executed successfully")]


def client_can(capability: types.ClientCapabilities) -> bool:
    """Whether the client declared `capability`."""
    return context().session.check_client_capability(capability)


async def sampling(prompt: str) -> list[types.ContentBlock]:
    """Asks the client's LLM; its reply, quoted."""
    if not client_can(types.ClientCapabilities(sampling=types.SamplingCapability())):
        raise ValueError("the client does not support sampling")
    ctx = context()
    reply = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=text(prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    said = reply.content.text if isinstance(reply.content, types.TextContent) else json.dumps(
        reply.model_dump(mode="json", exclude_none=True)["content"]
    )
    return [text(f"LLM response: {said}")]


async def elicit(message: str, schema: dict[str, Any]) -> types.ElicitResult:
    """Asks the user, through the client, to fill `schema`."""
    if not client_can(types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        raise ValueError("the client does not support elicitation")
    ctx = context()
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


def described(result: types.ElicitResult, prefix: str) -> list[types.ContentBlock]:
    """The user's answer as a text block."""
    return [text(f"{prefix}: action={result.action}, content={json.dumps(result.content or {})}")]


CONTACT_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

DEFAULTS_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}


def choices(prefix: str, titles: list[str]) -> list[dict[str, str]]:
    """`const`/`title` pairs: `{prefix}1` titled with the first title, and so on."""
    return [{"const": f"{prefix}{i}", "title": title} for i, title in enumerate(titles, start=1)]


ENUMS_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": choices("value", ["First Option", "Second Option", "Third Option"]),
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": choices("value", ["First Choice", "Second Choice", "Third Choice"])},
        },
    },
}


async def reconnection() -> list[types.ContentBlock]:
    """Closes the request's SSE stream (the client resumes it), then answers on the new one."""
    ctx = context()
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await asyncio.sleep(0.1)
    return [text("Reconnection test completed successfully")]


async def interactive(name: str, arguments: dict[str, Any]) -> list[types.ContentBlock] | None:
    """The tools that send notifications or requests back while they run; `None` for others."""
    match name:
        case "test_tool_with_logging":
            return await with_logging()
        case "test_tool_with_progress":
            return await with_progress()
        case "test_sampling":
            return await sampling(str(arguments["prompt"]))
        case "test_elicitation":
            return described(await elicit(str(arguments["message"]), CONTACT_FORM), "User response")
        case "test_elicitation_sep1034_defaults":
            form = "Please review your profile; every field has a default"
            return described(await elicit(form, DEFAULTS_FORM), "Elicitation completed")
        case "test_elicitation_sep1330_enums":
            return described(await elicit("Please choose options", ENUMS_FORM), "Elicitation completed")
        case "test_reconnection":
            return await reconnection()
    return None


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    """Every tool."""
    return TOOLS


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
    """Runs a tool; an exception becomes a tool error (`isError`) in the SDK."""
    if (fixed := fixed_result(name)) is not None:
        return fixed
    if (answer := await interactive(name, arguments)) is not None:
        return answer
    match name:
        case "test_structured_content":
            return {"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65}
        case "json_schema_2020_12_tool":
            return [text(f"Received: {json.dumps(arguments, sort_keys=True)}")]
        case "test_error_handling":
            raise RuntimeError("This tool intentionally returns an error for testing")
    raise ValueError(f"unknown tool: {name}")


# ---- resources ----------------------------------------------------------------------------------

STATIC_TEXT = "This is the content of the static text resource."
TEMPLATE = re.compile(r"^test://template/(?P<id>[^/]+)/data$")
RESOURCES: list[types.Resource] = [
    types.Resource(
        uri="test://static-text", name="static-text", description="A fixed text", mimeType="text/plain"
    ),
    types.Resource(
        uri="test://static-binary", name="static-binary", description="A 1x1 PNG image", mimeType="image/png"
    ),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A text that can be subscribed to",
        mimeType="text/plain",
    ),
]


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    """The direct resources."""
    return RESOURCES


@server.list_resource_templates()
async def list_templates() -> list[types.ResourceTemplate]:
    """The one resource template."""
    return [
        types.ResourceTemplate(
            uriTemplate="test://template/{id}/data",
            name="template-data",
            description="JSON data about the item `id`",
            mimeType="application/json",
        )
    ]


@server.read_resource()
async def read_resource(uri: Any) -> list[ReadResourceContents]:
    """The contents of a resource; an unknown URI is a "resource not found" error."""
    address = str(uri)
    if address == "test://static-text":
        return [ReadResourceContents(STATIC_TEXT, "text/plain")]
    if address == "test://static-binary":
        return [ReadResourceContents(png_pixel(), "image/png")]
    if address == "test://watched-resource":
        return [ReadResourceContents("The watched resource, unchanged.", "text/plain")]
    if found := TEMPLATE.match(address):
        item = found["id"]
        body = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
        return [ReadResourceContents(body, "application/json")]
    raise McpError(types.ErrorData(code=-32002, message=f"Resource not found: {address}", data={"uri": address}))


@server.subscribe_resource()
async def subscribe(uri: Any) -> None:
    """Remembers the subscription for this session."""
    subscriptions.setdefault(context().session, set()).add(str(uri))


@server.unsubscribe_resource()
async def unsubscribe(uri: Any) -> None:
    """Forgets the subscription for this session."""
    subscriptions.get(context().session, set()).discard(str(uri))


# ---- prompts ------------------------------------------------------------------------------------


def argument(name: str, description: str) -> types.PromptArgument:
    """A required prompt argument."""
    return types.PromptArgument(name=name, description=description, required=True)


PROMPTS: list[types.Prompt] = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt that quotes its two arguments",
        arguments=[argument("arg1", "First test argument"), argument("arg2", "Second test argument")],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[argument("resourceUri", "URI of the resource to embed")],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


@server.list_prompts()
async def list_prompts() -> list[types.Prompt]:
    """Every prompt."""
    return PROMPTS


def user(content: Any) -> types.PromptMessage:
    """A message from the user."""
    return types.PromptMessage(role="user", content=content)


def required(arguments: dict[str, str] | None, name: str) -> str:
    """A required prompt argument; a missing one is an invalid-params error."""
    value = (arguments or {}).get(name)
    if value is None:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"missing prompt argument `{name}`"))
    return value


@server.get_prompt()
async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    """A prompt's messages; an unknown prompt is an invalid-params error."""
    match name:
        case "test_simple_prompt":
            messages = [user(text("This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            first, second = required(arguments, "arg1"), required(arguments, "arg2")
            messages = [user(text(f"Prompt with arguments: arg1='{first}', arg2='{second}'"))]
        case "test_prompt_with_embedded_resource":
            uri = required(arguments, "resourceUri")
            messages = [
                user(embedded(uri, "text/plain", "Embedded resource content for testing.")),
                user(text("Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            messages = [user(image()), user(text("Please analyze the image above."))]
        case _:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"unknown prompt: {name}"))
    return types.GetPromptResult(description=f"The {name} prompt", messages=messages)


# ---- completion ---------------------------------------------------------------------------------

SUGGESTIONS: dict[tuple[str, str], list[str]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testing"],
    ("test_prompt_with_arguments", "arg2"): ["world", "word", "work"],
    ("test://template/{id}/data", "id"): ["1", "12", "123", "42"],
}


@server.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    _context: types.CompletionContext | None,
) -> types.Completion:
    """The known values of an argument that start with what the user typed."""
    owner = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    values = [v for v in SUGGESTIONS.get((owner, argument.name), []) if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


# ---- transport ----------------------------------------------------------------------------------


class MemoryEventStore(EventStore):
    """Every SSE event the server sent, kept in memory, so a client can resume a stream."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, types.JSONRPCMessage | None]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        at = next((i for i, (e, _, _) in enumerate(self.events) if e == last_event_id), None)
        if at is None:
            return None
        stream = self.events[at][1]
        for event_id, stream_id, message in self.events[at + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class Endpoint:
    """The MCP endpoint as an ASGI application (a route to it is not redirected to `/mcp/`)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


LOOPBACK = ["127.0.0.1", "localhost", "[::1]"]


def application() -> Starlette:
    """The HTTP application: the MCP endpoint at `/mcp`."""
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in LOOPBACK] + LOOPBACK,
        allowed_origins=[f"http://{h}:*" for h in LOOPBACK] + [f"http://{h}" for h in LOOPBACK],
    )
    manager = StreamableHTTPSessionManager(
        app=server, event_store=MemoryEventStore(), security_settings=security, retry_interval=500
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    route = Route("/mcp", endpoint=Endpoint(manager), methods=["GET", "POST", "DELETE"])
    return Starlette(routes=[route], lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description="toolguard's MCP conformance fixture server")
    parser.add_argument(
        "--port",
        type=int,
        required=True,
        help="port to listen on, on 127.0.0.1; 0 picks a free one and prints `listening PORT` once it listens",
    )
    parser.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"], help="of the server's own log"
    )
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # The socket is bound here, so that the port printed is the one this server holds (a port
    # chosen by the caller could be taken by another process before the server binds it).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(application(), log_level=args.log_level))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
