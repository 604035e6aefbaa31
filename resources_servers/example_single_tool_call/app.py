"""`example_single_tool_call`: one `get_weather(city)` tool and a verify that reads the final answer.

The smallest complete environment: a deterministic weather table (so rewards are reproducible),
a tool that refuses unknown cities with a `ToolError` the model gets to see, and a verify that
gives 1.0 when the final assistant message reports that row's city's weather (condition and
temperature), else 0.0. The launcher's tests and start-up benchmark use it: keep it light.

NeMo Gym has an environment of the same name whose rows carry no `expected_city`; such a row is
scored by NeMo Gym's rule (1.0 when the response calls `get_weather` at all), so its data runs
here unchanged. A row that has the key is held to ours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.servers import ResourcesServer, ToolError, VerifyRequest, tool

WEATHER: dict[str, tuple[str, int]] = {
    "paris": ("sunny", 24),
    "london": ("rainy", 15),
    "tokyo": ("cloudy", 19),
    "new york": ("windy", 12),
    "sydney": ("sunny", 28),
    "cairo": ("hot", 35),
    "oslo": ("snowy", -3),
    "lima": ("foggy", 17),
}
"""City (lower case) -> (condition, temperature in degrees Celsius). Fake and fixed on purpose."""


class WeatherConfig(ResourcesServerConfig):
    temperature_unit: Literal["celsius", "fahrenheit"] = "celsius"
    """Unit of the temperatures `get_weather` reports (and verify expects)."""


class GetWeatherArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    city: str = Field(min_length=1, max_length=100)


class ExampleSingleToolCall(ResourcesServer[WeatherConfig]):
    """Weather lookups for the model; reward for reporting the looked-up weather."""

    config_class = WeatherConfig

    @tool
    async def get_weather(self, _session_id: str, args: GetWeatherArgs) -> dict[str, Any]:
        """The weather of one city from the fixed table."""
        return self.weather_of(args.city)

    async def verify(self, _session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        if "expected_city" not in (request.model_extra or {}):
            return {"reward": 1.0 if calls_get_weather(request.response) else 0.0}
        city = request.extra("expected_city")
        if not isinstance(city, str):
            raise ToolError(f"the row's 'expected_city' must be a string, got {city!r}")
        weather = self.weather_of(city)
        text = request.final_assistant_text()
        mentions = mentions_weather(text, weather["condition"], weather["temperature"])
        return {"reward": 1.0 if mentions else 0.0}

    def weather_of(self, city: str) -> dict[str, Any]:
        """The table entry for `city` (case and surrounding spaces ignored), or a ToolError."""
        entry = WEATHER.get(" ".join(city.lower().split()))
        if entry is None:
            known = ", ".join(name.title() for name in sorted(WEATHER))
            raise ToolError(f"unknown city {city!r}; known cities: {known}")
        condition, celsius = entry
        unit = self.config.temperature_unit
        temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
        return {"city": city.strip(), "condition": condition, "temperature": temperature, "unit": unit}


def calls_get_weather(response: Mapping[str, Any]) -> bool:
    """NeMo Gym's rule for its rows: some output item is a `get_weather` function call."""
    output = response.get("output")
    return isinstance(output, list) and any(
        isinstance(item, Mapping)
        and item.get("type") == "function_call"
        and item.get("name") == "get_weather"
        for item in output
    )


def mentions_weather(text: str, condition: str, temperature: int) -> bool:
    """Whether `text` names the condition (a whole word) and the temperature (a whole number)."""
    has_condition = re.search(rf"\b{re.escape(condition)}\b", text, re.IGNORECASE) is not None
    has_temperature = re.search(rf"(?<![\d.]){temperature}(?![\d])", text) is not None
    return has_condition and has_temperature
