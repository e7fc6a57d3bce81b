"""An MCP server written the way Python tool servers usually are (FastMCP), for the gateway's
tests: third-party field names (`subject`, `user`, `sender`), float amounts, optional arrays,
scheme-less URLs, virtual paths, optional participants and choices (`Literal`, an `enum`). Every call is appended as one JSON
line to the file named by OFFICE_LOG, so tests can see what reached the server."""

import json
import os
from typing import Literal

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("office")


def record(tool: str, **args) -> str:
    with open(os.environ["OFFICE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "args": args}) + "\n")
    return "done"


@mcp.tool()
def send_email(recipients: list[str], subject: str, body: str,
               cc: list[str] | None = None) -> str:
    """Sends an e-mail."""
    return record("send_email", recipients=recipients, subject=subject, body=body, cc=cc)


@mcp.tool()
def send_channel_message(user: str, sender: str, text: str) -> str:
    """Posts a chat message to a user, signed with a display name."""
    return record("send_channel_message", user=user, sender=sender, text=text)


@mcp.tool()
def send_money(recipient: str, amount: float, subject: str) -> str:
    """Transfers money to an IBAN."""
    return record("send_money", recipient=recipient, amount=amount, subject=subject)


@mcp.tool()
def update_scheduled_transaction(id: int, amount: int | None = None,
                                 recipient: str | None = None) -> str:
    """Changes a standing order (amount in cents)."""
    return record("update_scheduled_transaction", id=id, amount=amount, recipient=recipient)


@mcp.tool()
def get_webpage(url: str) -> str:
    """Fetches a web page."""
    record("get_webpage", url=url)
    return "<html>the page</html>"


@mcp.tool()
def read_file(file_path: str) -> str:
    """Reads a file of the user's cloud drive."""
    record("read_file", file_path=file_path)
    return "contents of " + file_path


@mcp.tool()
def create_calendar_event(title: str, start_time: str,
                          participants: list[str] | None = None) -> str:
    """Creates a calendar event, inviting the participants by e-mail."""
    return record("create_calendar_event", title=title, start_time=start_time,
                  participants=participants)


@mcp.tool()
def set_card_state(card: str, state: Literal["active", "frozen", "cancelled"]) -> str:
    """Freezes, unfreezes or cancels a payment card."""
    return record("set_card_state", card=card, state=state)


@mcp.tool()
def close_account(account: str) -> str:
    """Closes a bank account for good."""
    return record("close_account", account=account)


if __name__ == "__main__":
    mcp.run()
