#!/usr/bin/env python3
"""Lists the longest C++ functions of a source tree.

    tools/function_lengths.py [--max N] [--top K] [--tests] PATH...

A function's length ("lines") is the number of lines from the first line of
its declaration (template line included) to its closing brace, blank and
comment lines included: what a reader has to scroll through. "code" leaves
out blank and comment-only lines. Lambdas and local classes count toward the
function that holds them. Test sources (*_unittest.cc, *_test.cc, *_fuzz*.cc,
*_benchmark.cc, testing/ and tests/ folders) are left out unless --tests is
given.

With --max N the exit status is 1 when a function is longer than N lines
(each one is printed), so the check can run in a script or CI.

This is a brace counter, not a compiler: comments, string, character and raw
string literals and preprocessor lines are blanked first, then every '{' at
namespace or class scope is classified from the text before it (namespace,
class/struct/enum, function body, or initializer). Code that only a real
parser gets right (braces split across #if branches) is rare in this tree;
such a file is reported on stderr and skipped.
"""

import argparse
import os
import re
import sys

SOURCE_EXTENSIONS = (".cc", ".cpp", ".cxx", ".c", ".h", ".hh", ".hpp")
TEST_FILE = re.compile(r"(_unittest|_test|_fuzzer|_fuzz_body|_fuzz_unittest|_benchmark)\.(cc|h)$")
TEST_DIRS = ("testing", "test", "tests")


def blank_literals(text):
    """Replaces comments, literals and preprocessor lines by spaces, keeping
    newlines (so that line numbers stay), quotes and the code around them."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # Preprocessor line, with backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        at_line_start = False
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (
                text[i - 1].isalnum() or text[i - 1] == "_") or text[i - 1] in "uU8L"):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:end - 1]) + '"')
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A string or character literal (a quote after a digit or letter
            # is a digit separator, 1'000'000).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n - 1)
            out.append(c + " " * (j - i - 1) + text[j])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template_prefix(head):
    """'template <typename T = int> void f(' -> 'void f(' (balanced <>)."""
    m = re.match(r"\s*template\s*<", head)
    if not m:
        return head
    depth, i = 1, m.end()
    while i < len(head) and depth:
        depth += {"<": 1, ">": -1}.get(head[i], 0)
        i += 1
    return strip_template_prefix(head[i:])


def classify(head):
    """What a '{' at namespace or class scope opens, from the text before it."""
    h = re.sub(r"^\s*((public|private|protected)\s*:)+", "", head)
    h = strip_template_prefix(h).strip()
    if re.match(r"(inline\s+)?namespace\b", h) or re.match(r'extern\s*"\s*"$', h):
        return "scope"
    if re.match(r"((typedef|static|const|constexpr|inline)\s+)*(class|struct|union|enum)\b", h) \
            and "(" not in h.split("{")[0].split(":")[0]:
        return "scope"
    if re.search(r"=\s*\[[^\]]*\]\s*(\(.*\))?\s*(mutable\s*)?(->.*)?$", h, re.S):
        return "function"  # a lambda that initializes a variable
    if "(" not in h:
        return "init"
    before_paren = re.sub(r"operator\s*[^\s(]+\s*", "operator ", h).split("(")[0]
    if "=" in before_paren and not re.search(r"=\s*\[[^\]]*\]\s*$", before_paren):
        return "init"
    return "function"


def function_name(head):
    lam = re.search(r"(\w+)\s*=\s*\[[^\]]*\][^=]*$", head, re.S)
    if lam:
        return lam.group(1)
    h = re.sub(r"^\s*((public|private|protected)\s*:)+", "", head)
    h = strip_template_prefix(h)
    h = re.sub(r"operator\s*\(\s*\)", "operator()", h)
    m = re.search(r"([~\w:<>,\s]*?(operator\s*[^\s(]+|[~\w]+))\s*\(", h)
    if not m:
        return "?"
    name = m.group(2)
    qual = re.search(r"((?:\w+(?:<[^()]*?>)?::)*)\s*" + re.escape(name) + r"\s*\(", h)
    return (qual.group(1) if qual else "") + name


def functions(path):
    """Yields (length, code_lines, first_line, name) for each function defined
    in `path`; code_lines leaves out blank and comment-only lines."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank_literals(f.read())
    is_code = [bool(l.strip()) for l in text.split("\n")]
    stack = []  # (kind, start_line, name); kind: scope, function, block, init
    head_start = 0  # where the text before the next '{' at scope level starts
    paren = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
            continue
        in_code = any(k in ("function", "block", "init") for k, _, _ in stack)
        if c in "([":
            paren += 1
        elif c in ")]":
            paren = max(0, paren - 1)
        elif c == ";" and paren == 0 and not in_code:
            head_start = i + 1
        elif c == "{":
            if in_code or paren > 0:
                stack.append(("block", 0, ""))
                continue
            head = text[head_start:i]
            kind = classify(head)
            if kind == "function" and re.search(r"\)\s*(noexcept\s*)?:(?!:)", head) \
                    and head.rstrip()[-1:] not in (")", "}"):
                # A member initializer a_{x} of a constructor: the body is
                # the next '{' after ')' or '}'; the head goes on.
                stack.append(("init", 0, ""))
                continue
            if kind == "function":
                first = len(head) - len(head.lstrip())
                first += len(re.match(r"((public|private|protected)\s*:\s*)*",
                                      head[first:]).group(0))
                stack.append(("function", line - head[first:].count("\n"), function_name(head)))
            else:
                stack.append((kind, 0, ""))
                if kind == "scope":
                    head_start = i + 1
        elif c == "}":
            if not stack:
                raise ValueError(f"{path}:{line}: unbalanced '}}'")
            kind, start, name = stack.pop()
            if kind == "function":
                yield line - start + 1, sum(is_code[start - 1:line]), start, name
            if kind in ("function", "scope"):
                head_start = i + 1
    if stack:
        raise ValueError(f"{path}: {len(stack)} unclosed '{{'")


def is_test_source(path):
    parts = path.replace("\\", "/").split("/")
    return bool(TEST_FILE.search(parts[-1])) or any(p in TEST_DIRS for p in parts[:-1])


def sources(paths, tests):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "build")
            for f in sorted(files):
                full = os.path.join(root, f)
                if f.endswith(SOURCE_EXTENSIONS) and (tests or not is_test_source(full)):
                    yield full


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="files or folders to scan")
    ap.add_argument("--max", type=int, default=0,
                    help="exit 1 when a function is longer than this many lines")
    ap.add_argument("--top", type=int, default=20, help="how many functions to list (0: all)")
    ap.add_argument("--tests", action="store_true", help="include test sources")
    args = ap.parse_args()
    found = []
    for path in sources(args.paths, args.tests):
        try:
            found += [(n, code, f"{path}:{start}", name)
                      for n, code, start, name in functions(path)]
        except ValueError as e:
            print(f"skipped: {e}", file=sys.stderr)
    found.sort(key=lambda f: (-f[0], f[2]))
    over = [f for f in found if args.max and f[0] > args.max]
    shown = over if args.max else (found[:args.top] if args.top else found)
    print(f"{'lines':>5}  {'code':>5}  function")
    for n, code, where, name in shown:
        print(f"{n:5d}  {code:5d}  {where}  {name}")
    if args.max:
        print(f"{len(over)} function(s) over {args.max} lines of {len(found)}"
              + (f"; longest: {found[0][0]} lines ({found[0][3]})" if found else ""))
        return 1 if over else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
