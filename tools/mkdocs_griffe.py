"""Griffe extension for the documentation site (mkdocs.yml loads it; the package does not import it).

attnlab's docstrings are reStructuredText (Sphinx roles, ``*`` as a plain character), and mkdocstrings renders them as
Markdown. Without this extension the API page would:

* omit every function a paper package re-exports as ``name = _float64(module.name)``: griffe sees an attribute
  without a docstring. Each becomes an alias of the function it wraps, so it is documented under the package's name
  with the wrapped function's signature and docstring;
* print Sphinx roles raw (``:func:`x64```). Each becomes a code span linked to the object where the site documents it
  (an optional cross-reference: a target the site does not document stays plain code);
* read ``k*`` or ``eps*`` as emphasis markers and ``<x, y>`` as an HTML tag, dropping text. Outside code, a ``*``
  that does not open or close reST emphasis is escaped, and ``<`` is written ``&lt;``;
* print a literal block's ``::`` marker (reST drops it, or keeps one colon after a word) and read the block as prose.
  The block becomes a fenced code block;
* end a list item at its second paragraph, or read the next item as text: Markdown wants list items' contents
  indented by 4 columns (reST aligns them with the item's text) and a blank line before the next item after a
  paragraph. Both are added.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_FLOAT64 = {"attnlab.runtime.float64"}
_ROLE = re.compile(r":(?:func|class|meth|attr|mod|data|exc|obj):`(~?)([A-Za-z_][\w.]*)`")
_CODE = re.compile(r"(``.+?``|`[^`\n]+`)", re.S)
# reST inline markup: a start string after whitespace or an opening punctuation mark and before a non-space, an end
# string after a non-space and before whitespace, a closing punctuation mark or the end of the text.
_EMPHASIS = re.compile(r"(?<![^\s\-:/'\"<(\[{])(\*\*?)(?=[^\s*])(.+?)(?<=[^\s*])\1(?=[\s\-.,:;!?\\/'\")\]}>]|$)")
_BULLET = re.compile(r"^(\s*)\* ")


def _wrapped_target(attr: griffe.Attribute) -> str | None:
    """The path of the function that ``attr`` names (``name = module.function``) or wraps (``float64(function)``)."""
    value = attr.value
    if isinstance(value, griffe.ExprCall) and len(value.arguments) == 1:
        if getattr(value.function, "canonical_path", None) not in _FLOAT64:
            return None
        value = value.arguments[0]
    if isinstance(value, (griffe.ExprName, griffe.ExprAttribute)):
        return value.canonical_path
    return None


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full path of a role's target as Sphinx would look it up from ``obj``'s docstring."""
    if target.startswith("attnlab."):
        return target
    scope: griffe.Object | None = obj if (obj.is_module or obj.is_class) else obj.parent
    head, _, tail = target.partition(".")
    while scope is not None:
        if head in scope.members:
            member = scope.members[head]
            path = member.target_path if member.is_alias else member.path
            return f"{path}.{tail}" if tail else path
        scope = scope.parent
    return target


def _escape_prose(text: str) -> str:
    """Escape the ``*`` that are not reST emphasis, and every ``<``, in a stretch of prose without code spans."""
    spans = []

    def keep(match: re.Match) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    text = _EMPHASIS.sub(keep, text)
    lines = []
    for line in text.split("\n"):
        bullet = _BULLET.match(line)
        head, rest = (line[:bullet.end()], line[bullet.end():]) if bullet else ("", line)
        lines.append(head + rest.replace("*", r"\*").replace("<", "&lt;"))
    text = "\n".join(lines)
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m.group(1))], text)


_ITEM = re.compile(r"^( *)([*+-]|\d+[.)]) +(?=\S)")


