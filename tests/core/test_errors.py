"""`fwdasv.core.errors.helper_main`: how a helper process (`python -m fwdasv.targets.check`,
`fwdasv.asv.treeinstall`) ends, since its caller shows only the last line it wrote."""

from __future__ import annotations

import pytest

from fwdasv.core.errors import helper_main


class Refused(ValueError):
    pass


def fail(error: Exception) -> str:
    raise error


def test_what_the_work_returns_is_printed_and_the_status_is_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert helper_main(lambda: "ok: built", (ValueError,)) == 0
    assert capsys.readouterr() == ("ok: built\n", "")


def test_an_error_is_one_line_on_stderr_named_by_its_type_unless_it_is_the_inputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    words = "the case\n  long=1*1@99999\nis too long"
    assert helper_main(lambda: fail(Refused(words)), (Exception,), named=(ValueError,)) == 1
    assert capsys.readouterr() == ("", "fwdasv: the case long=1*1@99999 is too long\n")
    assert helper_main(lambda: fail(RuntimeError(words)), (Exception,), named=(ValueError,)) == 1
    assert capsys.readouterr().err == "fwdasv: RuntimeError: the case long=1*1@99999 is too long\n"
    # No message: the type alone, not an empty line.
    assert helper_main(lambda: fail(OSError()), (OSError,), named=(OSError,)) == 1
    assert capsys.readouterr().err == "fwdasv: OSError\n"


def test_an_error_it_is_not_told_to_catch_stays_loud() -> None:
    with pytest.raises(KeyError):
        helper_main(lambda: fail(KeyError("k")), (ValueError,))
