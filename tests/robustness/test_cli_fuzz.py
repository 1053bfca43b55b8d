"""The fuzzer's commands beyond validate and the dry run (fuzz_configs.command_cases):
``report`` and ``compare`` on damaged run folders and on duplicated or missing score records,
``plan`` with absurd numbers, ``cache import`` of hostile archives and a tiny run on a disk
that fills after k writes: each is refused in one line, none is a traceback."""

from __future__ import annotations

from fuzz_configs import command_cases, silently_wrong


def test_commands_on_damaged_inputs_and_a_full_disk_are_refused_in_one_line(
    isolated_cache, tmp_path
):  # type: ignore[no-untyped-def]
    outcomes = command_cases(tmp_path, full_disk=(0, 3, 40))
    assert {o.mutation.kind for o in outcomes} == {
        "damaged_run_folder",
        "duplicated_records",
        "long_integer",
        "hostile_archive",
        "full_disk",
    }
    bad = [o for o in outcomes if o.result == "traceback" or silently_wrong(o)]
    assert not bad, "\n".join(f"{o.mutation.kind} {o.mutation.path}: {o.detail}" for o in bad)
    assert all(o.result == "refused" for o in outcomes if o.mutation.expect == "refuse")
    assert [o.mutation.path for o in outcomes if o.mutation.expect == "accept"] == ["good run"]
    records = [o for o in outcomes if o.mutation.kind == "duplicated_records"]
    assert len(records) == 14  # the good run, 6 damaged files x (report, compare), a folder
    for o in records[1:-1]:  # the key given twice and the file, or the empty file named
        assert "scores.jsonl" in o.detail, o.detail
        assert "records 1 and" in o.detail or "holds no score records" in o.detail, o.detail
    assert "report.md: a folder of that name is in its place" in records[-1].detail
    for o in (o for o in outcomes if o.mutation.kind == "long_integer"):
        assert "out of range; accepted:" in o.detail or "is not a" in o.detail, o.detail
