"""Read bundles for viewing: validated rows, the seal's verdict, the dataset they were asked
of, and labels only through the vault (so only when the seal verifies).

A bundle is someone else's data: its manifest's config is instantiated only through the
project's allow-list, a value may reference nothing but the data folder, and a row with an
unknown, missing or mistyped field is a DataError naming the file, line and field (every
row is read through its type, provenance/row_types.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cmc.graph import Memory, compile_memory
from cmc.records import Dataset
from common.configurable import config_nodes, current_name, instantiate_known
from common.errors import DataError
from common.io import canonical_json
from provenance.bundle import SealError, read_bundle_jsonl, read_manifest, verify_seal
from provenance.vault import LabelVault

DATA_REF = "${paths.data_dir}"
GRAMMAR = "cmc.frontends.grammar.GrammarFrontend"
ROW_FILES = ("predictions.jsonl", "evidence.jsonl", "requests.jsonl")  # each row checked as it is read


@dataclass
class ViewedBundle:
    """One bundle as the viewer sees it. `labels` is None unless the vault opened it."""

    name: str
    path: Path
    manifest: dict[str, Any]
    predictions: list[dict[str, Any]]
    evidence: dict[str, dict[str, Any]]
    requests: dict[str, dict[str, Any]]  # by question (a method's: its last call's row)
    dataset: Dataset
    seal: str | None
    problem: str | None  # why labels are not shown (seal or vault refusal), else None
    labels: Mapping[str, tuple[str, ...]] | None
    frontend_node: dict[str, Any] | None = None
    request_rows: list[dict[str, Any]] = field(default_factory=list)  # every call's, in order
    _memories: dict[str, Memory] = field(default_factory=dict, repr=False)
    _by_id: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def prediction(self, qid: str) -> dict[str, Any]:
        if not self._by_id:
            self._by_id.update((row["question_id"], row) for row in self.predictions)
        return self._by_id[qid]

    @property
    def arm(self) -> str:
        return str(self.manifest["config"]["arm"]["name"])

    @property
    def reader(self) -> str:
        return str(self.manifest["config"]["reader"]["name"])

    @property
    def graph_read(self) -> bool:
        """Whether the view traverses a graph (its packets trace edges): CMC and its controls."""
        return any("edges" in packet["trace"] for packet in self.evidence.values())

    def memory(self, history_id: str) -> Memory | None:
        """The compiled memory of one history, for views whose trace names values by record
        (stale values, refreshed keys). Only the grammar frontend is recompiled here: it is
        deterministic and cheap; an LLM frontend would need a reader."""
        if self.frontend_node is None or current_name(self.frontend_node.get("_target_")) != GRAMMAR:
            return None
        if history_id not in self._memories:
            frontend = instantiate_known(self.frontend_node, f"{self.name}/manifest.json: config.frontend")
            history = self.dataset.histories[history_id]
            frontend.prepare([history])
            self._memories[history_id] = compile_memory(history, frontend.extract(history))
        return self._memories[history_id]


def load_bundles(paths: list[Path], data_dir: Path) -> list[ViewedBundle]:
    """Each bundle with its dataset (loaded once per distinct dataset config)."""
    datasets: dict[str, tuple[Any, Dataset]] = {}
    out = []
    for path in paths:
        manifest = read_manifest(path)
        node = resolve_data_node(_config_node(manifest, "dataset", path), data_dir, f"{path / 'manifest.json'}: config.dataset")
        key = canonical_json(node)
        if key not in datasets:
            adapter = instantiate_known(node, f"{path / 'manifest.json'}: config.dataset")
            datasets[key] = (adapter, adapter.load())
        adapter, dataset = datasets[key]
        out.append(load_bundle(path, manifest, adapter, dataset, data_dir))
    return out


def load_bundle(path: Path, manifest: dict[str, Any], adapter: Any, dataset: Dataset, data_dir: Path) -> ViewedBundle:
    for key in ("arm", "reader"):
        if not isinstance(_config_node(manifest, key, path).get("name"), str):
            raise DataError(f"{path / 'manifest.json'}: config.{key}.name is missing or not a string")
    rows = {name: read_bundle_jsonl(path, name) for name in ROW_FILES}
    questions = {q.qid for q in dataset.questions}
    by_id = {name: {row["question_id"]: row for row in rows[name]} for name in ("evidence.jsonl", "requests.jsonl")}
    for line, row in enumerate(rows["predictions.jsonl"], start=1):
        qid = row["question_id"]
        missing = [name for name, table in by_id.items() if qid not in table]
        if qid not in questions or missing:
            where = f"not a question of dataset {dataset.name!r}" if qid not in questions else f"absent from {missing}"
            raise DataError(f"{path / 'predictions.jsonl'}: line {line}: question_id {qid!r} is {where}")
    seal, problem, labels = None, None, None
    try:
        seal = verify_seal(path)
        labels = LabelVault(adapter.load_labels).open(path)
    except DataError as exc:  # SealError included: the page says why, and shows no label
        problem = ("Seal check failed: " if isinstance(exc, SealError) else "Labels refused: ") + \
            str(exc).replace(str(path), path.name)
    frontend = manifest["config"].get("frontend")
    frontend_node = resolve_data_node(frontend, data_dir, f"{path / 'manifest.json'}: config.frontend") \
        if isinstance(frontend, dict) else None
    return ViewedBundle(path.name, path, manifest, rows["predictions.jsonl"], by_id["evidence.jsonl"],
                        by_id["requests.jsonl"], dataset, seal, problem, labels, frontend_node,
                        rows["requests.jsonl"])


def _config_node(manifest: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    node = manifest.get("config", {}).get(key) if isinstance(manifest.get("config"), dict) else None
    if not isinstance(node, dict):
        raise DataError(f"{path / 'manifest.json'}: config.{key} is missing or not an object")
    return node


def resolve_data_node(node: dict[str, Any], data_dir: Path, where: str) -> dict[str, Any]:
    """The node with `${paths.data_dir}` put to this machine's data folder. A recorded
    absolute location that does not exist here is looked up as <data_dir>/<its folder>/<its
    file> (the dataset's sha256 pin still checks the bytes). Any other interpolation is
    refused: a resolver such as `${oc.env:...}` would read this machine's environment."""
    def fix(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        if not isinstance(value, str):
            return value
        if value.startswith(DATA_REF):
            return str(data_dir) + value[len(DATA_REF):]
        here = Path(value)
        if here.is_absolute() and not here.exists() and len(here.parts) > 2:
            moved = data_dir / here.parent.name / here.name
            return str(moved) if moved.exists() else value
        return value

    fixed = fix(node)
    for key, value in config_nodes(fixed):
        if isinstance(value, str) and "${" in value:
            raise DataError(f"{where}.{key} = {value!r} interpolates something other than the data folder")
    return fixed
