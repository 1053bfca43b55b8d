"""Each tracker whose package installs offline receives a flat config and the logged values
(loss, learning rate, tokens/s, gradient norm) of a short training run."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import pytest
from test_training_loop import cfg, data, nano_model

from polymnesia.training.loop import train
from polymnesia.training.trackers import flat_config

LOGGED = {"loss", "lr", "tokens_per_s", "grad_norm"}


def _need(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"tracker package '{package}' is not installed (pip install {package})")


def test_flat_config_has_only_scalars() -> None:
    flat = flat_config({"a": {"b": [1, 2], "c": None}, "d": 1.5, "e": {"f": {"g": True}}})
    assert flat == {"a.b": "[1, 2]", "a.c": "none", "d": 1.5, "e.f.g": True}
    full = flat_config(cfg().model_dump(mode="json"))
    assert all(isinstance(v, (int, float, str, bool)) for v in full.values())
    assert full["betas"] == "[0.9, 0.95]" and full["grad_clip"] == 1.0


def _train(tmp_path: Path, tracker: str) -> Path:
    out = tmp_path / tracker
    train(nano_model(), data(), cfg(steps=4, trackers=[tracker]), out, tracker_name="pretrain")
    return out


def test_tensorboard_receives_the_metrics(tmp_path: Path) -> None:
    _need("tensorboard", "tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = _train(tmp_path, "tensorboard")
    runs = [p.parent for p in out.rglob("events.out.tfevents.*")]
    tags: set[str] = set()
    for run in runs:
        acc = EventAccumulator(str(run))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
        if "loss" in acc.Tags()["scalars"]:
            assert [e.step for e in acc.Scalars("loss")] == [1, 2, 3, 4]
    assert tags >= LOGGED


def test_mlflow_local_file_store_receives_the_metrics(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _need("mlflow", "mlflow-skinny")
    import mlflow

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 prefers a database
    _train(tmp_path, "mlflow")
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("pretrain")
    (run,) = client.search_runs([exp.experiment_id])
    assert set(run.data.metrics) >= LOGGED
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [1, 2, 3, 4]
    assert run.data.params["betas"] == "[0.9, 0.95]"


def _wandb_records(path: Path):  # type: ignore[no-untyped-def]
    """The protobuf records of an offline ``run-*.wandb`` file (a LevelDB-style log: 32 KiB
    blocks of chunks with a 7-byte header; the file starts with a 7-byte W&B header)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, i, buf = path.read_bytes(), 32768, 7, b""
    while i + 7 <= len(data):
        if block - i % block < 7:  # the tail of a block too short for a header is padding
            i += block - i % block
            continue
        _, n, kind = struct.unpack("<IHB", data[i : i + 7])
        chunk, i = data[i + 7 : i + 7 + n], i + 7 + n
        if kind == 0:
            continue
        buf = chunk if kind in (1, 2) else buf + chunk  # FULL, FIRST / MIDDLE, LAST
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


def test_wandb_offline_receives_the_metrics(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _need("wandb", "wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    _train(tmp_path, "wandb")
    (run,) = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    history, config = [], {}
    for rec in _wandb_records(run):
        if rec.WhichOneof("record_type") == "history":
            items = rec.history.item
            history.append(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
            )
        elif rec.WhichOneof("record_type") == "config":
            config.update({item.key: item.value_json for item in rec.config.update})
    logged = [h for h in history if "loss" in h]
    assert [h["step"] for h in logged] == [1, 2, 3, 4]
    assert all(set(h) >= LOGGED for h in logged)
    assert "grad_clip" in config


def test_aim_receives_the_metrics(tmp_path: Path) -> None:
    _need("aim", "aim")
    from aim import Repo

    _train(tmp_path, "aim")
    from aim.sdk.index_manager import RepoIndexManager

    repo = Repo(str(tmp_path / "aim"))
    (run_hash,) = repo.list_all_runs()
    # a closed run joins the repository's index when `aim up` or the index manager reads it
    RepoIndexManager.get_index_manager(repo).index(run_hash)
    (run,) = Repo(str(tmp_path / "aim")).iter_runs()
    metrics = {m.name: m for m in run.metrics()}
    assert set(metrics) >= LOGGED
    loss = metrics["loss"]
    assert (loss.first_step(), loss.last_step(), len(loss.values.values_list())) == (1, 4, 4)
    assert run["hparams"]["grad_clip"] == 1.0


def test_a_tracker_without_its_package_is_refused_before_training(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Accelerate only warns and logs nothing; polymnesia says so in one line, first."""
    import polymnesia.training.trackers as trackers
    from polymnesia.errors import ConfigError

    monkeypatch.setattr(trackers, "tracker_available", lambda name: name != "wandb")
    with pytest.raises(
        ConfigError,
        match=r"^training: trackers names wandb, whose package is not installed \(pip install "
        r"wandb\); installed here: tensorboard, mlflow, comet_ml, aim, clearml$",
    ):
        train(nano_model(), data(), cfg(steps=2, trackers=["wandb"]), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.skipif(importlib.util.find_spec("comet_ml") is not None, reason="comet_ml installed")
def test_the_command_refuses_a_missing_tracker_before_the_run(
    isolated_cache, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.cli.main import main

    quick = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
    run_dir = tmp_path / "run"
    assert main(["run", quick, "train.trackers=[comet_ml]", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "train.trackers names comet_ml" in err, err
    assert "pip install comet-ml" in err and not run_dir.exists()
