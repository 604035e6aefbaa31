"""`nemo_gym.openai_utils`'s Response as NeMo Gym's servers read it: by attribute, as the SDK's."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse

RESPONSE = {"id": "r", "created_at": 0, "model": "m", "output": []}


def test_usage_is_read_by_attribute_as_the_sdks_response_usage() -> None:
    usage = {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12,
             "input_tokens_details": {"cached_tokens": 2}, "output_tokens_details": {"reasoning_tokens": 3}}  # fmt: skip
    response = NeMoGymResponse.model_validate({**RESPONSE, "usage": usage})
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 7)  # speed_bench, nemo_user_sim
    assert response.usage.input_tokens_details is not None
    assert response.usage.input_tokens_details.cached_tokens == 2
    assert response.model_dump()["usage"] == usage  # dumped as it came


def test_usage_without_details_or_counts_still_parses() -> None:
    response = NeMoGymResponse.model_validate({**RESPONSE, "usage": {"output_tokens": 4}})
    assert response.usage is not None
    assert (response.usage.output_tokens, response.usage.input_tokens) == (4, 0)
    assert response.usage.output_tokens_details is None
    assert NeMoGymResponse.model_validate(RESPONSE).usage is None
