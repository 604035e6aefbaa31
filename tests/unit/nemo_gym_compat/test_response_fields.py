"""A NeMo Gym Response's `incomplete_details`, `usage` and `error` read by attribute, as servers
read the SDK's (arena and indirect_prompt_injection score a truncated answer 0 through
`incomplete_details.reason`; speed_bench counts `usage.output_tokens`)."""

from __future__ import annotations

from typing import Any

from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse, NeMoGymResponseUsage

BODY: dict[str, Any] = {"id": "resp_1", "created_at": 1.0, "model": "m", "output": []}


def test_a_truncated_answer_says_why_by_attribute() -> None:
    response = NeMoGymResponse(**BODY, incomplete_details={"reason": "max_output_tokens"})
    assert response.incomplete_details is not None
    assert getattr(response.incomplete_details, "reason", None) == "max_output_tokens"
    assert NeMoGymResponse(**BODY).incomplete_details is None


def test_usage_counts_and_details_are_attributes_and_a_missing_count_stays_unknown() -> None:
    usage = {
        "input_tokens": 7,
        "output_tokens": 5,
        "total_tokens": 12,
        "input_tokens_details": {"cached_tokens": 2},
        "output_tokens_details": {"reasoning_tokens": 3},
    }
    response = NeMoGymResponse(**BODY, usage=usage)
    assert isinstance(response.usage, NeMoGymResponseUsage)
    assert (response.usage.output_tokens, response.usage.total_tokens) == (5, 12)
    assert response.usage.input_tokens_details is not None
    assert response.usage.input_tokens_details.cached_tokens == 2
    assert response.model_dump(exclude_none=True)["usage"] == usage  # served back as it came
    assert NeMoGymResponse(**BODY, usage={"input_tokens": 7}).usage.output_tokens is None  # type: ignore[union-attr]


def test_an_error_reads_as_the_sdks_code_and_message() -> None:
    response = NeMoGymResponse(**BODY, error={"code": "server_error", "message": "engine died"})
    assert response.error is not None
    assert (response.error.code, response.error.message) == ("server_error", "engine died")
    assert "engine died" in str(response.error)
