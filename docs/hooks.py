"""MkDocs hooks: pages that show what the code says, generated at build time (offline, no model).

- `<!-- aiayn-openapi -->` becomes the HTTP API's reference, written from the server's own OpenAPI
  document (`aiayn.serve.create_app(...).openapi()`), and the site gets that document as openapi.json.
- `<!-- aiayn-cli: COMMAND -->` becomes `aiayn COMMAND --help`, from the real argument parser, and
  `<!-- aiayn-cli-commands -->` the table of every command with its help line; the build fails when
  a command of the parser has no page cli/COMMAND.md.
- `<!-- aiayn-config: SECTION -->` becomes the table of a config section's keys (`model`, `train`,
  `decode`, `sampling`), each with its type, its default and the comment beside it in aiayn.config.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import os
import re
import textwrap
import tokenize
from functools import cache
from types import SimpleNamespace
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

CLI_MARK = re.compile(r"<!-- aiayn-cli: ([a-z0-9-]+) -->")
COMMANDS_MARK = "<!-- aiayn-cli-commands -->"
CONFIG_MARK = re.compile(r"<!-- aiayn-config: ([a-z]+) -->")
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
def cli_commands() -> dict[str, tuple[Any, str]]:
    """The parser's commands in its order: name -> (its parser, its help line)."""
    os.environ["COLUMNS"] = "92"  # argparse wraps at COLUMNS - 2: the same page on every machine, 90 wide
    from aiayn.cli import build_parser

    parser = build_parser()
    parsers = parser.get_default("subcommands")  # the subparsers by name
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
    return {name: (sub, helps.get(name) or "") for name, sub in parsers.items()}


def cli_help(command: str) -> str:
    if command not in cli_commands():
        raise PluginError(f"docs: no command `aiayn {command}`")
    return cli_commands()[command][0].format_help()


def commands_md() -> str:
    """The table of every command: its page and its help line."""
    rows = ["| command | what it does |", "|---|---|"]
    for name, (_, help_line) in cli_commands().items():
        rows.append(f"| [`{name}`]({name}.md) | {_cell(help_line[:1].upper() + help_line[1:])}. |")
    return "\n".join(rows)


def _config_classes() -> dict[str, type]:
    from aiayn.config import DecodeConfig, ModelConfig, SamplingConfig, TrainConfig

    return {"model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig, "sampling": SamplingConfig}


def _field_comments(cls: type) -> dict[str, str]:
    """Each field's comment in the class's source: the one beside it, after those on the lines
    just above it (a comment that needs several lines stands above its field)."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    lines = source.splitlines()
    found = {}
    for number, line in enumerate(lines, 1):
        match = re.match(r"\s+(\w+): ", line)
        if not match or match.group(1) not in {f.name for f in dataclasses.fields(cls)}:
            continue
        above, before = [], number - 1
        while before in comments and lines[before - 1].lstrip().startswith("#"):
            above.insert(0, comments[before])
            before -= 1
        found[match.group(1)] = " ".join(above + ([comments[number]] if number in comments else []))
    return found


def config_md(section: str) -> str:
    """The keys of one config section: name, type, default, what the source says of it."""
    classes = _config_classes()
    if section not in classes:
        raise PluginError(f"docs: no config section {section!r} (one of {', '.join(classes)})")
    cls = classes[section]
    comments = _field_comments(cls)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        shown = "null" if default is None else json.dumps(default)
        rows.append(f"| `{f.name}` | `{f.type}` | `{shown}` | {_cell(comments.get(f.name, ''))} |")
    return "\n".join(rows)


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
    missing = [name for name in cli_commands() if files.get_file_from_path(f"cli/{name}.md") is None]
    if missing:
        raise PluginError(f"docs: no page for {', '.join(missing)}: write docs/cli/COMMAND.md for each")
    text = json.dumps(openapi(), indent=2, ensure_ascii=False)
    files.append(File.generated(config, "openapi.json", content=text))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if OPENAPI_MARK in markdown:
        markdown = markdown.replace(OPENAPI_MARK, openapi_md())
    markdown = markdown.replace(COMMANDS_MARK, commands_md()) if COMMANDS_MARK in markdown else markdown
    markdown = CONFIG_MARK.sub(lambda m: config_md(m.group(1)), markdown)
    return CLI_MARK.sub(lambda m: f"```text\n{cli_help(m.group(1)).rstrip()}\n```", markdown)
