"""Every architecture transformers can build, counted exactly or refused by name.

tests/data/architectures.json (tools/archgen, `make archgen`: transformers 5.24.0 on the meta device) holds
per row a config, the class transformers built from it and ``sum(p.numel() for p in model.parameters())``.
For every row the engine's count must equal that number exactly, or the engine must refuse the config with
a PlanError naming its model_type; any other number fails. tests/data/architecture_refusals.json lists the
model_types allowed to be refused: it may only shrink (a listed type that counts exactly must be taken off,
a type not listed that is refused fails).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.model import model_from_config

DATA = Path(__file__).parent / "data"
FIXTURE = json.loads((DATA / "architectures.json").read_text())
ROWS = [r for r in FIXTURE["rows"] if "hf_params" in r]
REFUSED = set(json.loads((DATA / "architecture_refusals.json").read_text())["refused"])


def outcome(row: dict):
    """The engine's count for the row's config, or the PlanError it raised."""
    try:
        return model_from_config(row["config"]).total_params
    except PlanError as e:
        return e


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_exact_or_refused_by_name(row):
    got = outcome(row)
    mt = row["model_type"]
    if isinstance(got, PlanError):
        assert mt in REFUSED, f"{row['id']}: refused but not in architecture_refusals.json: {got}"
        assert repr(mt) in str(got), f"{row['id']}: the refusal must name the model_type: {got}"
        return
    assert got == row["hf_params"], (f"{row['id']} ({row['class']}): engine {got:,} vs transformers "
                                     f"{row['hf_params']:,} ({got - row['hf_params']:+,}); parts {row['parts']}")


def test_refusal_list_only_shrinks():
    """A listed model_type none of whose rows is refused any more must leave the list."""
    by_type: dict[str, list] = {}
    for r in ROWS:
        by_type.setdefault(r["model_type"], []).append(r)
    stale = sorted(t for t in REFUSED if t in by_type
                   and not any(isinstance(outcome(r), PlanError) for r in by_type[t]))
    assert not stale, f"now counted exactly, take them off architecture_refusals.json: {stale}"
    unknown = sorted(t for t in REFUSED if t not in by_type)
    assert not unknown, f"listed but no fixture row: {unknown}"


def test_fixture_covers_the_mappings():
    """The fixture has a default-config row for every model_type of the three auto mappings it was built
    from (308 in transformers 5.24.0), and a row for every engine preset."""
    from zerocalc.presets import MODELS
    ids = {r["id"] for r in FIXTURE["rows"]}
    defaults = [i for i in ids if i.startswith("default:")]
    assert len(defaults) >= 300
    assert {f"preset:{p}" for p in MODELS} <= ids


def test_tied_head_follows_the_count():
    """Where the engine counts exactly, its lm_head is there exactly when transformers has one (a tied head
    and an untied head of the same size cannot trade places)."""
    for r in ROWS:
        got = outcome(r)
        if isinstance(got, PlanError) or "vision" in r["parts"]:
            continue
        arch = model_from_config(r["config"])
        has_head = arch.params_by_component().get("lm_head", 0) > 0
        assert has_head == (r["parts"].get("lm_head", 0) > 0), r["id"]


def test_composites_are_never_their_text_tower():
    """A config transformers builds with a vision or audio tower is never given the text tower's count."""
    for r in ROWS:
        if not ({"vision", "audio", "projector"} & set(r["parts"])):
            continue
        got = outcome(r)
        assert isinstance(got, PlanError) or got == r["hf_params"], r["id"]


def test_an_approximate_block_is_warned_where_users_read():
    """A model whose parameters are exact but whose block is costed as another (model_support not "exact") gets
    the model-approximate warning naming the model; a traced Llama gets none."""
    from zerocalc import Plan, estimate
    # XLNet: costed as the BERT block of memory/blocks.py, not traced (its two-stream relative attention is not
    # modelled; GPT-J, CodeGen and XGLM, traced in the family and BART grids, say exact)
    xlnet = next(r["config"] for r in ROWS if r["model_type"] == "xlnet")
    warned = estimate(Plan.from_dict({"model": xlnet, "seq_len": 512})).to_dict()
    assert warned["model_support"] != "exact"
    ids = {w["id"]: w["message"] for w in warned["warnings"]}
    assert "model-approximate" in ids and ids["model-approximate"].startswith("xlnet")
    exact = estimate(Plan.from_dict({"seq_len": 512})).to_dict()
    assert exact["model_support"] == "exact"
    assert "model-approximate" not in {w["id"] for w in exact["warnings"]}


def test_readme_counts_the_traced_defaults():
    """The README's sentence on how many default configs have traced activations is the fixture's count: a
    model_support either "exact" or naming its trace ("activations traced"), the rest costed as the nearest block."""
    import re
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    m = re.search(r"Of the (\d+) default configs, (\d+) have their activations traced and (\d+) (?:is|are) still",
                  " ".join(readme.split()))
    assert m, "README lost its sentence on the traced default configs"
    traced = approximate = 0
    for r in ROWS:
        if not r["id"].startswith("default:"):
            continue
        support = model_from_config(r["config"]).support
        if support == "exact" or "activations traced" in support:
            traced += 1
        else:
            approximate += 1
    assert tuple(map(int, m.groups())) == (traced + approximate, traced, approximate)
