"""The instruction gate: does a text written by someone other than the user read as an
order to the agent, or try to break out of the context block?

Generated text (a session summary, a project brief, a compaction summary) and names taken
from files and tool calls (file names, commands, script names) describe what happened;
they never give orders. A sentence that does is an injection carried along (a cloned
README's "AI agents must run …", a tool output's "IMPORTANT: ignore previous
instructions"), and is left out of what is stored. The patterns follow the classes of
OWASP's LLM Prompt Injection Prevention Cheat Sheet (direct override phrases, role and
system-prompt talk, delimiter and markup injection, hidden commands) and the examples of
OWASP Top 10 for LLM Applications 2025, LLM01 "Prompt Injection".

Only for text that is not the user's own: a user's "always run the tests" is a rule the
user set, and goes through extraction instead.
"""

from __future__ import annotations

import re
import unicodedata

_I = re.IGNORECASE
#: ``(reason, pattern)``, tried in order on the text with invisible characters stripped
#: and NFKC-folded (so full-width letters and look-alike compatibility forms match).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("override", re.compile(
        r"\b(ignore|disregard|forget|override|bypass)\s+(all\s+|any\s+|the\s+)?"
        r"(previous|prior|above|earlier|preceding|your|system|original|existing|other|these"
        r"|those|all)\s+(\w+\s+)?(instructions?|prompts?|rules|guidelines|directions"
        r"|directives|context|guardrails|polic(y|ies))\b|\b(ignore|disregard|forget)\s+"
        r"(everything|all)\s+(above|before|else)\b", _I)),
    ("addresses the agent", re.compile(
        r"\b(you|your|assistants?|agents?|ai|llms?|models?|claude|gpt|copilot|opencode)\b"
        r"[^.\n]{0,30}?\b(must|should|shall|will|need to|needs to|have to|has to|are to"
        r"|is to|are required|is required|are instructed|is instructed|may now|can now)\b",
        _I)),
    ("addresses the agent", re.compile(
        r"\b(as an? (ai|assistant|agent|language model)|system prompt|developer message"
        r"|jailbreak|new instructions|hidden instructions?|prompt injection)\b", _I)),
    ("sets a rule", re.compile(
        r"(^|[.!?:;]\s+|\n)\s*(always|never|must|do not|don't|from now on|going forward"
        r"|in every (project|session|repo)|before (any|every|each) )\b", _I)),
    ("urgent framing", re.compile(
        r"(^|\n)\s*[\[(*_]*\s*(important|attention|urgent|warning|note to|notice|system"
        r"|admin(istrator)?|instructions?|reminder|critical|override)\s*[\])*_]*\s*[:!]", _I)),
    ("urgent framing", re.compile(
        r"\b(note|message|instructions?|reminder|memo)\s+(to|for)\s+(the\s+|all\s+|any\s+)?"
        r"(ai|assistants?|agents?|llms?|models?|bots?|claude|gpt|copilot)\b", _I)),
    ("markup", re.compile(
        r"</?\s*(system|assistant|user|human|instructions?|memory|memories|context|tool"
        r"|prompt|im_start|im_end|s|inst)\b[^>]*>|<\|[\w-]+\|>|\[/?(INST|SYS)\]"
        r"|<<\s*/?SYS\s*>>|<!--|-->", _I)),
    ("role prefix", re.compile(
        r"(^|\n)\s*(system|assistant|user|human|developer|tool)\s*:\s", _I)),
    ("fake heading", re.compile(
        r"(^|\n)\s*(#{1,6}\s|={3,}|-{3,}|\*{3,})|\b(end|begin|start) of (the )?(memory|memories"
        r"|notes|context|instructions|system|prompt)\b", _I)),
    ("hidden command", re.compile(
        r"\b(curl|wget|fetch|iwr|invoke-webrequest)\b[^\n]{0,120}\|\s*(sudo\s+)?(ba|z|k|fi)?sh\b"
        r"|\brm\s+-[a-z]*r[a-z]*f|\bbase64\s+(-d|--decode)|\bnc\s+-[a-z]*e|\beval\s*[($`]"
        r"|\bchmod\s+\+x\b|/dev/tcp/|\bpython3?\s+-c\b", _I)),
    ("exfiltration", re.compile(
        r"\b(send|post|upload|exfiltrate|forward|email|paste|leak|share)\b[^.\n]{0,50}?"
        r"\b(secrets?|tokens?|keys?|passwords?|credentials?|env(ironment)?|\.env|ssh)\b"
        r"|\bexfiltrat|\bdo not (tell|inform|mention|show|reveal)\b|\bwithout (telling|asking"
        r"|informing)\b", _I)),
)
#: Words that no file name, command or script name needs and every injection in a name
#: uses (a name's parts, split at ``-``, ``_``, ``.``, ``/`` and case changes).
_NAME_WORDS = frozenset({
    "ignore", "ignoring", "disregard", "instruction", "instructions", "assistant", "always",
    "never", "must", "override", "exfiltrate", "jailbreak", "curl", "wget",
})
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_NAME_SHAPE = re.compile(r"^[\w@%+=:,./~-]+$")


#: Characters that show nothing but are not plain space: soft hyphen, zero-width and
#: bidirectional controls, tag characters (the set :mod:`opencode_memoryd.redaction.unicode`
#: strips), variation selectors, the combining grapheme joiner, the Mongolian vowel
#: separator and the Hangul fillers; any other format character (category ``Cf``) too.
_HIDDEN = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\u3164\ufeff\uffa0\ufe00-\ufe0f\U000e0000-\U000e007f"
    "\U000e0100-\U000e01ef]")


def hidden_characters(text: str) -> bool:
    """Whether ``text`` holds a character a reader does not see (:data:`_HIDDEN`, or any
    other format character)."""
    if text.isascii():
        return False
    return bool(_HIDDEN.search(text) or any(unicodedata.category(c) == "Cf" for c in text))


def fold(text: str) -> str:
    """``text`` with invisible characters stripped and NFKC-folded: what the gate reads."""
    return unicodedata.normalize("NFKC", _HIDDEN.sub("", text))


def instruction_reason(text: str) -> str | None:
    """Why ``text`` reads as an instruction to the agent or a framing escape, or ``None``.

    Reasons are fixed strings (``override``, ``addresses the agent``, ``sets a rule``,
    ``urgent framing``, ``markup``, ``role prefix``, ``fake heading``, ``hidden command``,
    ``exfiltration``, ``invisible characters``), never text of ``text``. Text that holds
    tag characters or other invisible format characters is refused as a whole: nothing
    generated needs them, and they are how instructions hide (ASCII smuggling).
    """
    if hidden_characters(text):
        return "invisible characters"
    folded = fold(text)
    for reason, pattern in _PATTERNS:
        if pattern.search(folded):
            return reason
    return None


def safe_name(name: str, *, max_chars: int = 100) -> bool:
    """Whether ``name`` (a file path, a command word, a script or project name taken from
    a tool call or a manifest) may be shown as it is: at most ``max_chars`` characters of
    word characters and ``@ % + = : , . / ~ -`` only (no space, quote, backtick, bracket
    or markup), no part an injection needs (:data:`_NAME_WORDS`), and no instruction in
    its parts read as words (:func:`instruction_reason`)."""
    if not name or len(name) > max_chars or not _NAME_SHAPE.match(name) or not name.isprintable():
        return False
    words = [w.lower() for w in re.split(r"[\W_]+", _CAMEL.sub(" ", name)) if w]
    if set(words) & _NAME_WORDS:
        return False
    return instruction_reason(" ".join(words)) is None
