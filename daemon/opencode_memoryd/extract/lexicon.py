"""The words and phrases of the rules grammar (:mod:`opencode_memoryd.extract.grammar`).

Only data and the regular expressions built from it: which phrases are triggers, which
words may stand before a trigger (filler, request frames, clause boundaries), what may
follow an anaphoric trigger, the negations, the temporary markers, the phrases that give
a directive user scope, and the verbs that open an imperative. Every pattern is matched
case-insensitively on the masked text of a sentence (:mod:`opencode_memoryd.extract.segment`).
"""

from __future__ import annotations

import re


def _alt(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.VERBOSE)


# --- triggers -----------------------------------------------------------------------------

#: "remember" and its common misspellings; "memorize".
REMEMBER = _alt(
    "remember", "remeber", "rember", "remembr", "rememeber", "remmember", "remmeber",
    "rememebr", "remenber", "rmember", "remmeber", "rememer", "remembe", "memori[sz]e",
)
_PRONOUN_OBJ = r"(?:this|that|it|these|those|them|both|all\s+(?:of\s+)?(?:this|that|these|those))"
_LATER = (r"(?:the\s+)?(?:future\s+(?:sessions?|reference|work|you|self|me|agents?|chats?)\b"
          r"|future|futur|later|next\s+time)")
_WORD_START = r"(?<![\w./\\@#$'-])"
_WORD_END = r"(?![\w-]|\.\w|\(|/)"

