"""explain names the line a commit changed when it adds a call to a helper it did not change.

The real repository's shape (issue: `Attention.forward` gained a call that rebuilt a table
in every layer; explain named the helper's line, and `changed here` marked every row of the
file): a script repository (tests/script_model.py's model with a helper `Model.squash`,
`x = torch.tanh(x)` 64 times, in both commits), whose second commit adds `x = self.squash(x)` in
`Model.forward`. Through `fwdasv init` and `fwdasv explain` as a user runs them: the new
`aten::tanh` row names the added line in `Model.forward` (the first frame of its stack the
commit changed), not the helper's, marked `changed here`; no row whose stack holds no
changed line is marked; the headline's figure has the step's sign. About a minute.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from script_model import _MODEL, commit_pair, explain_as_user, shown

pytestmark = [pytest.mark.slow, pytest.mark.long]

# The helper squashes 64 times: the added call's time (about 0.7 ms of a 2.5 ms forward on
# the 2-core box) outweighs what it does to the ops after it. With one tanh (+26 us) the
# relu after it read 72 us faster in BAD (clamp_min, 2 rounds a side; with 16 tanh calls
# -168 us against +176 us), and the headline said faster.
HELPER = (
    "    def squash(self, x):\n"
    "        for _ in range(64):\n"
    "            x = torch.tanh(x)\n"
    "        return x\n\n"
)
CALL = "x = self.squash(x)"


def test_explain_names_the_added_call_not_the_unchanged_helper(tmp_path: Path, measuring) -> None:
    home = tmp_path / "home"
    # GOOD: the helper, never called; BAD: forward calls it.
    model = _MODEL.replace(
        "    def forward(self, tokens):", HELPER + "    def forward(self, tokens):"
    )
    good, bad, text = commit_pair(
        home / "src" / "ngmodel", model, CALL, "Initial model, with a squash helper"
    )
    model_lines = text.splitlines()
    call = model_lines.index(f"        {CALL}") + 1
    helper = model_lines.index("            x = torch.tanh(x)") + 1
    explain = explain_as_user(home, good, bad, measuring)
    assert explain.returncode == 1, shown(explain)  # BAD is slower: the added op stands out
    lines = explain.stdout.splitlines()
    rows = [r for r in lines if r[:1] in "+-" and "aten::tanh" in r.split()]
    assert rows, shown(explain)
    assert f"model.py:{call} Model.forward [changed here]" in rows[0], shown(explain)
    assert f"model.py:{helper}" not in rows[0], shown(explain)
    # Per changed line: every marked row is one the added call made.
    for row in lines:
        if "[changed here]" in row:
            assert f"model.py:{call} " in row, shown(explain)
    headline = lines[0]
    assert "slower: +" in headline and "% of GOOD's time" in headline, headline
