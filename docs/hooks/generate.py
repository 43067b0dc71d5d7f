"""MkDocs hook: the pages made from the code when the site is built.

``cli.md`` gets every command of ``probes.cli.build_parser()`` (subcommands walked), and
``schemas.md`` every schema of ``probes/report/json_schemas/``, each where its page has the
``<!-- generated: NAME -->`` marker. Nothing generated is committed, so neither can drift.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WIDTH = 100


def _schemas() -> Path:
    """The shipped schemas, found through the package (the site may be built from a copy)."""
    import probes

    return Path(probes.__file__).resolve().parent / "report" / "json_schemas"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(f"`{o}`" for o in action.option_strings)
            if action.nargs != 0:
                name += f" `{action.metavar or action.dest.upper()}`"
        else:
            name = f"`{action.metavar or action.dest}`"
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        help_text = help_text.replace("%%", "%")
        if action.choices and not isinstance(action.choices, dict):
            help_text += f" (one of: {', '.join(map(str, action.choices))})"
        rows.append(f"| {_cell(name)} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| argument | meaning |", "|---|---|", *rows, ""]


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _command(parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}`", ""]
    for text in dict.fromkeys(t.strip() for t in (summary, parser.description or "") if t):
        lines += [text, ""]
    lines += ["```text", _usage(parser), "```", "", *_options(parser)]
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for _name, help_text, sub in _subcommands(parser):
        lines += _command(sub, help_text, min(level + 1, 4))
    return lines


def cli_reference() -> str:
    """Markdown for every command of ``loopprobe``, from the parser itself."""
    from probes.cli import build_parser

    parser = build_parser()
    lines = [f"`{parser.prog}` has these commands:", ""]
    lines += [f"- [`{name}`](#{parser.prog}-{name}): {help_text}"
              for name, help_text, _ in _subcommands(parser)]
    lines.append("")
    for _name, help_text, sub in _subcommands(parser):
        lines += _command(sub, help_text, 2)
    return "\n".join(lines)


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return "`" + str(spec["$ref"]).rsplit("/", 1)[-1] + "`"
    if "anyOf" in spec:
        return " or ".join(_type(s) for s in spec["anyOf"])
    if "enum" in spec:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    kind = spec.get("type", "any")
    if kind == "array" and "items" in spec:
        return f"array of {_type(spec['items'])}"
    return str(kind) if isinstance(kind, str) else " or ".join(kind)


def _properties(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return [f"Type: {_type(schema)}.", ""]
    required = set(schema.get("required", ()))
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, spec in properties.items():
        rows.append(f"| `{name}` | {_cell(_type(spec))} | {'yes' if name in required else ''} "
                    f"| {_cell(spec.get('description', ''))} |")
    return [*rows, ""]


def schemas_reference() -> str:
    """Markdown for every shipped JSON Schema: its fields, and its definitions."""
    lines: list[str] = []
    for path in sorted(_schemas().glob("*.schema.json")):
        schema = json.loads(path.read_text())
        title = f": {schema['title']}" if "title" in schema else ""
        lines += [f"## {path.name.removesuffix('.schema.json')}", "",
                  f"`probes/report/json_schemas/{path.name}`{title}", ""]
        if schema.get("description"):
            lines += [schema["description"].strip(), ""]
        lines += _properties(schema)
        for name, definition in schema.get("$defs", {}).items():
            lines += [f"**`{name}`**" + (f": {_cell(definition['description'])}"
                                         if definition.get("description") else ""), ""]
            lines += _properties(definition)
    return "\n".join(lines)


GENERATORS = {"cli.md": cli_reference, "schemas.md": schemas_reference}


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    generate = GENERATORS.get(page.file.src_uri)
    if generate is None:
        return markdown
    marker = f"<!-- generated: {page.file.src_uri.removesuffix('.md')} -->"
    if marker not in markdown:
        raise ValueError(f"docs/{page.file.src_uri}: expected the marker {marker}")
    return markdown.replace(marker, generate())