#: Each trigger kind, as a named alternative of :data:`TRIGGER`.
_TRIGGERS = {
    "dontforget": r"(?:do\s*n[o']?t|dont|never|do\s+not)\s+(?:ever\s+)?forget",
    "keepmind": r"(?:keep|bear|have)\s+in\s+(?:mind|mnd)",
    "keepobj": r"(?:keep|bear)\s+(?P<obj>" + _PRONOUN_OBJ + r"(?:\s+one)?|[^.,;:!?\n]{1,60}?)"
               r"\s+in\s+mind",
    "note": r"""(?:make|made)\s+(?:a\s+)?(?:quick\s+|mental\s+|little\s+|short\s+)?note(?:\s+of)?
              | take\s+(?:a\s+)?note(?:\s+of)?
              | (?:note|jot|write)\s+""" + _PRONOUN_OBJ + r"""\s+down | (?:note|jot|write)\s+down
              | note\s+""" + _PRONOUN_OBJ + r"""(?=\s*(?:[.!,;)]|$|\s+(?:for|going|from|please|too
                 |as\s+well)\b))""",
    "store": r"""(?:save|store|add|put|keep|commit|write|record)\s+(?:""" + _PRONOUN_OBJ
             + r"""\s+|the\s+following\s+)?(?:to|in|into)\s+(?:your\s+|the\s+)?(?:long[- ]term\s+)?
                 (?:memory|memories|notes)
              | (?:save|store|keep)\s+""" + _PRONOUN_OBJ + r"""\s+for\s+""" + _LATER + r"""
              | (?:update|add\s+to)\s+your\s+(?:memory|memories|notes)""",
    "frame": r"""(?:(?:one\s+(?:more|last)|another|an?|the|some|a\s+few|few|two|three)\s+)?
                 (?:(?:important|key|crucial|useful|final|last|main|small|big)\s+)?
                 (?:thing|point|detail|fact|rule|caveat|gotcha)s?\s+(?:to|worth|for\s+you\s+to)\s+
                 (?:remember(?:ing)?|keep(?:ing)?\s+in\s+mind|bear(?:ing)?\s+in\s+mind|note|noting)
              | something\s+(?:to|worth|for\s+you\s+to)\s+(?:remember(?:ing)?
                 |keep(?:ing)?\s+in\s+mind|bear(?:ing)?\s+in\s+mind|note)
              | worth\s+(?:remembering|keeping\s+in\s+mind|noting\s+for\s+""" + _LATER + r""")
              | (?:important|good|useful|crucial|essential|key)\s+to\s+(?:remember|keep\s+in\s+mind
                 |bear\s+in\s+mind)
              | (?:a\s+)?(?:(?:quick|short|small|little|side|friendly)\s+)?(?:note|reminder|memo)
                 \s+(?:for|to)\s+(?:""" + _LATER
             + r"""|yourself|self|myself)""",
    "announce": r"""(?:(?:just|a|one|another|quick|small|little|friendly|short|general|useful
                 |important|big|key|main)\s+){0,3}
                 (?:heads[\s-]*ups?|psa|fyi|f\.y\.i\.?|for\s+your\s+information|so\s+you\s+know
                 |(?:pro[\s-]+)?tips?|(?:fun\s+)?facts?|(?:something|things?)\s+(?:to|worth)\s+know(?:ing)?
                 |(?:good|worth|useful|nice|important|helpful|handy)\s+(?:to\s+know|knowing|noting)
                 |mental\s+notes?|takeaways?|important(?=\s*[:\u2014]|\s+-\s)|very\s+important(?=\s*:)
                 |rules?\s+of\s+thumb(?:\s+here)?
                 |note\s+to\s+(?:my|your)?(?:future\s+)?self|note\s+for\s+(?:the\s+)?(?:next\s+
                 (?:session|one|agent)|future\s+(?:you|me|agents?|sessions?)))
                 (?P<ann_later>\s+for\s+(?:the\s+)?(?:later|futur?e?(?:\s+(?:sessions?|you|self|me
                 |reference|work|agents?|chats?))?|next\s+(?:time|session|sessions|chat|agent)
                 |(?:all\s+)?future\s+(?:sessions|chats|work)|whoever\s+works\s+on\s+this\s+next))?""",
    "things": r"""(?:(?:a\s+couple\s+of|a\s+few|some|two|three|several|few)\s+)?(?:thing|point|note
                 |rule|tip)s?\s+for\s+(?:the\s+)?(?:future|later|next\s+time|future\s+sessions)""",
    "forref": r"for\s+future\s+reference|future\s+reference",
    "forlater": r"""for\s+(?:the\s+future|futur|later|next\s+time|future\s+sessions|the\s+record
                 |the\s+next\s+(?:session|sessions|chat|agent))""",
    "rule": r"""(?:new|house|standing|ground|golden|permanent|team)\s+(?:rule|instruction|policy
              |convention)s?
              | (?:friendly\s+)?reminder""",
    "future": r"""from\s+now\s+on(?:wards?)?|f[ro]+m\s+now\s+on|fron\s+now\s+on
              | (?:going|goin|moving)\s+forward(?!\s+with\b)|henceforth|hence\s+forth
              | from\s+here\s+on(?:\s+out)?
              | from\s+this\s+point\s+(?:on(?:wards?)?|forward)|starting\s+(?:now|today)
              | from\s+today\s+on(?:wards?)?|(?:in|for)\s+all\s+future\s+\w+
              | (?:in|for)\s+(?:all\s+)?(?:the\s+)?future\s+(?:sessions?|conversations?|chats?
                 |tasks?|work|changes|prs?|pull\s+requests|commits)""",
    "later": r"in\s+(?:the\s+)?future|(?:the\s+)?next\s+time",
    "mem": REMEMBER,
}
#: Every trigger phrase; the name of the matching group is the trigger's kind.
TRIGGER = _rx(_WORD_START + "(?:" + "|".join(
    f"(?P<{kind}>{pattern})" for kind, pattern in _TRIGGERS.items()) + ")" + _WORD_END)

#: The trigger kinds, in the order they are tried.
KINDS = tuple(_TRIGGERS)
#: Trigger kinds that are adverbials (the directive is the rest of the clause).
ADVERBIAL = frozenset({"future", "later"})
#: Trigger kinds whose words alone never make a directive without a colon or comma after.
NEEDS_PUNCT = frozenset({"forlater", "rule", "things", "announce"})

# --- what may stand before a trigger ------------------------------------------------------

