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

One catalogue serves both gates on text that is not the user's: :func:`instruction_reason`
(generated text, names, the extraction gate's foreign-text check) tries its own patterns and
then the agent-note patterns (:data:`AGENT_PATTERNS`: overrides in twelve languages, consent
claims, download pipes, data-carrying links, destructive commands), on the text and on its
disguise foldings (:func:`skeletons`: look-alike letters, leetspeak, letters spelled apart)
and on what its base64 runs decode to; ``usecases.instructions.instruction_like`` applies
the agent-note patterns alone to the agent's own notes, which may set rules.
"""

from __future__ import annotations

import base64
import binascii
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
    return _reason(text, 0)


#: How the generated-text gate names what an agent-note pattern finds: an override in any
#: language is an ``override``, talk to the model ``addresses the agent``, our marker or a
#: prompt tag ``markup``; the other reasons keep their names.
_AS_GENERATED = {"overrides instructions": "override",
                 "addresses the model": "addresses the agent",
                 "imitates a prompt tag or marker": "markup"}


def _ordered() -> tuple[tuple[str, re.Pattern[str]], ...]:
    # overrides first (the generated gate's, then those of every language), then the
    # rest of the generated gate's, then the rest of the agent-note patterns
    agent = tuple((_AS_GENERATED.get(why, why), rx) for why, rx in AGENT_PATTERNS)
    overrides = tuple(p for p in agent if p[0] == "override")
    return (_PATTERNS[0], *overrides, *_PATTERNS[1:],
            *(p for p in agent if p[0] != "override"))


def _reason(text: str, depth: int) -> str | None:
    forms = skeletons(fold(text))
    for reason, pattern in _ORDERED:
        if any(pattern.search(form) for form in forms):
            return reason
    if depth < MAX_DECODE_DEPTH:
        for plain in decoded_runs(forms[0]):
            if (inner := _reason(plain, depth + 1)) is not None:
                return inner
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


# --- The agent-note patterns and the disguise foldings ----------------------------------
#
# The agent's own notes (the MCP tool, the CLI inside OpenCode) may set rules ("always run
# the tests") but must not override instructions, claim consent, pipe downloads into a
# shell, send data away, imitate our marker or carry data in links. Each pattern: a reason
# and a regular expression, matched case-insensitively on every folding of the text
# (:func:`skeletons`). ``usecases.instructions`` applies them to the agent's notes;
# :func:`instruction_reason` applies them too, after its own, to everything not the user's.

_SH = r"(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b"
_SECRETS = (r"(?:secrets?|tokens?|api[ _-]?keys?|keys?|credentials?|passwords?|\.env\b|"
            r"ssh\b|private[ _-]keys?)")
_SECRET_FILES = (r"(?:\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.netrc\b|"
                 r"/etc/shadow\b|\.git-credentials\b|\.docker/config\.json|\.kube/config\b|"
                 r"\.npmrc\b|\.pypirc\b)")
_CLAUSE = r"\b(?:when|if|after|before|once|whenever|with|using|via)\b"

AGENT_PATTERNS_SOURCE: tuple[tuple[str, str], ...] = (
    ("overrides instructions",
     r"\b(?:ignore|disregard|forget|override)\b.{0,30}\b(?:previous|prior|above|earlier|"
     r"preceding|system|your|original)\b.{0,20}\b(?:instructions?|rules|messages?|"
     r"prompts?|guidelines|directives)\b|\b(?:ignore|disregard|forget|override)\s+"
     r"(?:all|any)\s+(?:instructions?|prompts?|guidelines|directives)\b"),
    # German, French, Spanish, Italian, Portuguese, Dutch, Polish, Turkish, Russian,
    # Chinese, Japanese, Korean: "ignore/forget ... instructions"
    ("overrides instructions",
     r"\b(?:ignorier\w*|vergiss|vergesst|missachte\w*)\b.{0,60}\b(?:anweisungen|"
     r"instruktionen|befehle|vorgaben)\b"
     r"|\b(?:ignore[rz]?|oublie[rz]?)\b.{0,60}\b(?:instructions|consignes|directives)\b"
     r"|\b(?:ignora\w*|olvida\w*|descarta\w*)\b.{0,60}\binstrucciones\b"
     r"|\b(?:ignora\w*|dimentica\w*)\b.{0,60}\b(?:istruzioni|direttive)\b"
     r"|\b(?:ignor[ae]\w*|esque[cç]a\w*)\b.{0,60}\b(?:instru[cç](?:õ|o)es|diretrizes)\b"
     r"|\b(?:negeer|vergeet)\b.{0,60}\b(?:instructies|aanwijzingen)\b"
     r"|\b(?:zignoruj|ignoruj|zapomnij)\b.{0,60}\b(?:instrukcj\w*|polece\w*)"
     r"|\btalimat\w*.{0,60}\b(?:yoksay\w*|g[öo]rmezden\s+gel\w*|unut\w*)"
     r"|(?:игнорир\w*|проигнорир\w*|забудь\w*|забыть)\b.{0,60}(?:инструкци|указани|"
     r"правил|команд)"
     r"|(?:忽略|无视|無視|忘记|忘記|不要理会|不要理會)[^。\n]{0,20}(?:指令|指示|说明|說明|规则|"
     r"規則|提示)"
     r"|(?:指示|命令|ルール|プロンプト)[^。\n]{0,20}(?:無視|忘れ)"
     r"|(?:지시|명령|규칙|프롬프트)[^.\n]{0,20}(?:무시|잊)"),
    ("addresses the model",
     r"\b(?:you are now (?:a|an|the|in|my|free|unrestricted|jailbroken|no longer)|"
     r"new instructions?\s*:|(?:reveal|print|show|ignore|override|"
     r"change|replace)\b.{0,20}\bsystem prompt|developer message|jailbreak)\b"
     r"|\bact as\b.{0,30}\b(?:admin\w*|root|owner|maintainer|developer|system)\b"),
    ("claims the user's consent or hides from the user",
     r"\b(?:pretend|act as if|assume)\b.{0,40}\b(?:user|they|i)\b.{0,30}\b(?:approved|"
     r"allowed|authori[sz]ed|agreed|consented)\b"
     r"|\bthe user (?:has )?(?:already )?(?:pre-?)?(?:approved|authori[sz]ed|consented)\b"
     r"|\b(?:do not|don't|never)\s+(?:tell|inform|mention|show|reveal|notify|ask)\b.{0,30}"
     r"\b(?:the\s+)?user\b|\bwithout\s+(?:telling|asking|informing|notifying)\s+the\s+user\b"),
    ("pipes a download into a shell",
     rf"\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n]{{0,200}}\|\s*{_SH}|\b(?:curl|wget)\b"
     r"[^\n]{0,200}\|\s*(?:python3?|node|perl|ruby|iex|powershell)\b"),
    ("pipes decoded text into a shell",
     rf"\b(?:base64|base32|xxd|openssl|rev)\b[^\n]{{0,80}}\|\s*(?:{_SH}|python3?\b|eval\b)"),
    ("runs a remote script",
     r"\b(?:bash|sh)\s+<\s*\(\s*(?:curl|wget)\b"
     rf"|\b(?:curl|wget)\b[^\n]{{0,200}}(?:&&|;|\bthen\b)\s*{_SH}\s+\S"
     r"|\b(?:exec|eval)\s*\(.{0,120}\b(?:urlopen|requests\.get|fetch|http\.get|urllib)"
     r"|\biex\b.{0,40}\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|downloadstring|"
     r"net\.webclient)\b"
     r"|\b(?:run|execute|source)\b[^\n]{0,60}\bhttps?://\S+\.(?:sh|ps1|py|bash)\b"
     r"|\b(?:download|fetch)\w*\b[^\n]{0,80}https?://[^\n]{0,80}\b(?:run|execute|"
     r"source)\b"),
    ("imitates a prompt tag or marker",
     r"</?\s*(?:system|assistant|user|instructions?|tool|developer|memory)\b[^>]*>|<!--|-->"),
    ("sends data away",
     rf"\b(?:send|post|upload|exfiltrate|email|leak)\b(?:(?!{_CLAUSE}).){{0,60}}?\b{_SECRETS}"
     rf"|(?<!\bnever )(?<!\bnot )(?<!n't )\b(?:include|print|cat|copy|paste|commit|send|post|"
     rf"upload|attach|echo|dump|share)\b.{{0,60}}{_SECRET_FILES}"),
    ("links to an address that carries data",
     r"!\[[^\]\n]{0,200}\]\(\s*<?(?:https?:)?//[^)\s]{0,300}[?#]"
     r"|<img\b[^>]{0,200}\bsrc\s*=\s*[\"']?(?:https?:)?//"
     r"|\]\(\s*<?https?://[^\s)]{0,300}[?&#][^\s)=]{0,100}=\s*(?:\{|\$\{?\w|<|%7b|%24)"
     r"|https?://[^\s)]{0,300}[?&#][^\s)=]{0,100}=\s*\$\{?\w*(?:token|secret|key|password|"
     r"pass|pwd|credential)"),
    ("runs a destructive command",
     r"\brm\s+-(?:rf|fr|r\s+-f)\s+(?:/|~|\$home)(?:\s|$|\*)|--no-preserve-root\b"
     r"|\bmkfs(?:\.\w+)?\s+/dev/|\bdd\b[^\n]{0,60}\bof=/dev/(?:sd|nvme|hd|disk)"
     r"|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
)
#: The agent-note patterns, compiled: ``(reason, pattern)``.
AGENT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (why, re.compile(rx, re.IGNORECASE | re.DOTALL)) for why, rx in AGENT_PATTERNS_SOURCE)

# Cyrillic and Greek letters drawn like Latin ones (Unicode's confusables.txt, the
# single-letter entries of those scripts), and digits and signs read as letters inside a
# word (leetspeak).
_LOOKALIKES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb"
    "\u04cf\u051b\u051d\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421"
    "\u0422\u0425\u0406\u0408\u0405\u03bf\u03b1\u03b5\u03b9\u03bd\u03c4\u03ba"
    "\u03c5\u03c1\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f"
    "\u03a1\u03a4\u03a5\u03a7",
    "aeopcyxijsdhlqwABEKMHOPCTXIJS" "oaeivtkupABEZHIKMNOPTYX")
_LEET = re.compile(r"(?<=[a-z])[013457@$](?=[a-z0-9@$])|(?<=[a-z0-9@$])[013457@$](?=[a-z])"
                   r"|\b[013457@$](?=[a-z]{2})", re.IGNORECASE)
_LEET_LETTERS = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                 "$": "s"}
_SPELLED_APART = re.compile(r"(?<=\b\w) (?=\w\b)")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
#: The most nested base64 layers decoded.
MAX_DECODE_DEPTH = 2


def decoded_runs(text: str) -> list[str]:
    """The printable UTF-8 texts that base64 runs of ``text`` decode to."""
    found = []
    for run in _BASE64.findall(text):
        padded = run + "=" * (-len(run) % 4)
        try:
            raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
            plain = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if plain and sum(ch.isprintable() or ch.isspace() for ch in plain) >= 0.95 * len(plain):
            found.append(plain)
    return found


def skeletons(folded: str) -> list[str]:
    """The forms of an already cleaned, NFKC-folded text that the patterns are matched on:
    the text itself, its look-alike and leetspeak skeleton (Cyrillic and Greek letters drawn
    like Latin ones read as those, digits inside words as letters), and that skeleton with
    letters spelled apart joined (``i g n o r e``)."""
    skeleton = _LEET.sub(lambda m: _LEET_LETTERS[m.group(0)], folded.translate(_LOOKALIKES))
    return [folded, skeleton, _SPELLED_APART.sub("", skeleton)]


_ORDERED = _ordered()
