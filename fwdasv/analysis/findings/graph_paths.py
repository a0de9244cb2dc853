"""Where `asv publish` files a series' graph: its graph parameters and the graph's path.

`graph_params` reads them from a machine's result files as asv does (a result file's
params and environment variables, and the first configured branch);
`graph_file_path` is asv's `Graph.get_file_path`, character for character, so a
finding links to the graph asv wrote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fwdasv.asv.project import AsvProject
from fwdasv.asv.result_files import load_json


def graph_params(project: AsvProject, machine: str, env_name: str | None) -> dict[str, object]:
    """The parameters `asv publish` files this machine's and environment's graphs under: a
    result file's params and environment variables, and the branch (the first configured).

    asv also fills in, as null, keys that only other result files have: where results
    of different machines or environments have different keys, the published graph
    path has those too.
    """
    params: dict[str, object] = {"machine": machine}
    for path in sorted((project.results_dir / machine).glob(f"*-{env_name}.json")):
        try:
            data = load_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("params"), dict):
            params = {k: "" if v is None else v for k, v in data["params"].items()}
            params.update({f"env-{k}": v for k, v in (data.get("env_vars") or {}).items()})
            break
    params["branch"] = project.branches[0] if project.branches else None
    return params


def graph_file_path(params: Mapping[str, object], benchmark: str) -> str:
    """asv's `Graph.get_file_path` (the JS frontend's graph_to_path): where `asv publish`
    writes the graph of `benchmark` under these graph parameters."""
    parts = []
    for key, value in params.items():
        if value is None:
            part = f"{key}-null"
        elif value:
            part = f"{key}-{value}"
        else:
            part = key
        parts.append(_sanitize(part))
    parts.sort()
    return "/".join(["graphs", *parts, _sanitize(benchmark)])


def _sanitize(name: str) -> str:
    # asv.util.sanitize_filename, character for character (its class has no backslash).
    name = re.sub('[<>:"/\\^|?*\x00-\x1f]', "_", name)
    if re.fullmatch(r"CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9]", name.upper()):
        name += "_"
    return name