_FILLER = _alt(
    r"plea+se+", "pl[sz]+", "plse", "pleas", "kindly", "also", "and", "but", "so", "oh+",
    "ah+", "ok(?:ay)?", "k", "hey", "hi", "hello", "btw", r"by\s+the\s+way", "just", "now",
    "then", "again", "always", r"one\s+(?:more|last)\s+thing", r"(?:last|another)\s+thing",
    "finally", "lastly", "first(?:ly)?", "second(?:ly)?", "third(?:ly)?", "well", "alright",
    r"all\s+right", "right", "yes", "yeah", "yep", "sure", "great", "cool", "nice",
    "thanks", r"thank\s+you", "thx", "perfect", "good", "fine", "hmm+", "anyways?", "plus",
    "additionally", "moreover", r"in\s+addition", "besides", "actually", "basically",
    "honestly", "seriously", r"(?:very\s+)?important(?:ly)?", "crucial(?:ly)?", "note",
    "nb", "ps", "fyi", "psa", r"heads[\s-]*up", r"(?:quick|side)\s+note", "though", "however",
    "do", r"for\s+the\s+record", r"as\s+a\s+reminder", "reminder", "too", r"as\s+well",
    "basically", "remember", r"here'?s", r"here\s+is", "or", "yo", "oops",
    r"(?:it|that|this|which)(?:'s|\s+is|\s+was)", r"and\s+that'?s", "because", "since",
    r"from\s+now\s+on", r"going\s+forward", r"moving\s+forward", r"for\s+future\s+reference",
    r"note\s+for\s+(?:the\s+)?future", r"in\s+(?:the\s+)?future", r"next\s+time",
)
_FRAME = _alt(
    r"(?:i\s+)?(?:want|need|would\s+like|wish|expect)\s+(?:you\s+)?to",
    r"i'?d\s+(?:like|love|prefer)\s+(?:you\s+)?to",
    r"(?:you|u)\s+(?:should|must|need\s+to|have\s+to|'?ll\s+(?:need|have|want)\s+to"
    r"|will\s+(?:need|have|want)\s+to|want\s+to|ought\s+to|gotta|got\s+to)",
    r"(?:can|could|would|will)\s+you(?:\s+(?:please|kindly|also|pls|plz))*",
    r"make\s+sure\s+(?:to|you|that\s+you)", r"be\s+sure\s+to", r"try\s+(?:to|and)",
    r"(?:it'?s|it\s+is|it'?d\s+be|it\s+would\s+be)\s+(?:important|good|useful|helpful"
    r"|crucial|essential|worth|wise|best)\s+to",
    r"let'?s", r"let\s+us", r"we\s+(?:should|must|need\s+to|have\s+to|all\s+need\s+to)",
    r"(?:just\s+)?so\s+(?:that\s+)?you", r"i'?d\s+appreciate\s+it\s+if\s+you(?:'?d|\s+would)?",
    r"it\s+would\s+be\s+(?:great|nice|good|helpful)\s+if\s+you(?:'?d|\s+could|\s+would)?",
)
#: Characters that may stand between filler words before a trigger.
TAIL_PUNCT = frozenset(" \t\n,;:!.()[]>=-\u2014\u2013")
#: One filler word or request frame that ends where the search ends (see
#: :func:`opencode_memoryd.extract.grammar.tail_start`).
TAIL_PHRASE = _rx(r"(?<![\w'])(?:" + _FILLER + "|" + _FRAME + r")$")
#: A clause boundary inside a trigger's left context.
BOUNDARY = _rx(r"[,;:!.()\[\]\n\u2014\u2013]|\s-+>?\s|\b(?:and|but|so|also|then|plus|or|though"
               r"|however|because|since)\b")
#: A request frame that makes a question a request ("Can you remember that …?").
QUESTION_REQUEST = _rx(r"\b(?:can|could|would|will)\s+you\b")
#: A left context that reports somebody else's words ("as I said," recalls the user's own).
REPORTED = _rx(r"""(?<!like\si\s)(?<!as\si\s)\b(?:said|says|say|wrote|writes|replied|answered
               |commented|posted|told\s+me|tells\s+me|put\s+it|quote|quoting|reads|states|stated)\s*[:,]\s*$""")
#: A left context that is a subordinate clause kept in the fact ("When you deploy, …").
SUBORDINATE = _rx(r"^\s*(?:when|whenever|if|unless|before|after|while|until|till|once"
                  r"|as\s+long\s+as|every\s+time|each\s+time|during|for\s+(?:new|every|each|any)\b)")

# --- what may follow an anaphoric trigger -------------------------------------------------

_ANAPHOR = (r"(?P<pro>" + _PRONOUN_OBJ + r"(?:\s+one)?|that\s+one|this\s+one|the\s+above|all\s+that"
            r"|both(?:\s+of\s+(?:these|those|them))?|what\s+i\s+(?:just\s+)?said"
            r"|(?:this|that|these|those)\s+(?:decision|rule|one|point|fact|thing|detail|convention"
            r"|constraint|requirement|preference|info|information|part|setup|bit|note|tip)s?)")
