"""Parsing a command line as Android's shell (mksh) does, for what lab tools send: words with
single and double quotes and backslashes, $NAME / ${NAME} / $? expanded outside single quotes,
assignments, the operators ; && || | and the redirections > >> 2>&1 2>/dev/null. What it does not
implement (command substitution, subshells, braces, here-documents, background jobs, control
structures) is a ShellSyntaxError naming it, so the shell refuses loudly instead of answering
wrongly."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

OPERATORS = ("&&", "||", ";", "|", "\n")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function",
             "select"}


class ShellSyntaxError(Exception):
    """A line this shell cannot run as mksh would: the message says what and why."""


@dataclass
class Word:
    text: str
    globbable: bool  # an unquoted glob character is in it


@dataclass
class Command:
    assignments: list[tuple[str, str]] = field(default_factory=list)
    argv: list[Word] = field(default_factory=list)
    stdout_to: str | None = None
    append: bool = False
    stderr: str | None = None  # None (kept apart), "stdout" (2>&1), "null" (2>/dev/null)


@dataclass
class Pipeline:
    op_before: str  # ";", "&&", "||": how it joins the previous one
    commands: list[Command]


Lookup = Callable[[str], str]


def _expand(line: str, i: int, lookup: Lookup) -> tuple[str, int]:
    """Expand the $ at line[i]; returns (text, index after it)."""
    nxt = line[i + 1] if i + 1 < len(line) else ""
    if nxt == "?" or nxt == "$" or nxt == "#" or nxt.isdigit():
        return lookup(nxt), i + 2
    if nxt == "{":
        end = line.find("}", i + 2)
        name = line[i + 2:end] if end > 0 else ""
        if end < 0 or not _NAME.fullmatch(name):
            raise ShellSyntaxError(f"${{{line[i + 2:end if end > 0 else None]}}}: bad substitution (only ${{NAME}} "
                                   "is expanded by the emulated shell)")
        return lookup(name), end + 1
    if nxt == "(":
        raise ShellSyntaxError("$(...) command substitution is not implemented by the emulated shell")
    found = _NAME.match(line, i + 1)
    if found:
        return lookup(found.group()), found.end()
    return "$", i + 1


def tokenize(line: str, lookup: Lookup) -> list[Word | str]:
    """Words (expanded) and operator strings."""
    tokens: list[Word | str] = []
    buf: list[str] = []
    started, globbable, i = False, False, 0

    def flush() -> None:
        nonlocal buf, started, globbable
        if started:
            tokens.append(Word("".join(buf), globbable))
        buf, started, globbable = [], False, False

    while i < len(line):
        ch = line[i]
        if ch == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated ' quote")
            buf.append(line[i + 1:end])
            started, i = True, end + 1
        elif ch == '"':
            i += 1
            started = True
            while True:
                if i >= len(line):
                    raise ShellSyntaxError('unterminated " quote')
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < len(line) and line[i + 1] in '"\\$`\n':
                    buf.append(line[i + 1])
                    i += 2
                elif c == "$":
                    text, i = _expand(line, i, lookup)
                    buf.append(text)
                elif c == "`":
                    raise ShellSyntaxError("`...` command substitution is not implemented by the emulated shell")
                else:
                    buf.append(c)
                    i += 1
        elif ch == "\\":
            if i + 1 < len(line):
                if line[i + 1] != "\n":
                    buf.append(line[i + 1])
                    started = True
                i += 2
            else:
                i += 1
        elif ch == "$":
            text, i = _expand(line, i, lookup)
            buf.append(text)
            started = started or bool(text)
        elif ch == "`":
            raise ShellSyntaxError("`...` command substitution is not implemented by the emulated shell")
        elif ch in " \t":
            flush()
            i += 1
        elif ch == "#" and not started:
            break  # a comment to the end of the line
        elif line.startswith(("&&", "||", ">>", "2>&1", "2>"), i) and not (ch == "2" and started):
            flush()
            op = next(o for o in ("2>&1", "&&", "||", ">>", "2>") if line.startswith(o, i))
            tokens.append(op)
            i += len(op)
        elif ch in ";|>\n":
            flush()
            tokens.append(ch)
            i += 1
        elif ch in "&<(){}":
            what = {"&": "background jobs (&)", "<": "input redirection (<)", "(": "subshells ( )",
                    ")": "subshells ( )", "{": "command groups { }", "}": "command groups { }"}[ch]
            raise ShellSyntaxError(f"{what}: not implemented by the emulated shell")
        else:
            if ch in "*?[":
                globbable = True
            buf.append(ch)
            started = True
            i += 1
    flush()
    return tokens


def parse(line: str, lookup: Lookup) -> list[Pipeline]:
    """A command list: pipelines joined by ; && ||. Variables are expanded as the line is read
    (mksh expands each command just before it runs; lab tools do not depend on the difference
    within one line except `X=1; echo $X`, which `run` handles by parsing segment by segment)."""
    tokens = tokenize(line, lookup)
    pipelines: list[Pipeline] = []
    op_before, commands, cmd = ";", [], Command()

    def end_command(required: bool) -> None:
        nonlocal cmd
        if not cmd.argv and not cmd.assignments:
            if required:
                raise ShellSyntaxError("syntax error: a command is missing around an operator")
        else:
            commands.append(cmd)
        cmd = Command()

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if isinstance(tok, Word):
            if not cmd.argv and "=" in tok.text and _NAME.fullmatch(tok.text.partition("=")[0]):
                name, _, value = tok.text.partition("=")
                cmd.assignments.append((name, value))
            elif not cmd.argv and tok.text in _KEYWORDS:
                raise ShellSyntaxError(f"'{tok.text}': shell control structures are not implemented by the "
                                       "emulated shell")
            else:
                cmd.argv.append(tok)
        elif tok in (">", ">>", "2>"):
            target = tokens[i + 1] if i + 1 < len(tokens) else None
            if not isinstance(target, Word):
                raise ShellSyntaxError(f"syntax error: {tok} needs a file name")
            if tok == "2>":
                if target.text != "/dev/null":
                    raise ShellSyntaxError("2> to a file is not implemented by the emulated shell (2>/dev/null "
                                           "and 2>&1 are)")
                cmd.stderr = "null"
            else:
                cmd.stdout_to, cmd.append = target.text, tok == ">>"
            i += 1
        elif tok == "2>&1":
            cmd.stderr = "stdout"
        elif tok == "|":
            end_command(required=True)
        else:  # ; && || newline
            end_command(required=tok in ("&&", "||") or bool(commands))
            if commands:
                pipelines.append(Pipeline(op_before, commands))
            elif tok in ("&&", "||"):
                raise ShellSyntaxError(f"syntax error: unexpected {tok}")
            op_before, commands = (tok if tok in ("&&", "||") else ";"), []
        i += 1
    end_command(required=bool(commands) or op_before in ("&&", "||"))
    if commands:
        pipelines.append(Pipeline(op_before, commands))
    return pipelines


def split_list(line: str) -> list[tuple[str, str]]:
    """The line cut at ; && || and newlines outside quotes (for running segment by segment, so an
    assignment is seen by the commands after it): [(operator before, segment text)]."""
    parts, op, start, i, quote = [], ";", 0, 0, None
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            i += 1
        elif line.startswith(("&&", "||"), i):
            parts.append((op, line[start:i]))
            op, start = line[i:i + 2], i + 2
            i += 1
        elif ch in ";\n":
            parts.append((op, line[start:i]))
            op, start = ";", i + 1
        i += 1
    parts.append((op, line[start:]))
    return [(o, s) for o, s in parts if s.strip()] or []
