"""fwdasv.torchrun_output.ErrorScanner on torchrun groups' real output: the first worker
error is the traceback's exception line, also when another rank's print lands inside the
traceback (the ranks share one pipe; a loaded box interleaves them), and torchrun's own
ChildFailedError is never taken for the cause."""

from __future__ import annotations

from fwdasv.torchrun_output import ErrorScanner

# tests/test_launch.py's raise-rank1 group as one run on this box printed it (2026-12-05):
# rank 0's start line was written into rank 1's traceback.
INTERLEAVED = """\
fake bench rank 1 pid 27449 mode raise-rank1
Traceback (most recent call last):
  File "/work/main/tests/programs/fake_bench.py", line 109, in <module>
    sys.exit(main())
             ^^^^^^
  File "/work/main/tests/programs/fake_bench.py", line 69, in main
fake bench rank 0 pid 27448 mode raise-rank1    raise RuntimeError("boom from rank 1")
RuntimeError: boom from rank 1

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_05:00:21
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 27449)
  error_file: <N/A>
"""


def scanned(text: str) -> ErrorScanner:
    scanner = ErrorScanner()
    for line in text.splitlines():
        scanner.feed(line)
    return scanner


def test_another_ranks_line_inside_a_traceback_is_not_taken_for_its_error() -> None:
    scanner = scanned(INTERLEAVED)
    assert scanner.first == "RuntimeError: boom from rank 1"
    assert scanner.first_labelled == "RuntimeError: boom from rank 1"
    assert scanner.root_cause is not None and scanner.root_cause.rank == 1
    assert scanner.error_of(scanner.root_cause) == "RuntimeError: boom from rank 1"


def test_a_prefixed_ranks_error_is_its_own_and_the_launchers_is_skipped() -> None:
    scanner = scanned(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "bench.py", line 3, in <module>\n'
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: init\n"
        "Traceback (most recent call last):\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    )
    assert scanner.first == "torch.distributed.DistBackendError: NCCL error in: init"
    assert scanner.first_rank == 1 and set(scanner.by_rank) == {1}