_AFTER = _alt(
    r"for\s+" + _LATER, r"going\s+forward", r"moving\s+forward", r"from\s+now\s+on",
    r"in\s+(?:the\s+)?future(?:\s+sessions)?", r"(?:the\s+)?next\s+time", "too", r"as\s+well",
    "also", r"plea+se+", "pls", "plz", "thanks", r"thank\s+you", "ok(?:ay)?", "alright",
    "always", r"for\s+good", "forever", r"in\s+mind", r"(?:to|in)\s+(?:your\s+)?memory",
    r"from\s+here\s+on(?:\s+out)?", "then", "now", "ok\\?",
)
#: The rest of a sentence after an anaphoric trigger: a pronoun, then nothing that says more.
ANAPHORIC_REST = _rx(r"^\s*+(?:" + _ANAPHOR + r"\b)?(?>(?:" + _AFTER
                     + r")\b|[\s,;.!?)\]\u2014\u2013-])*+$")
#: A pronoun (or "that decision") after a trigger, then a comma and a remark about it.
ANAPHOR_REMARK = _rx(r"^\s*" + _ANAPHOR + r"(?:\s*(?:" + _AFTER + r")\b)*\s*[,;\u2014\u2013-]")
#: Pronouns that point at more than one sentence.
PLURAL = _rx(r"^(?:these|those|them|both|all)")

# --- negations and temporary directives ---------------------------------------------------

#: A negation that takes back what was just said ("forget that", "scratch that").
RETRACT = _rx(r"""^(?:(?:""" + _FILLER + r""")\b[\s,;:!.]*)*(?:
      (?:please\s+)?(?:forget|disregard|ignore|scratch|drop|delete|erase|strike)\s+(?:about\s+)?
        (?:that|this|it|all\s+that|what\s+i\s+(?:just\s+)?said|the\s+(?:last|previous)|my\s+last)
    | never\s*mind | no\s+need\s+to\s+(?:remember|keep|note|save|store|memori[sz]e)
    | (?:you\s+)?(?:do\s*n[o']?t|dont|needn'?t|do\s+not)\s+(?:(?:need|have)\s+to\s+)?
        (?:remember|memori[sz]e|note|save|store|keep)\s+(?:that|this|it)
    | you\s+can\s+forget
    | not\s+(?:something|worth|needed|necessary)
    | there'?s\s+no\s+need
    )""")
#: What marks a "remember to X" as a task for now ("… and tell me what you find").
ONE_OFF = _rx(r"""\b(?:tell\s+me|let\s+me\s+know|report\s+back|show\s+me|what\s+you\s+find
    |when\s+you'?re\s+done|once\s+you'?re\s+done|once\s+done|when\s+done|afterwards|right\s+now
    |today|tonight|this\s+time|for\s+this\s+(?:pr|task|change|commit|ticket|one)|in\s+this\s+pr
    |before\s+you\s+finish|at\s+the\s+end\s+of\s+this)\b""")
#: A "remember to X" whose X acts on something at hand ("test this", "commit it"): a task.
DEICTIC_OBJECT = _rx(r"""^\s*[\w-]+\s+(?:it|this|that|them|these|those)\b(?!\s*(?:repo|repository
    |project|codebase|service|app|rule|way|style|convention|pattern)\b)""")
#: First-person promises ("I'll remember that"), never the user's directive.
PROMISE = _rx(r"^\s*(?:(?:ok(?:ay)?|sure|got\s+it|noted|understood|yes|yeah|thanks)\W+)*"
              r"(?:i'?ll|i\s+will|i'?m\s+going\s+to|i\s+am\s+going\s+to|i\s+shall|i'?ve\s+(?:saved|noted"
              r"|made|stored|added)|(?:we'?ll|we\s+will)\s+(?:keep|remember|note|bear|make\s+a\s+note"
              r"|try)|will\s+do)\b")

# --- user scope ---------------------------------------------------------------------------

_PLACES = (r"(?:repositories|repository|projects?|repos?|codebases?|code\s*bases?|workspaces?"
           r"|apps?|services|work|stuff)\b")
