"""NeMo Gym's prompt and metric helpers, as their servers call them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.nemo_gym_compat.api.prompt import apply_prompt_to_row, fill_prompt, load_prompt_config
from ng_cli.nemo_gym_compat.api.reward_profile import (
    RewardProfiler,
    compute_pass_majority_metrics,
    highest_k_metrics,
)


def test_prompt_files_fill_from_the_row(tmp_path: Path) -> None:
    path = tmp_path / "judge.yaml"
    path.write_text("system: You grade {subject}.\nuser: 'Q: {question} {{literal}}'\n")
    config = load_prompt_config(str(path))
    row = {"subject": "math", "question": "1+1?", "responses_create_params": {"temperature": 0.5}}
    assert fill_prompt(config, row) == [
        {"role": "system", "content": "You grade math."},
        {"role": "user", "content": "Q: 1+1? {literal}"},
    ]
    assert apply_prompt_to_row(row, config)["responses_create_params"]["temperature"] == 0.5
    with pytest.raises(KeyError, match="references field 'question'"):
        fill_prompt(config, {"subject": "math"})


def test_pass_and_majority_at_k() -> None:
    tasks = [
        [{"reward": 1.0, "answer": "2"}, {"reward": 0.0, "answer": "3"}, {"reward": 1.0, "answer": "2"}],
        [{"reward": 0.0, "answer": None}, {"reward": 0.0, "answer": "5"}, {"reward": 0.0, "answer": "5"}],
    ]
    metrics, _, names, max_k = compute_pass_majority_metrics(tasks, answer_key="answer")
    assert (names, max_k) == (["accuracy", "no_answer"], 3)
    assert metrics["pass@1/accuracy"] == pytest.approx(100 * (2 / 3 + 0) / 2)
    assert metrics["pass@2/accuracy"] == pytest.approx(100 * (1 - 0 / 3) / 2)  # 1 wrong of 3: C(1,2)=0
    assert metrics["majority@3/accuracy"] == pytest.approx(50.0)
    assert metrics["pass@1[avg-of-3]/no_answer"] == pytest.approx(100 * (0 + 1 / 3) / 2)
    assert highest_k_metrics(metrics, "pass@{k}", score_names=["accuracy"]) == {"pass@3/accuracy": 50.0}


def test_a_rollouts_record_holds_its_ids_reward_usage_and_numeric_fields() -> None:
    result = {
        "_ng_task_index": 2,
        "_ng_rollout_index": 1,
        "_ng_failure_judge_error": "judge down",
        "reward": 0.5,
        "response": {"usage": {"input_tokens": 7, "output_tokens": 3, "input_tokens_details": {}}},
        "judge_passed": True,
        "score": 4,
        "verdict": "A>B",
    }
    assert RewardProfiler().rollout_info_from_result(result) == {
        "rollout_id": "2:1",
        "_ng_task_index": 2,
        "_ng_rollout_index": 1,
        "reward": 0.5,
        "input_tokens": 7,
        "output_tokens": 3,
        "judge_passed": 1,
        "score": 4,
    }
    with pytest.raises(KeyError):
        RewardProfiler().rollout_info_from_result({"reward": 1.0})
