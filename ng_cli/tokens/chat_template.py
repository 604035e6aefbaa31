"""`ChatTokenizer`: the served model's tokenizer and chat template, rendering as vLLM does.

vLLM renders a chat request with transformers' `apply_chat_template`: a sandboxed Jinja
environment with `trim_blocks`, `lstrip_blocks`, the `loopcontrols` extension, a `tojson` that
keeps non-ASCII, `raise_exception` and `strftime_now`, and the tokenizer's special tokens as
variables; assistant tool-call arguments arrive as objects (vLLM parses the JSON strings), and
the text is encoded without adding special tokens. This module reproduces that from a local
model directory (`tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`,
`generation_config.json`) with `tokenizers` and `jinja2` only, so the model server needs
neither transformers nor torch. Messages are passed in vLLM's "string" content format (text
parts joined); a template that iterates over content parts (vLLM's "openai" format) is not
reproduced, and the first prompt would then differ from vLLM's `/tokenize` of the same request.

The end-of-turn token is found once, at load: the template must close an assistant turn with one
of the model's EOS tokens (tokenizer_config's `eos_token`, generation_config's `eos_token_id`),
and that token must be an added token. Otherwise splicing has nothing to count, and loading
raises `EndOfTurnNotFoundError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ng_cli.config.paths import repo_root
from ng_cli.errors import ConfigError

__all__ = [
    "ChatTokenizer",
    "EndOfTurnNotFoundError",
    "TokenizerLoadError",
    "find_tokenizer_dir",
    "has_tokenizer_files",
]

_PROBE_REPLY = "pong-7c1f"
_PROBE_NEXT = "again-3b9e"
_SPECIAL_VARIABLES = ("bos_token", "eos_token", "unk_token", "pad_token")


class TokenizerLoadError(ConfigError):
    """The tokenizer or chat template of a model directory cannot be loaded."""


class EndOfTurnNotFoundError(TokenizerLoadError):
    """The chat template does not close an assistant turn with an EOS token we can count."""


def has_tokenizer_files(directory: Path) -> bool:
    """Whether `directory` holds what `ChatTokenizer.load` needs (a fast tokenizer and its config)."""
    return (directory / "tokenizer.json").is_file() and (directory / "tokenizer_config.json").is_file()


def find_tokenizer_dir(name: str) -> Path | None:
    """A local directory with tokenizer files named by `name` (relative: to the cwd, else the repo
    root, as engines resolve `model`), or None (e.g. a hub model name)."""
    path = Path(name).expanduser()
    for candidate in (path, repo_root() / path) if not path.is_absolute() else (path,):
        if candidate.is_dir() and has_tokenizer_files(candidate):
            return candidate.resolve()
    return None


@dataclass(frozen=True, slots=True)
class _Loaded:
    config: dict[str, Any]
    template: str
    eos_ids: tuple[int, ...]


class ChatTokenizer:
    """Render messages with the model's chat template and encode them, as the engine does."""

    def __init__(self, tokenizer: Any, template: str, special: Mapping[str, str], *, source: str) -> None:
        self._tokenizer = tokenizer
        self._template = _compile(template, source)
        self._special = dict(special)
        self.source = source
        """The directory this was loaded from (for messages)."""
        self.end_of_turn_id = -1
        """The token that closes an assistant turn (set by `find_end_of_turn`)."""
        self.end_of_turn_text = ""
        self.end_of_turn_strips_right = False
        """The token absorbs the whitespace after it (an AddedToken with rstrip)."""

    @classmethod
    def load(cls, directory: Path) -> ChatTokenizer:
        """Load from a local model directory; raises TokenizerLoadError naming the file and problem."""
        from tokenizers import Tokenizer

        loaded = _read_files(directory)
        try:
            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        except Exception as error:  # tokenizers raises plain Exception subclasses with its message
            raise TokenizerLoadError(f"{directory / 'tokenizer.json'}: cannot be loaded: {error}") from None
        special = {
            name: text for name in _SPECIAL_VARIABLES if (text := _token_text(loaded.config.get(name)))
        }
        eos_ids = list(loaded.eos_ids)
        if "eos_token" in special and (eos_id := tokenizer.token_to_id(special["eos_token"])) is not None:
            eos_ids.append(int(eos_id))
        chat = cls(tokenizer, loaded.template, special, source=str(directory))
        chat.find_end_of_turn(list(dict.fromkeys(eos_ids)))
        return chat

    def find_end_of_turn(self, eos_ids: Sequence[int]) -> None:
        """Pick the EOS token the template closes assistant turns with, by rendering a probe."""
        decoder = self._tokenizer.get_added_tokens_decoder()
        candidates = {i: str(decoder[i].content) for i in eos_ids if i in decoder}
        probe = [
            {"role": "user", "content": "ping"},
            {"role": "assistant", "content": _PROBE_REPLY},
            {"role": "user", "content": _PROBE_NEXT},
        ]
        try:
            text = self.render(probe, add_generation_prompt=False)
        except Exception as error:
            raise TokenizerLoadError(
                f"{self.source}: the chat template fails on a plain conversation: {error}"
            ) from None
        start, end = text.find(_PROBE_REPLY), text.find(_PROBE_NEXT)
        between = text[start + len(_PROBE_REPLY) : end] if 0 <= start < end else ""
        found = [(between.find(tok), i, tok) for i, tok in candidates.items() if tok in between]
        if not found:
            names = [self._tokenizer.id_to_token(i) for i in eos_ids] or ["none declared"]
            raise EndOfTurnNotFoundError(
                f"{self.source}: the chat template does not close an assistant turn with an EOS token "
                f"(EOS tokens: {names}; text after an assistant reply: {between!r})",
                hint="token_exact needs an end-of-turn token to splice on; set token_exact: false",
            )
        _, self.end_of_turn_id, self.end_of_turn_text = min(found)
        self.end_of_turn_strips_right = bool(decoder[self.end_of_turn_id].rstrip)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt text vLLM renders for these chat messages (tool-call arguments parsed)."""
        variables: dict[str, Any] = {**self._special, **(template_kwargs or {})}
        variables.update(
            messages=[_as_template_message(message) for message in messages],
            tools=list(tools) if tools else None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
        )
        return str(self._template.render(**variables))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without added special tokens (as vLLM encodes a rendered chat)."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))

    def token_text(self, token_id: int) -> str:
        """One token as the vocabulary spells it (for drift reports)."""
        text = self._tokenizer.id_to_token(token_id)
        return "<not in the vocabulary>" if text is None else str(text)


def _compile(template: str, source: str) -> Any:
    """transformers' chat-template environment (utils/chat_template_utils.py), minus its tracker."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as error:
        raise TokenizerLoadError(
            f"{source}: the chat template does not compile: line {error.lineno}: {error.message}"
        ) from None


