"""Hydra entry point: compose the config and hand it to the runner.

    python run.py stage=evidence arm=stale_closure frontend=grammar
    python run.py -m arm=cmc,fact_bm25,latest_state
"""
import hydra
from omegaconf import DictConfig

from cmc.runner import run


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    print(run(cfg))


if __name__ == "__main__":
    main()