_NOT_JUST_HERE = (r"(?:\s*,?\s*(?:and\s+|but\s+)?not\s+(?:just|only)\s+(?:for\s+|in\s+)?"
                  r"(?:this\s+(?:one|repo|repository|project|codebase)|here)(?:\s+but)?)")
_SCOPE_FRAME = (r"(?:(?:this|that|it)(?P<frame>\s+(?:applies|goes|holds|counts|is\s+true|is)"
                r"|'s\s+true|'s)?\s+|same\s+(?:goes\s+)?|applies\s+)?")
_STRONG_SCOPE = _alt(
    r"(?:for|in|across|on|throughout|to|of)\s+(?:all|every|each|any)(?:\s+(?:one|single))?\s+"
    r"(?:of\s+)?(?:my|our|the|your)?\s*(?:other\s+|future\s+|own\s+|new\s+|[\w.+#-]+\s+)?"
    + _PLACES + r"(?:\s+(?:of\s+mine|(?:that\s+)?(?:i|we)(?:'m|'re|\s+am|\s+are)?\s+(?:work(?:ing)?"
    r"|touch(?:ing)?|own|have|maintain(?:ing)?|start|create|open|write|do|contribute\s+to)"
    r"(?:\s+(?:on|in|with))?(?=\s*(?:[,;:.!?)\u2014\u2013-]|$|and\b|that\b|to\b))))?",
    r"across\s+(?:all\s+(?:of\s+)?)?(?:my\s+|the\s+)?(?:projects|repositories|repos|codebases"
    r"|the\s+board)\b",
    r"(?:regardless\s+of|no\s+matter|irrespective\s+of)\s+(?:(?:the|which|what)\s+)?(?:project|repo"
    r"|repository|codebase)(?:\s+(?:we'?re|i'?m|you'?re|we\s+are|i\s+am)\s+(?:in|on|working\s+"
    r"(?:on|in)))?",
    r"(?:whatever|whichever|any)\s+(?:project|repo|repository|codebase)\s+(?:i'?m|we'?re|you'?re"
    r"|i\s+am)\s+(?:in|on|working\s+(?:on|in))",
    r"wherever\s+(?:i|we)\s+(?:work|am|go|code)",
    r"in\s+everything\s+(?:i|we)\s+(?:do|write|build)",
    r"not\s+(?:just|only)\s+(?:for\s+|in\s+)?(?:this\s+(?:one|repo|repository|project|codebase)"
    r"|here)",
    r"(?:(?:as|this\s+is)\s+)?(?:a\s+)?(?:global|user-wide|user[- ]level|personal)\s+(?:preference"
    r"|rule|setting|instruction|convention)",
)
#: A phrase that says a directive holds for all the user's projects, anywhere in a sentence.
STRONG_SCOPE = _rx(_SCOPE_FRAME + _STRONG_SCOPE + _NOT_JUST_HERE + "?")
#: "globally", "everywhere", "in general": user scope only where they stand apart (see
#: :func:`opencode_memoryd.extract.grammar.find_scope`).
WEAK_SCOPE = _rx(r"\b(?:globally|everywhere|in\s+general|generally|universally"
                 r"|generally\s+speaking)\b" + _NOT_JUST_HERE + "?")
#: Words before "globally"/"everywhere" that make it part of the fact ("install it globally").
WEAK_SCOPE_VETO_BEFORE = _rx(r"\b(?:install(?:ed)?|set|define[ds]?|export(?:ed)?|declare[ds]?"
                             r"|configure[ds]?|available|accessible|enabled?|disabled?|unique"
                             r"|registered|scoped|import(?:ed)?|used?|replace[ds]?|search(?:ed)?"
                             r"|appl(?:y|ied)|visible|cached|shared|known|work|works)\b"
                             r"(?:\s+[^\s,;:]+){0,3}\s*$")
#: Words after "everywhere"/"globally" that make it part of the fact ("everywhere in this repo").
WEAK_SCOPE_VETO_AFTER = _rx(r"^\s*(?:in|on|under|inside|within|across\s+the|else|except|but)\b")
#: Mentions of this project: a weak scope word near them means the project.
PROJECT_REF = _rx(r"\b(?:this|the\s+current|our)\s+(?:repo|repository|project|codebase|code\s*base"
                  r"|service|app|folder|file|module)\b|\bhere\b|\bin\s+this\b")

# --- directives and facts -----------------------------------------------------------------