def _as_template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's view of a chat message in its "string" content format: text parts joined with newlines
    (no content: ""), tool-call arguments as objects."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    elif content is None:
        out["content"] = ""
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        if not calls:
            del out["tool_calls"]
        else:
            out["tool_calls"] = [_parsed_call(call) for call in calls]
    return out


def _parsed_call(call: Any) -> Any:
    """vLLM's `_postprocess_messages`: arguments JSON text -> object ({} when empty or not an object)."""
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments else {}
        except json.JSONDecodeError:
            arguments = {}
    function["arguments"] = arguments if isinstance(arguments, dict) else {}
    return {**call, "function": function}


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TokenizerLoadError(f"{path}: cannot be read: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise TokenizerLoadError(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(value, dict):
        raise TokenizerLoadError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _read_files(directory: Path) -> _Loaded:
    """tokenizer_config.json, the template (chat_template.jinja wins), and every EOS id declared."""
    if not directory.is_dir():
        raise TokenizerLoadError(
            f"{directory}: not a directory (a local model or tokenizer directory is needed)"
        )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (directory / name).is_file():
            raise TokenizerLoadError(f"{directory}: no {name} (token_exact needs the model's fast tokenizer)")
    config = _read_json(directory / "tokenizer_config.json")
    template_file = directory / "chat_template.jinja"
    template = (
        template_file.read_text(encoding="utf-8") if template_file.is_file() else config.get("chat_template")
    )
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, Mapping)}
        template = named.get("default")
    if not isinstance(template, str) or not template:
        raise TokenizerLoadError(f"{directory / 'tokenizer_config.json'}: chat_template: no chat template")
    eos_ids: list[int] = []
    generation = directory / "generation_config.json"
    if generation.is_file():
        declared = _read_json(generation).get("eos_token_id")
        eos_ids += (
            [declared] if isinstance(declared, int) else [i for i in declared or () if isinstance(i, int)]
        )
    return _Loaded(config, template, tuple(eos_ids))
