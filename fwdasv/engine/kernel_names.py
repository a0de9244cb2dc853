"""The row a GPU kernel counts under: its short name, as vLLM's bench groups kernels.

Input: a kernel's full demangled name from a profiler trace (`void ns::foo<T, 4>(args)`);
output: `ns::foo`. Matches vLLM's `short_name` row for row on its reference kernels.json
files, so a diff of fwdasv's and vLLM's profiles compares the same rows.
"""

from __future__ import annotations

import re

# Kernels named after a generic launcher are told apart by their first template argument.
_GENERIC_LAUNCHER = re.compile(r"(^|::)(device_kernel|Kernel|kernel|KernelWrapper)$")
# CuTe DSL kernel names carry per-shape layouts from these markers on.
_CUTE_DSL_LAYOUT = re.compile(r"_object_at_|_tensorptr")
_TEMPLATE_ARG_END = re.compile(r"[<>(,]")


def _opening_index(text: str, close: int, brackets: str, skip_parens: bool) -> int:
    """Index of the bracket that opens the one closing at `close`, or -1.

    `brackets` is the pair, opening first ("()", "<>"). With `skip_parens`, brackets
    inside parentheses do not count: template arguments hold `operator<`, `(8)>(0)`
    and function types.
    """
    opening, closing = brackets[0], brackets[1]
    depth = parens = 0
    for index in range(close, -1, -1):
        char = text[index]
        if skip_parens and char in "()":
            parens += 1 if char == ")" else -1
        elif parens:
            continue
        elif char == closing:
            depth += 1
        elif char == opening:
            depth -= 1
            if depth == 0:
                return index
    return -1


def short_name(name: str) -> str:
    """The row a GPU kernel counts under, as vLLM groups them (its `name`; `example` keeps one
    full name): `void ns::foo<T, 4>(args)` -> `ns::foo`, with the return type, template and
    arguments dropped; a generic launcher (`cutlass::device_kernel<Op<...>>`) keeps its first
    template argument; a CuTe DSL kernel drops its layout suffix.
    """
    if name.startswith("kernel_cutlass_"):
        return _CUTE_DSL_LAYOUT.split(name, maxsplit=1)[0]
    head = name.strip()
    if head.endswith(")"):
        head = head[: max(_opening_index(head, len(head) - 1, "()", False), 0)].rstrip()
    template = ""
    if head.endswith(">"):
        start = _opening_index(head, len(head) - 1, "<>", True)
        if start > 0:
            head, template = head[:start], head[start + 1 : -1]
    words = head.split()
    base = words[-1] if words else name
    if template and _GENERIC_LAUNCHER.search(base):
        first = _TEMPLATE_ARG_END.split(template, maxsplit=1)[0].strip()
        if first:
            return f"{base}<{first.removeprefix('void ')}>"
    return base
