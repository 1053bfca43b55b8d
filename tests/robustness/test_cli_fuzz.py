"""The fuzzer's commands beyond validate and the dry run (fuzz_configs.command_cases):
``report`` on damaged run folders, ``cache import`` of hostile archives and a tiny run on a
disk that fills after k writes: each is refused in one line, none is a traceback."""

from __future__ import annotations

from fuzz_configs import command_cases, silently_wrong


def test_commands_on_damaged_inputs_and_a_full_disk_are_refused_in_one_line(
    isolated_cache, tmp_path
):  # type: ignore[no-untyped-def]
    outcomes = command_cases(tmp_path, full_disk=(0, 3, 40))
    assert {o.mutation.kind for o in outcomes} == {
        "damaged_run_folder",
        "hostile_archive",
        "full_disk",
    }
    bad = [o for o in outcomes if o.result == "traceback" or silently_wrong(o)]
    assert not bad, "\n".join(f"{o.mutation.kind} {o.mutation.path}: {o.detail}" for o in bad)
    assert all(o.result == "refused" for o in outcomes)