def _reindent_lists(lines: list[str]) -> list[str]:
    """Indent the contents of reST list items (aligned with the item's text) by 4 columns, as Markdown needs."""
    out: list[str] = []
    stack: list[tuple[int, int]] = []  # per open item: (its text's column in reST, in Markdown)
    literal: tuple[int, int] | None = None  # in a literal block: (its marker line's indent, the shift)
    loose = False  # a blank line since the last item began: Markdown needs one before the next item too
    after_blank = True
    for line in lines:
        if not line.strip():
            out.append(line)
            loose = loose or bool(stack)
            after_blank = True
            continue
        was_blank, after_blank = after_blank, False
        indent = len(line) - len(line.lstrip(" "))
        if literal is not None:
            if indent > literal[0]:
                out.append(" " * (indent + literal[1]) + line.lstrip(" "))
                continue
            literal = None
        depth = len(stack)
        while stack and indent < stack[-1][0]:
            stack.pop()
        column = stack[-1][1] + indent - stack[-1][0] if stack else indent
        # reST: a list starts after a blank line; a next item may follow its previous item's text directly
        item = _ITEM.match(line) if (was_blank or len(stack) < depth) else None
        if item and loose and out and out[-1].strip():
            out.append("")
        out.append(" " * column + line.lstrip(" "))
        if item:
            loose = False
            stack.append((item.end(), column + 4))
            out[-1] = " " * column + item.group(2) + " " * (4 - len(item.group(2))) + line[item.end():]
        if line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            literal = (item.end(), column + 4 - item.end()) if item else (indent, column - indent)
    return out


def _convert(obj: griffe.Object, text: str) -> str:
    """The docstring ``text`` of ``obj`` as Markdown that reads as the reST does."""
    lines = _reindent_lists(text.split("\n"))
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not (line.rstrip().endswith("::") and not line.lstrip().startswith("..")):
            prose.append(line)
            continue
        # A literal block: the indented lines after a paragraph that ends with "::" (a fenced block in Markdown).
        indent = len(line) - len(line.lstrip(" ")) + (4 if _ITEM.match(line) else 0)
        marker = line.rstrip()[:-2]
        prose.append(marker.rstrip() if marker.endswith(" ") or not marker.strip() else marker + ":")
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip(" ")) > indent):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
            i -= 1
        if not any(b.strip() for b in block):
            continue
        out.append(_convert_prose(obj, "\n".join(prose)))
        prose.clear()
        body = [b for b in block if b.strip() or block.index(b) > 0]
        while body and not body[0].strip():
            body.pop(0)
        depth = min(len(b) - len(b.lstrip(" ")) for b in body if b.strip())
        pad = " " * indent
        out.append("")
        out.append(pad + "```text")
        out.extend(pad + b[depth:] if b.strip() else "" for b in body)
        out.append(pad + "```")
    out.append(_convert_prose(obj, "\n".join(prose)))
    return "\n".join(out)


def _convert_prose(obj: griffe.Object, text: str) -> str:
    parts = _CODE.split(text)
    for k in range(0, len(parts), 2):  # prose between code spans; a role's backquoted target is split off with it
        parts[k] = _escape_prose(parts[k])
    text = "".join(parts)

    def role(match: re.Match) -> str:
        short, target = match.group(1), match.group(2)
        shown = target.rsplit(".", 1)[-1] if short else target
        return f'<autoref identifier="{_resolve(obj, target)}" optional>`{shown}`</autoref>'

    return _ROLE.sub(role, text)


class AttnlabDocs(griffe.Extension):
    """Float64 re-exports as aliases; reST docstrings as Markdown (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "attnlab" or pkg.extra["attnlab_docs"].get("done"):
            return
        pkg.extra["attnlab_docs"]["done"] = True  # the docstrings are converted once
        self._aliases(pkg, loader.modules_collection)
        self._docstrings(pkg, set())

    on_package_loaded = on_package  # the same event's name before griffe 2

    def _aliases(self, module: griffe.Module, collection: griffe.ModulesCollection) -> None:
        for name, member in list(module.members.items()):
            if member.is_alias:
                continue
            if member.is_module:
                self._aliases(member, collection)
            elif member.is_attribute and (target := _wrapped_target(member)) and target.startswith("attnlab."):
                try:
                    is_function = collection[target].is_function
                except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                    is_function = False
                if is_function:
                    module.set_member(name, griffe.Alias(name, target, parent=module))

    def _docstrings(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = _convert(obj, obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._docstrings(member, seen)
