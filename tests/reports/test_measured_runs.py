"""Docs numbers tied to their runs: each measured-run block is its record's rendering, and
quotes no number the record does not hold; measured bands in the code match their records."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polymnesia.errors import DataError
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.seeds import (
    CONFIG_SEED_NOISE_BANDS,
    SEED_NOISE_BANDS,
    SeedBand,
    claim_key,
)
from polymnesia.reports.measured import (
    block_of,
    parse_gnu_time,
    read_record,
    read_table,
    record_runs,
    render,
    replace_block,
    seed_spread,
    unheld,
)

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


@pytest.mark.parametrize("path", [p for p in RECORDS if p.stem.startswith("seed_noise_")])
def test_measured_seed_noise_bands_are_the_recorded_ones(path: Path) -> None:
    record = read_record(path)
    protocol = record["name"].removeprefix("seed_noise_")
    if record["spread"]["band"] is None:  # no claim tested in every seed: nothing measured
        assert protocol not in SEED_NOISE_BANDS
        return
    _assert_band_is_record(SEED_NOISE_BANDS[protocol], record)


def _assert_band_is_record(band: SeedBand, record: dict) -> None:  # type: ignore[type-arg]
    assert band.band == record["spread"]["band"] and band.n_seeds == record["spread"]["n_seeds"]
    assert band.commit == record["commit"] and band.config == record["config"]
    expected: dict[str, float] = {}
    claims = {c["claim"] for r in record["runs"] for c in r["claims"]}
    for statement, sd in record["spread"]["sd"].items():
        if statement not in claims:  # a table cell: shown, not a band
            continue
        key = claim_key(statement)
        expected[key] = max(expected.get(key, 0.0), round(2 * sd, 4))
    assert dict(band.per_claim) == expected


@pytest.mark.parametrize("key", sorted(CONFIG_SEED_NOISE_BANDS), ids="/".join)
def test_config_bands_are_their_configs_recorded_runs(key: tuple[str, str]) -> None:
    band = CONFIG_SEED_NOISE_BANDS[key]
    records = [read_record(p) for p in RECORDS]
    same = [r for r in records if (r["config"], r["commit"]) == (band.config, band.commit)]
    assert len(same) == 1, f"{band.config} at {band.commit[:7]}: {len(same)} records"
    _assert_band_is_record(band, same[0])
    assert key[1] == load_config(ROOT / band.config).name  # the band reaches its own config


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
