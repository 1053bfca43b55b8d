"""Docs numbers tied to their runs: each measured-run block is its record's rendering, and
quotes no number the record does not hold; the shipped seed-noise bands are their records'
per-seed effects; records keep each claim's id, p, df, design, kind and band, and each seed's
machine."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from polymnesia.errors import DataError
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.seeds import (
    BandRecord,
    band_from_record,
    config_fingerprint,
    read_bands,
)
from polymnesia.reports.measured import (
    SET_ASIDE,
    machine_info,
    parse_gnu_time,
    read_record,
    read_table,
    record_runs,
    run_machine,
    seed_spread,
)
from polymnesia.reports.measured_block import block_of, render, replace_block, unheld

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "docs" / "runs").glob("*.json"))
PAGES = sorted((ROOT / "docs").glob("*.md"))
#: a measured-run heading whose numbers no record holds must say so in this marker
STALE = re.compile(r"<!-- measured-run stale: (?P<why>[^>]+) -->")


def _page_of(name: str) -> tuple[Path, str]:
    hits = [(p, b) for p in PAGES if (b := block_of(p.read_text(encoding="utf-8"), name))]
    assert len(hits) == 1, f"docs/runs/{name}.json: {len(hits)} pages carry its block"
    return hits[0]


def test_there_are_records() -> None:
    assert RECORDS, "docs/runs/ holds no measured-run record"


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_each_block_is_its_record_rendered_and_quotes_only_its_numbers(path: Path) -> None:
    record = read_record(path)
    page, block = _page_of(record["name"])
    assert block == render(record), (
        f"{page.name}: the block of {record['name']} is not its record's rendering; "
        f"run python scripts/measured_run.py {record['name']} --doc {page} --render-only"
    )
    assert unheld(block, record) == []
    assert record["spread"] == seed_spread(record)


BANDS = read_bands()


@pytest.mark.parametrize("band", BANDS, ids=lambda b: f"{b.experiment}-{b.fingerprint[:8]}")
def test_shipped_bands_hold_their_records_per_seed_effects(band: BandRecord) -> None:
    """Each shipped seed-noise band is the per-seed claim effects of the measured-run record
    it names (docs/runs/NAME.json), claim by claim, for the seeds where the claim was
    tested (a zero-width interval, no evidence under issue 44's rules, is left out)."""
    source = band.source.split(" ")[0]
    record = read_record(ROOT / source)
    assert (band.config, band.commit, band.date) == (
        record["config"],
        record["commit"],
        record["date"],
    )
    for cid, per in band.effects.items():
        statement = band.statements[cid]
        assert cid and statement, cid
        for run in record["runs"]:
            mine = [c for c in run["claims"] if c["claim"] == statement]
            assert len(mine) == 1, f"{source}: {statement!r} in seed {run['seed']}"
            c = mine[0]
            zero_width = c["low"] is not None and c["low"] == c["high"]  # not testable now
            tested = c["effect"] is not None and c["verdict"] not in SET_ASIDE and not zero_width
            assert (run["seed"] in per) == tested, (cid, run["seed"])
            if tested:
                assert per[run["seed"]] == c["effect"]
        assert len(per) >= 2


def test_a_band_is_written_from_a_record_of_one_seed_runs(tmp_path: Path) -> None:
    header = (
        "#,id,Kind,Claim (paper),Verdict,Effect [95% CI],p,p (Holm),df,Design,Seed noise,n,Test\n"
    )

    def run(name: str, effect: str, verdict: str = "≈ seed noise not measured: one seed") -> Path:
        folder = tmp_path / name / "results"
        folder.mkdir(parents=True)
        (folder / "claims.csv").write_text(
            header + f'1,x.a,paper,A beats B,{verdict},"A − B: {effect}",0.010,0.020,∞,superiority,'
            "one seed,120,paired\n"
            f'2,x.setup,precondition,P1 teaches,✔ holds,"P: {effect}",< 0.001,–,2.2,'
            "superiority,,120,paired\n",
            encoding="utf-8",
        )
        (folder.parent / "run.json").write_text(
            json.dumps({"machine": {"cpu": f"CPU {name}", "cpu_cores": 2, "torch": "2.5.1"}}),
            encoding="utf-8",
        )
        return folder.parent

    runs = [run(f"s{i}", f"+0.{i}00 [+0.050, +0.150]") for i in (1, 2, 3)]
    record = record_runs("x", "configs/quickstart.yaml", runs, seeds=[0, 1, 2], commit="c" * 40,
                         date="d")  # fmt: skip
    first = record["runs"][0]["claims"]
    assert first[0] == {
        "claim": "A beats B",
        "verdict": "seed noise not measured",
        "effect": 0.1,
        "low": 0.05,
        "high": 0.15,
        "n": 120,
        "id": "x.a",
        "kind": "paper",
        "p": 0.01,
        "p_adjusted": 0.02,
        "df": None,
        "design": "superiority",
        "band": "one seed",
        "paper": None,  # a claims.csv written before the paper's number was shown
        "headroom_share": None,
    }
    assert first[1]["p"] == 0.001 and first[1]["p_adjusted"] is None and first[1]["df"] == 2.2
    assert record["runs"][1]["machine"] == {
        "cpu": "CPU s2",
        "cpu_cores": 2,
        "torch": "2.5.1",
        "from": "run.json",
    }
    text = render(record)
    assert "| 1 | CPU s2, 2 cores | – | 2.5.1 | – | – |" in text
    cfg = load_config(ROOT / "configs" / "quickstart.yaml")
    band = band_from_record(record, cfg)
    assert band.effects == {"x.a": {0: 0.1, 1: 0.2, 2: 0.3}}  # no precondition
    assert band.fingerprint == config_fingerprint(cfg) and band.source == "docs/runs/x.json"
    noise = band.noise("x.a", 0)
    assert noise is not None and noise.seeds == (1, 2)
    assert noise.sd == pytest.approx(statistics.stdev([0.2, 0.3]))


def test_a_run_folder_without_a_machine_is_recorded_with_the_recorders() -> None:
    info = machine_info()
    assert set(info) == {"cpu", "cpu_cores", "system", "python", "torch", "transformers", "numpy"}
    assert info["numpy"] == np.__version__ and info["cpu"]
    assert run_machine(Path("/nonexistent"))["from"] == "recorder"


def _sections(text: str) -> list[tuple[str, str]]:
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_measured_run_section_is_generated_or_marked_stale(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for heading, body in _sections(text):
        if "measured run" not in heading.lower():
            continue
        generated = re.search(r"<!-- measured-run (?!stale:)\S+ -->", body)
        assert generated or STALE.search(body), (
            f"{page.name}, '{heading}': a measured-run section is generated from a record "
            "(scripts/measured_run.py) or marked '<!-- measured-run stale: WHY -->'"
        )


def test_a_number_the_record_does_not_hold_is_found() -> None:
    record = {"runs": [{"claims": [{"effect": -0.043, "low": -0.053, "high": -0.032}]}]}
    assert unheld("CBT -0.043 [-0.053, -0.032], 2 of 7 claims", record) == []
    assert unheld("CBT -0.043 [-0.053, -0.031]", record) == ["-0.031"]
    assert unheld("an effect of +0.019", record) == ["+0.019"]
    # a number written in the record's own text (a claim's margin) is held
    assert unheld("within the margin of 0.05", {"claim": "within the margin of 0.05"}) == []


def test_blocks_are_replaced_between_their_markers_only() -> None:
    text = "a\n<!-- measured-run x -->\nold\n<!-- /measured-run x -->\nb"
    assert replace_block(text, "x", "new") == text.replace("old", "new")
    with pytest.raises(DataError, match="exactly one"):
        replace_block("no markers", "x", "new")


def test_gnu_time_reports_are_read(tmp_path: Path) -> None:
    report = tmp_path / "t.txt"
    report.write_text(
        "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5\n"
        "\tMaximum resident set size (kbytes): 2097152\n"
    )
    assert parse_gnu_time(report) == (3723.5, 2048.0)
    report.write_text("nothing")
    with pytest.raises(DataError, match="not a /usr/bin/time -v report"):
        parse_gnu_time(report)


def test_a_table_record_shows_cells_with_intervals_and_spreads_only_measures() -> None:
    runs = [
        {"seed": s, "wall_s": None, "peak_rss_mb": None, "claims": [], "table": [row]}
        for s, row in enumerate(
            [
                {"row": "m", "bpb": 2.0, "bpb_ci_low": 1.9, "bpb_ci_high": 2.1, "bpb_n": 100.0},
                {"row": "m", "bpb": 2.2, "bpb_ci_low": 2.1, "bpb_ci_high": 2.3, "bpb_n": 100.0},
            ]
        )
    ]
    record = {"config": "c.yaml", "commit": "abc1234", "date": "d", "machine": "m"}
    record |= {"name": "x", "table_name": "t", "note": "", "runs": runs}
    spread = seed_spread(record)
    assert list(spread["sd"]) == ["m / bpb"]  # intervals and counts are not measures
    assert spread["sd"]["m / bpb"] == round(0.2 / 2**0.5, 4)
    record["spread"] = spread
    text = render(record)
    assert "| m / bpb | 2.0000 [1.9000, 2.1000] | 2.2000 [2.1000, 2.3000] | 0.1414 |" in text


def test_a_pooled_run_is_recorded_and_shown_beside_the_seeds(tmp_path: Path) -> None:
    header = "#,Claim (paper),Verdict,Effect [95% CI],p (Holm),n,Test\n"

    def run(name: str, effect: str, verdict: str) -> Path:
        folder = tmp_path / name / "results"
        folder.mkdir(parents=True)
        (folder / "claims.csv").write_text(
            header + f'1,A beats B,{verdict},"A − B: {effect}",0.01,120,paired\n',
            encoding="utf-8",
        )
        return folder.parent

    seeds = [run("s0", "+0.100 [+0.050, +0.150]", "✔ holds")]
    seeds.append(run("s1", "+0.020 [-0.030, +0.070]", "? inconclusive"))
    pooled = run("pooled", "+0.060 [-0.450, +0.570]", "? inconclusive")
    record = record_runs(
        "x", "c.yaml", seeds, seeds=[0, 1], commit="abc1234", date="d", pooled=pooled
    )
    assert record["pooled"]["seeds"] == [0, 1]
    assert record["pooled"]["claims"][0]["effect"] == 0.06
    assert record["spread"]["sd"] == {"A beats B": round(0.08 / 2**0.5, 4)}  # seeds only
    text = render(record)
    assert "Seeds 0, 1 pooled in one run (`'seeds=[0,1]'`" in text
    assert "| A beats B | +0.060 [-0.450, +0.570] | 120 | inconclusive |" in text
    assert unheld(text, record) == []
    with pytest.raises(DataError, match="no results/claims.csv"):
        record_runs("x", "c.yaml", seeds, seeds=[0, 1], commit="a", date="d", pooled=tmp_path)


def test_one_run_training_several_seeds_is_labelled_so(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "results"
    folder.mkdir(parents=True)
    (folder / "claims.csv").write_text(
        "#,Claim (paper),Verdict,Effect [95% CI],p (Holm),n,Test\n"
        '1,A beats B,? inconclusive,"A − B: +0.010 [-0.020, +0.040]",0.5,300,paired\n',
        encoding="utf-8",
    )
    record = record_runs("x", "c.yaml", [folder.parent], seeds=[[0, 1, 2]], commit="a", date="d")
    text = render(record)
    assert "`c.yaml`, seeds 0, 1, 2 in one run; commit" in text
    assert "| 0, 1, 2 in one run | not recorded | not recorded |" in text
    assert "| claim | seeds 0, 1, 2 in one run | sd over seeds |" in text
    assert record["spread"] == {"n_seeds": 1, "sd": {}, "band": None}  # one run: no spread
    assert unheld(text, record) == []


def test_a_table_row_is_labelled_by_all_its_leading_text_cells(tmp_path: Path) -> None:
    """A table keyed by size and model keeps one row per model (not one per size)."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "t.csv").write_text(
        "Size,Model,bpb,bpb_ci_low,bpb_ci_high\n"
        "tiny,Baseline,1.5,1.4,1.6\n"
        "tiny,BA,3.25,3.2,3.3\n"
        "1.93M,,2.0,1.9,2.1\n",  # an empty text cell is not part of the label
        encoding="utf-8",
    )
    rows = read_table(tmp_path, "t")
    assert [r["row"] for r in rows] == ["tiny / Baseline", "tiny / BA", "1.93M"]
    assert rows[1] == {"row": "tiny / BA", "bpb": 3.25, "bpb_ci_low": 3.2, "bpb_ci_high": 3.3}


def test_a_pooled_run_of_a_protocol_without_claims_records_its_table(tmp_path: Path) -> None:
    """language_modeling makes no claims: its pooled run's Table 1 is recorded and shown, so a
    docs page needs no hand-typed pooled table (issue 44, item 5)."""

    def run(name: str, value: float, half: float) -> Path:
        folder = tmp_path / name / "results"
        folder.mkdir(parents=True)
        (folder / "t.csv").write_text(
            "Model,mu_other,mu_other_ci_low,mu_other_ci_high\n"
            f"tiny,{value},{value - half},{value + half}\n",
            encoding="utf-8",
        )
        return folder.parent

    seeds = [run("s0", 6.15, 0.02), run("s1", 6.30, 0.02)]
    pooled = run("pooled", 6.2, 0.21)
    record = record_runs(
        "x", "c.yaml", seeds, seeds=[0, 1], commit="abc1234", date="d", table="t", pooled=pooled
    )
    assert record["pooled"]["claims"] == []
    assert record["pooled"]["table"] == [
        {"row": "tiny", "mu_other": 6.2, "mu_other_ci_low": 5.99, "mu_other_ci_high": 6.41}
    ]
    text = render(record)
    assert "Table `t` pooled (95% interval over seeds and texts):" in text
    assert "| tiny / mu_other | 6.2000 [5.9900, 6.4100] |" in text
    assert "| claim | pooled effect" not in text
    with pytest.raises(DataError, match="no table .*nothing/results/t.csv"):
        record_runs("x", "c.yaml", seeds, seeds=[0, 1], commit="a", date="d", table="t",
                    pooled=tmp_path / "s0" / "nothing")  # fmt: skip
