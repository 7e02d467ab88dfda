"""Where text becomes model input: BOS, chat template and prompt prefix, decided in one place.

Every causal scorer operation (requests, sentences, generation prompts) and the LoRA training data
(:mod:`biaslab.mitigation.lora.sft_data`) go through one :class:`PromptFormat`, so base, prompt and LoRA
variants and LoRA training condition the model the same way.

**BOS** (``scoring.add_bos``: ``auto | true | false``). ``auto`` is what the tokenizer does by default
with ``add_special_tokens=True`` - the setting of the seed papers' code (they call the tokenizer with its
defaults) and of lm-evaluation-harness since 0.4.9.2 (``add_bos_token`` left unset; older versions
forced it on only for Gemma). Llama, Gemma and Mistral tokenizers add BOS, GPT-2 and Qwen2.5 do not,
and neither does the default model's byte-level BPE. ``true``/``false`` force it. The rule (see
:mod:`biaslab.scoring.tokenization`): a prompt starts with BOS exactly once - a chat template that
already writes BOS keeps its own and gets no second one; a sentence scored from the start of the text
(empty context) is always conditioned on BOS (EOS when the model has none), as in the harness.

**Chat** (``evaluation.prompt_format: raw | chat``). ``raw`` (default, the papers' setting) scores
the prompt text as is. ``chat`` renders each prompt - the context of a request, a generation prompt -
as a user turn with the tokenizer's chat template (``add_generation_prompt=True``), and the
continuation as the assistant's answer (its leading space dropped: the answer starts the assistant
turn, as the harness does with ``target_delimiter=""`` under a chat template). A prompt variant's
debiasing instruction becomes the system prompt when the template has a system role, else it is
prepended to the user turn. Sentences scored from the start of the text (RuBia, CrowS-Pairs, the
GBEM-UA probability set, WinoBias/Winogender) have no prompt and are scored unchanged under ``chat``.

**Prefix** (prompt variant, raw): ``prefix + separator + context`` (``separator`` is ``" "`` unless a
benchmark asks for its paper's join, :meth:`PromptFormat.with_separator`); a sentence without context
gets the prefix as its context (:func:`~biaslab.scoring.requests.with_prefix`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from biaslab.errors import BiaslabError
from biaslab.scoring.requests import Request, TokenRequest, with_prefix
from biaslab.scoring.tokenization import encode, encode_requests, prefix_token_id, with_bos

ADD_BOS_SETTINGS = ("auto", True, False)
PROMPT_FORMATS = ("raw", "chat")
_SENTINEL = "\x00biaslab-system-probe\x00"


class FormatError(BiaslabError, ValueError):
    """The model cannot be formatted as asked (no BOS token, no chat template)."""


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether ``tokenizer(text)`` (``add_special_tokens=True``, its default) starts with its BOS token."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    with_specials = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    without = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    return with_specials[:1] == [bos] and without[:1] != [bos]


def resolve_add_bos(tokenizer, setting: str | bool = "auto") -> bool:
    """``scoring.add_bos`` for this tokenizer: ``auto`` -> :func:`tokenizer_adds_bos`."""
    if setting not in ADD_BOS_SETTINGS:
        raise FormatError(f"scoring.add_bos must be auto, true or false; got {setting!r}")
    if setting == "auto":
        return tokenizer_adds_bos(tokenizer)
    if setting and getattr(tokenizer, "bos_token_id", None) is None:
        raise FormatError("params.yaml scoring.add_bos: true, but the tokenizer has no BOS token; use auto or false")
    return bool(setting)


def has_system_role(tokenizer) -> bool:
    """Whether the chat template renders a system message (Gemma's raises; some templates drop it)."""
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "system", "content": _SENTINEL}, {"role": "user", "content": "x"}],
            tokenize=False, add_generation_prompt=True,
        )
    except Exception:  # noqa: BLE001 - jinja's TemplateError and whatever a template raises: no system role
        return False
    return _SENTINEL in rendered


@dataclass(frozen=True)
class PromptFormat:
    """How one scorer turns prompts and sentences into token ids (see the module docstring)."""

    tokenizer: Any
    add_bos: bool = False
    chat: bool = False
    prefix: str = ""
    system_role: bool = field(default=False, compare=False)
    separator: str = " "  # between the prefix and the text (raw prompts, or the user turn without a system role)

    @classmethod
    def create(cls, tokenizer, add_bos: str | bool = "auto", prompt_format: str = "raw", prefix: str = "") -> "PromptFormat":
        """Resolve the params' settings against the tokenizer (errors name the params key)."""
        if prompt_format not in PROMPT_FORMATS:
            raise FormatError(f"evaluation.prompt_format must be raw or chat; got {prompt_format!r}")
        chat = prompt_format == "chat"
        if chat and not getattr(tokenizer, "chat_template", None):
            raise FormatError("params.yaml evaluation.prompt_format: chat, but the model's tokenizer has no chat "
                              "template (tokenizer_config.json chat_template); use raw")
        return cls(tokenizer, resolve_add_bos(tokenizer, add_bos), chat, prefix.strip(),
                   has_system_role(tokenizer) if chat else False)

    def with_prefix(self, prefix: str) -> "PromptFormat":
        return replace(self, prefix=prefix.strip())

    def with_separator(self, separator: str) -> "PromptFormat":
        """The same format joining prefix and text with ``separator`` (e.g. ``""``: GBEM-UA's authors)."""
        return replace(self, separator=separator)

    # ------------------------------------------------------------------ text
    def chat_prompt(self, user_text: str) -> str:
        """``user_text`` as a user turn (the prefix as system prompt, or before the text), ready for the answer."""
        messages = []
        if self.prefix and self.system_role:
            messages.append({"role": "system", "content": self.prefix})
        elif self.prefix:
            user_text = f"{self.prefix}{self.separator}{user_text}"
        messages.append({"role": "user", "content": user_text})
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def request(self, request: Request) -> Request:
        """The request as the model sees it (text level): prefix and chat applied."""
        if self.chat and request.context:
            return Request(self.chat_prompt(request.context), request.continuation.lstrip())
        return with_prefix(request, self.prefix, self.separator)

    def prompt(self, text: str) -> str:
        """A generation prompt as the model sees it (text level)."""
        if self.chat:
            return self.chat_prompt(text)
        return f"{self.prefix}{self.separator}{text}" if self.prefix else text

    # ------------------------------------------------------------------ tokens
    def encode_requests(self, requests: Sequence[Request]) -> list[TokenRequest]:
        """Token requests (BOS rule applied), every distinct text encoded once."""
        formatted: dict[Request, Request] = {}
        for r in requests:  # chat templates render once per distinct prompt (OccuGender repeats each ~26x)
            if r not in formatted:
                formatted[r] = self.request(r)
        return encode_requests(self.tokenizer, [formatted[r] for r in requests], add_bos=self.add_bos)

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a generation prompt (BOS rule applied; an empty prompt is the start token)."""
        ids = encode(self.tokenizer, self.prompt(text))
        if not ids:
            return [prefix_token_id(self.tokenizer)]
        return with_bos(self.tokenizer, ids) if self.add_bos else ids

    def sentence_request(self, sentence: str) -> TokenRequest:
        """A sentence scored from the start of the text (empty context), as a token request."""
        return self.encode_requests([Request("", sentence)])[0]

    def describe(self) -> dict[str, Any]:
        """What is logged with an evaluation: the resolved settings."""
        return {"add_bos": self.add_bos, "prompt_format": "chat" if self.chat else "raw",
                "system_role": self.system_role}