#: Words that tie a statement to the moment: no standing fact ("… broke yesterday").
MOMENT = _rx(r"\b(?:yesterday|today|tonight|this\s+(?:morning|afternoon|week)|last\s+(?:night"
             r"|week)|right\s+now|currently|at\s+the\s+moment)\b")
#: Words that make a clause a rule (for a scope phrase standing in for a trigger).
RULE_MARKER = _rx(r"\b(?:always|never|do\s*n[o']?t|do\s+not|avoid|prefer|only|must|should|no"
                  r"|i\s+(?:use|prefer|like|want|work|write|sign|run))\b")
#: Auxiliaries, modals and copulas (and clitics: "'s", "'t"): a complement holding one is a
#: clause.
AUX = frozenset([
    "is", "are", "was", "were", "be", "been", "being", "am", "'s", "'re", "'ve", "'d", "'ll",
    "'m", "'t", "has", "have", "had", "do", "does", "did", "can", "cannot", "could", "will",
    "would", "should", "must", "may", "might", "shall", "need", "needs", "ought", "gets",
    "got", "goes", "went", "takes", "took", "makes", "made", "uses", "used", "runs", "ran",
    "lives", "lived", "dont", "doesnt", "isnt", "arent", "wont", "cant",
])
#: Subject pronouns: a complement opening with one is a clause.
SUBJECTS = frozenset(["i", "we", "you", "they", "he", "she", "it", "everything", "everyone",
                      "everybody", "nobody", "nothing", "u"])
#: Modals that make a declarative clause a rule ("tests should use factories").
MODAL = _rx(r"\b(?:must|mustn'?t|should|shouldn'?t|shall|need\s+to|needs\s+to|has\s+to|have\s+to"
            r"|cannot|can'?t|may\s+not|is\s+to|are\s+to|always|never|only|no\s+longer|'ll|will)\b")
#: Comparatives: a change described ("the file is smaller"), not a rule.
COMPARATIVE = _rx(r"\b(?:better|worse|more|less|fewer|smaller|larger|bigger|faster|slower|higher"
                  r"|lower|cheaper|easier|harder|greater|nicer|\w{3,}er\s+than)\b")
#: Openers of a rule without an imperative verb.
RULE_OPENER = _rx(r"^(?:always|never|do\s*n[o']?t|do\s+not|please|only|avoid|prefer|no|stop|make"
                  r"\s+sure|be\s+sure|let'?s|you\s+(?:should|must|need\s+to|have\s+to|will|'ll|always"
                  r"|never|only|are\s+going\s+to)|i\s+(?:want|need|'d\s+like|would\s+like|prefer"
                  r"|expect)\b)")
#: Rule openers that only a strong adverbial ("from now on") makes a rule.
TEAM_OPENER = _rx(r"^(?:we|we'?ll|we'?re|our|all|every|each|any|new)\b")
#: Expletive openers: a clause opening with them describes, it does not rule ("it takes").
EXPLETIVE = _rx(r"^(?:it|it'?s|there|there'?s|this|that|that'?s)\b")

#: Verbs that open an imperative sentence ("run the tests first").
IMPERATIVE = frozenset(re.findall(r"[\w-]+", """
add address adjust announce annotate answer apply approve archive ask assume attach avoid
back batch be benchmark block bold bump cache call cap capitalise capitalize catch change check
choose cite clean clear clone close comment commit compile configure confirm consider convert
copy cover create cut debug decode default delete deploy describe disable document double-check
download drop edit emit enable encode encrypt ensure escape exclude explain export favor favour
fetch fix flag follow fork format generate give go group handle hide highlight hold ignore
implement import include index inform install keep label leave let limit link lint list load
lock log look mark measure mention merge migrate mock move name note notify open order paginate
parse patch pause pick pin ping place plan point prefer prefix print profile protect prune
publish pull push put query queue quote raise read rebase rebuild record refactor reference
regenerate reject release reload remove rename reply report request require rerun reset resolve
respect respond restart restore retry return reuse review rewrite rollback run save schedule
scope search seed select send separate serialize set ship show sign skip sort speak split
squash stage start stash stay stick stop store stream strip stub submit suggest summarise
summarize support switch sync tag talk target tell test think throttle touch trace translate
treat trigger trim try type unlock update upgrade upload use validate verify version wait warn
wrap write
"""))
