"""rs_math's task-data schema (NeMo Gym's `task_data.py` protocol), for `gym env schema`."""

from pydantic import BaseModel, ConfigDict, Field


class TaskData(BaseModel):
    model_config = ConfigDict(extra="allow")

    expected_answer: str = Field(json_schema_extra={"consumed_by": ["verify"]})
    difficulty: int | None = Field(default=None, ge=1, le=5)
