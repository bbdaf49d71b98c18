"""The one way a config is composed outside the Hydra run (harness/hydra_app.py): the command
line's other jobs, tests, replay and the notebook call `compose`, which checks the result against the structured schemas
(harness/schemas.py) exactly as run.py does before any stage runs."""
from __future__ import annotations

from typing import Sequence

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from common.locations import conf_dir
from harness.schemas import check_config

CONF_DIR = conf_dir()  # the checkout's conf/, or the installed wheel's common/conf


def _csv(items: Sequence[str]) -> str:
    """`${csv:${experiment.views}}`: an experiment's sweep is derived from its views."""
    return ",".join(str(item) for item in items)


def _frontend_name(kind: str, extractor: str, reply_format: str, prompt: str | None = None,
                   constrained: bool = False, object_position: str = "any") -> str:
    """`${frontend_name:llm,${.extractor.name},${.reply_format},${.prompt},${.constrained},${.object_position}}`:
    one run folder per extractor, reply format, extraction prompt and decoding (the JSON format,
    the first one, keeps the plain name; a prompt other than the format's own adds its name:
    lines with extract_lines_examples gives llm_lines_examples_<extractor>, json with it
    llm_json_lines_examples_<extractor>; decoding under the reply's grammar adds `constrained`:
    llm_lines_examples_constrained_<extractor>, and an object position other than `any` its name:
    llm_lines_examples_constrained_apart_<extractor>), so runs that differ in these never share
    a folder and a table names what it reads."""
    from cmc.frontends.llm_replies import REPLY_FORMATS

    default = REPLY_FORMATS[reply_format].prompt if reply_format in REPLY_FORMATS else None
    own = prompt.removeprefix("extract_").removeprefix(f"{reply_format}_") if prompt not in (None, default) else ""
    placed = f"_{object_position}" if constrained and object_position != "any" else ""
    decoding = ("constrained" if constrained else "") + placed
    style = "_".join(part for part in (reply_format, own, decoding) if part)
    return f"{kind}_{extractor}" if style == "json" else f"{kind}_{style}_{extractor}"


OmegaConf.register_new_resolver("csv", _csv, replace=True)
OmegaConf.register_new_resolver("frontend_name", _frontend_name, replace=True)


def compose(*overrides: str, return_hydra_config: bool = False, check: bool = True) -> DictConfig:
    """conf/config.yaml with the overrides, checked (`check=False` only where a recorded
    config is put back node by node and checked after, as replay does)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose("config", overrides=list(overrides), return_hydra_config=return_hydra_config)
    if check:
        check_config(cfg)
    return cfg
