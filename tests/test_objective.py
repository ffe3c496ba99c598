"""The objective (000): its fields, made from a prompt plus flags by `objective_from_prompt`,
and the metadata the flags left out, recorded in `missing_metadata` outside the confirmed
fields rather than guessed into them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import init_with_owner_file, invoke

from loopx.governance.contract import objective_from_prompt
from loopx.governance.records import Objective
from loopx.kernel.errors import RecordRejected

LISTS = ("inputs", "targets", "generalization", "success_metrics")


def test_a_prompt_alone_confirms_only_the_prompt() -> None:
    prompt = "Does a wider layer help?  It must\nhold on new writers. Nothing else is known."
    objective, missing = objective_from_prompt(prompt)
    # The prompt is kept as written; the name is only derived (and says so in missing).
    assert objective["prompt"] == prompt
    assert objective["name"] == "Does a wider layer help"
    assert objective["domain"] == "unspecified"
    assert all(objective[k] == [] for k in LISTS)
    assert "constraints" not in objective  # nothing from the prompt becomes a confirmed fact
    assert missing == ["objective.name (derived from the prompt)", "objective.domain",
                       *(f"objective.{k}" for k in LISTS)]
    assert Objective.model_validate(objective).constraints == {}


def test_every_field_given_leaves_nothing_missing() -> None:
    objective, missing = objective_from_prompt(
        "Beat the baseline.", name="digits", domain="vision", inputs=["pixels"],
        targets=["label"], generalization=["unseen writers"], success_metrics=["accuracy"])
    assert missing == []
    assert objective == {"name": "digits", "prompt": "Beat the baseline.", "domain": "vision",
                         "inputs": ["pixels"], "targets": ["label"],
                         "generalization": ["unseen writers"], "success_metrics": ["accuracy"]}
    Objective.model_validate(objective)


def test_a_long_first_sentence_is_cut_and_an_empty_prompt_is_refused() -> None:
    objective, _ = objective_from_prompt("word " * 40)
    assert len(objective["name"]) <= 80 and objective["name"].endswith("...")
    for empty in ("", "   \n\t "):
        with pytest.raises(RecordRejected) as err:
            objective_from_prompt(empty)
        assert err.value.problems[0].field == "objective.prompt"


def test_contract_init_records_the_missing_metadata_beside_the_confirmed_fields(
        tmp_path: Path) -> None:
    ws = init_with_owner_file(tmp_path, "objective")
    args = ("contract", "init", "--prompt", "Does a wider layer help? Keep the test split.",
            "--domain", "vision", "--input", "pixels", "--success-metric", "accuracy",
            "--metric", "acc", "--direction", "maximize", "--baseline", "0.9", "--seeds", "0,1",
            "--protected", "eval/")
    dry = invoke(ws, *args, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    contract = json.loads(dry.stdout)["contract"]
    assert contract["objective"] == {
        "name": "Does a wider layer help", "prompt": "Does a wider layer help? Keep the test split.",
        "domain": "vision", "inputs": ["pixels"], "targets": [], "generalization": [],
        "success_metrics": ["accuracy"], "constraints": {}}
    assert contract["missing_metadata"] == ["objective.name (derived from the prompt)",
                                            "objective.targets", "objective.generalization"]
    # Written for real, the stored contract carries the same, and `contract show` lists it.
    owner = (ws / "owner.token").read_text().strip()
    reg = invoke(ws, "agent", "register", "--agent-id", "cur", "--role", "research_curator",
                 "--json", env={"LOOPX_TOKEN": owner, "LOOPX_AGENT_ID": "owner"})
    token = json.loads(reg.stdout)["token"]
    made = invoke(ws, *args, "--json", env={"LOOPX_TOKEN": token, "LOOPX_AGENT_ID": "cur"})
    assert made.exit_code == 0, made.stderr
    shown = json.loads(invoke(ws, "contract", "show", "--json").stdout)["contract"]
    assert (shown["objective"], shown["missing_metadata"]) == (
        contract["objective"], contract["missing_metadata"])
    text = invoke(ws, "contract", "show").stdout
    assert ("missing metadata: objective.name (derived from the prompt), objective.targets, "
            "objective.generalization") in text
    # With --file the contract says what is missing itself; loopx adds nothing.
    source = tmp_path / "c.json"
    kept = ("contract_id", "objective", "metric", "evaluation", "protected_scope")
    source.write_text(json.dumps({**{k: contract[k] for k in kept},
                                  "missing_metadata": ["objective.targets"]}))
    from_file = json.loads(invoke(ws, "contract", "init", "--file", str(source), "--dry-run",
                                  "--json").stdout)["contract"]
    assert from_file["missing_metadata"] == ["objective.targets"]
