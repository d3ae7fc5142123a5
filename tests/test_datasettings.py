"""plan-v1 Extension 6 keys `data` and `allocator` (py/zerocalc/datasettings.py): defaults, each trainer's
expandable_segments default, and bad values refused naming the dotted key."""
from __future__ import annotations

import pytest

from zerocalc.datasettings import (AllocatorSettings, DataSettings, allocator_dict, data_dict, expandable,
                                   parse_allocator, parse_data)
from zerocalc.errors import PlanError


def test_defaults_are_fixed_lengths_and_the_trainers_allocator():
    assert parse_data({}, 4096) == DataSettings()
    assert parse_allocator({}) == AllocatorSettings()
    assert data_dict(DataSettings()) == {"lengths": "fixed", "mean_len": None, "p99_len": None, "histogram": None}
    assert allocator_dict(AllocatorSettings()) == {"expandable_segments": "auto", "max_split_size_mb": None,
                                                   "empty_cache_every": None}


@pytest.mark.parametrize("trainer, on", [("torchtune", True), ("hf-trainer", False), ("litgpt", False),
                                         ("torchtitan", False), ("custom-loop", False)])
def test_expandable_segments_auto_is_the_trainers_default(trainer, on):
    assert expandable(AllocatorSettings(), trainer) is on
    assert expandable(AllocatorSettings(expandable_segments=False), trainer) is False
    assert expandable(AllocatorSettings(expandable_segments=True), trainer) is True


def test_a_distribution_and_a_histogram_parse():
    d = parse_data({"lengths": "padded-longest", "mean_len": 700, "p99_len": 2048}, 2048)
    assert (d.lengths, d.mean_len, d.p99_len) == ("padded-longest", 700, 2048)
    h = parse_data({"lengths": "padding-free", "histogram": [[128, 3], [512, 1.5]]}, 2048)
    assert h.histogram == ((128, 3), (512, 1.5))
    a = parse_allocator({"expandable_segments": True, "max_split_size_mb": 128, "empty_cache_every": 50})
    assert (a.expandable_segments, a.max_split_size_mb, a.empty_cache_every) == (True, 128, 50)


@pytest.mark.parametrize("value, key", [
    ({"lengths": "bucketed"}, "data.lengths"),
    ({"lengths": "padded-longest"}, "data.mean_len"),               # a varying length needs a distribution
    ({"mean_len": 5000}, "data.mean_len"),                          # above seq_len
    ({"mean_len": 700, "p99_len": 600}, "data.p99_len"),            # p99 below the mean
    ({"histogram": []}, "data.histogram"),
    ({"histogram": [[128]]}, "data.histogram[0]"),
    ({"histogram": [[128, 1], [0, 1]]}, "data.histogram[1]"),
    ({"histogram": [[128, 0]]}, "data.histogram"),
    ({"packing": True}, "data.packing"),
    ("fixed", "data"),
])
def test_bad_data_names_the_key(value, key):
    with pytest.raises(PlanError) as e:
        parse_data(value, 4096)
    assert e.value.key == key


@pytest.mark.parametrize("value, key", [
    ({"expandable_segments": "yes"}, "allocator.expandable_segments"),
    ({"expandable_segments": 1}, "allocator.expandable_segments"),
    ({"max_split_size_mb": 19}, "allocator.max_split_size_mb"),    # below kLargeBuffer / MiB = 20
    ({"empty_cache_every": 0}, "allocator.empty_cache_every"),
    ({"garbage_collection_threshold": 0.6}, "allocator.garbage_collection_threshold"),
])
def test_bad_allocator_names_the_key(value, key):
    with pytest.raises(PlanError) as e:
        parse_allocator(value)
    assert e.value.key == key


def test_plan_reads_the_keys_and_round_trips_and_a_plan_without_them_is_unchanged():
    from zerocalc.plan import parse_plan, plan_to_dict
    p = parse_plan({"seq_len": 2048, "data": {"lengths": "padded-longest", "mean_len": 700, "p99_len": 2048},
                    "allocator": {"expandable_segments": True}})
    assert p.data.mean_len == 700 and p.allocator.expandable_segments is True
    d = plan_to_dict(p)
    assert d["data"]["lengths"] == "padded-longest" and d["allocator"]["expandable_segments"] is True
    assert parse_plan(d) == p
    bare = plan_to_dict(parse_plan({}))
    assert "data" not in bare and "allocator" not in bare        # omitted at their defaults, as `network`


@pytest.mark.parametrize("plan, key", [({"seq_len": 1024, "data": {"mean_len": 2000}}, "data.mean_len"),
                                       ({"allocator": {"max_split_size_mb": "big"}}, "allocator.max_split_size_mb"),
                                       ({"data": []}, "data")])
def test_plan_refuses_bad_values_naming_the_key(plan, key):
    from zerocalc.plan import parse_plan
    with pytest.raises(PlanError) as e:
        parse_plan(plan)
    assert e.value.key == key


@pytest.mark.parametrize("plan, key", [('{"data": {"lengths": "bucketed"}}', "data.lengths"),
                                       ('{"allocator": {"empty_cache_every": -1}}', "allocator.empty_cache_every")])
def test_the_cli_exits_2_naming_the_key(tmp_path, capsys, plan, key):
    from zerocalc.cli import main
    f = tmp_path / "plan.json"
    f.write_text(plan)
    rc = main(["estimate", "--plan", str(f)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"zerocalc: {key}: ")
