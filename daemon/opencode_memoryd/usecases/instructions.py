"""Whether text the agent writes reads as an instruction aimed at the agent, or as an escape
from the context block (:func:`instruction_like`).

A heuristic with named reasons, applied to the agent's own notes only (never to the user's
words): a refused note costs the agent one message telling it to ask the user, a missed one
reaches the block as a quoted, marked, unconfirmed note. The text is checked in several
foldings, so that a disguise does not hide a pattern:

* format and invisible characters removed, white space folded (:func:`~.fence.clean`), then
  NFKC (fullwidth U+FF1C is ``<``);
* look-alike letters of Cyrillic and Greek mapped to Latin ones (``ignore`` with a Cyrillic
  U+043E) and digits inside words read as letters (``1gn0re``);
* letters spelled apart joined (``i g n o r e``);
* base64 runs decoded (a note carrying ``aWdub3JlIGFsbC...``) and checked again.

The patterns cover overriding earlier instructions in English and eleven other languages,
claiming the user's consent or hiding from the user, piping downloads or decoded text into a
shell, running code fetched from the network, prompt tags and our marker, sending secrets
or credential files away, remote images with a query, HTML images and links whose address
carries data (an exfiltration channel when a client renders or follows them), and
destructive commands.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

from opencode_memoryd.usecases.fence import clean

_SH = r"(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b"
_SECRETS = (r"(?:secrets?|tokens?|api[ _-]?keys?|keys?|credentials?|passwords?|\.env\b|"
            r"ssh\b|private[ _-]keys?)")
_SECRET_FILES = (r"(?:\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.netrc\b|"
                 r"/etc/shadow\b|\.git-credentials\b|\.docker/config\.json|\.kube/config\b|"
                 r"\.npmrc\b|\.pypirc\b)")
_CLAUSE = r"\b(?:when|if|after|before|once|whenever|with|using|via)\b"

# Each pattern: a reason and a regular expression, matched case-insensitively on every
# folding of the text.
_PATTERNS: tuple[tuple[str, str], ...] = (
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
_COMPILED = tuple((why, re.compile(rx, re.IGNORECASE | re.DOTALL)) for why, rx in _PATTERNS)

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


def _decoded(text: str) -> list[str]:
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


def foldings(text: str) -> list[str]:
    """The forms of ``text`` the patterns are matched on (see the module docstring): the
    cleaned NFKC text, its look-alike and leetspeak skeleton, and that with letters spelled
    apart joined."""
    folded = unicodedata.normalize("NFKC", clean(text))
    skeleton = _LEET.sub(lambda m: _LEET_LETTERS[m.group(0)], folded.translate(_LOOKALIKES))
    return [folded, skeleton, _SPELLED_APART.sub("", skeleton)]


def instruction_like(text: str, _depth: int = 0) -> str | None:
    """Why ``text`` reads as an instruction aimed at the agent or as an escape from the
    context block (e.g. ``overrides instructions``, ``pipes a download into a shell``,
    ``links to an address that carries data``; ``... (base64)`` when found in a decoded
    run), or ``None`` when it reads as a plain note."""
    for form in foldings(text):
        for why, rx in _COMPILED:
            if rx.search(form):
                return why
    if _depth < MAX_DECODE_DEPTH:
        for plain in _decoded(unicodedata.normalize("NFKC", clean(text))):
            inner = instruction_like(plain, _depth + 1)
            if inner is not None:
                return inner if inner.endswith("(base64)") else f"{inner} (base64)"
    return None
