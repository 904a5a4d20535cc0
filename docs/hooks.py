"""MkDocs hooks: pages that show what the code says, generated at build time (offline, no model).

- `<!-- aiayn-openapi -->` becomes the HTTP API's reference, written from the server's own OpenAPI
  document (`aiayn.serve.create_app(...).openapi()`), and the site gets that document as openapi.json.
- `<!-- aiayn-cli: COMMAND -->` becomes `aiayn COMMAND --help`, from the real argument parser.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from types import SimpleNamespace
from typing import Any

from mkdocs.structure.files import File

CLI_MARK = re.compile(r"<!-- aiayn-cli: ([a-z0-9-]+) -->")
OPENAPI_MARK = "<!-- aiayn-openapi -->"


class _Model:
    """What the app asks of a model at start-up: its size (the schema does not depend on it)."""

    def num_parameters(self) -> int:
        return 0


class _Translator:
    """Enough of `aiayn.decode.Translator` to build the app: the schema needs no weights."""

    def __init__(self) -> None:
        from aiayn.config import ModelConfig

        self.config = ModelConfig.preset("tiny", vocab_size=8000)
        self.info = {"src_lang": "es", "tgt_lang": "en"}
        self.bundle = SimpleNamespace(model=_Model(), int8=False)


@cache
def openapi() -> dict[str, Any]:
    from aiayn.serve import create_app

    return create_app(_Translator()).openapi()


@cache
def cli_help(command: str) -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same page on every machine
    from aiayn.cli import build_parser

    commands = build_parser().get_default("subcommands")  # the subparsers by name
    if command not in commands:
        raise ValueError(f"docs: no command `aiayn {command}`")
    return commands[command].format_help()


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        items = schema.get("items", {})
        return f"list of ({_type(items)})" if "anyOf" in items else f"list of {_type(items)}"
    return str(schema.get("type", "any"))


def _bounds(schema: dict[str, Any]) -> str:
    keys = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength")
    keys += ("minItems", "maxItems")
    parts = [f"{k} {schema[k]}" for k in keys if k in schema]
    for sub in schema.get("anyOf", []):
        parts += [f"{k} {sub[k]}" for k in keys if k in sub]
    return ", ".join(parts)


def _cell(text: Any) -> str:
    """Prose in a table cell: no cell breaks, `</s>` is text and `[layer][head]` is not a link."""
    text = str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("[", "\\[").replace("]", "\\]")


def _schema_md(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        lines += ["| field | type | default | bounds | description |", "|---|---|---|---|---|"]
        for field, sub in props.items():
            default = "required" if field in required else json.dumps(sub.get("default"))
            described = _cell(sub.get("description", ""))
            lines.append(f"| `{field}` | {_type(sub)} | {_cell(default)} | {_bounds(sub)} | {described} |")
        lines.append("")
    if "enum" in schema:
        lines += ["one of: " + ", ".join(f"`{v}`" for v in schema["enum"]), ""]
    return lines


def openapi_md() -> str:
    doc = openapi()
    lines = ["## Endpoints", ""]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            lines += [f"### `{method.upper()} {path}`", ""]
            if op.get("description") or op.get("summary"):
                lines += [_cell(op.get("description") or op.get("summary")), ""]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            if body:
                lines += [f"Request body: {_type(body['schema'])}", ""]
            for status, response in op.get("responses", {}).items():
                content = response.get("content", {})
                schema = next(iter(content.values()), {}).get("schema", {}) if content else {}
                shown = _type(schema) if schema else "-"
                lines.append(f"- {status} ({_cell(response.get('description', ''))}): {shown}")
            lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += _schema_md(name, schema)
    return "\n".join(lines)


def on_files(files, config):
    text = json.dumps(openapi(), indent=2, ensure_ascii=False)
    files.append(File.generated(config, "openapi.json", content=text))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if OPENAPI_MARK in markdown:
        markdown = markdown.replace(OPENAPI_MARK, openapi_md())
    return CLI_MARK.sub(lambda m: f"```text\n{cli_help(m.group(1)).rstrip()}\n```", markdown)
