"""Corpus kinds of passwords stated in prose, one kind per language.

:data:`PROSE_KINDS` maps ``prose_<language>`` to templates of how people state a password
in that language: "my password is X", "the password for the database is X", "password: X",
with the language's own word order, possessive and definite forms ("het wachtwoord is",
"lösenordet är", "şifrem", "パスワードは … です"). Used by ``tests/redaction_corpus.py``.
"""

from __future__ import annotations

import string

from redaction_gen import Gen, Template, one

_WORDS = ["Kaas", "Sommar", "Zima", "Kedi", "Sonne", "Soleil", "Perro", "Gato", "Luna",
          "Wiosna", "Sakura", "Hana", "Tiger"]


def _pw(g: Gen) -> str:
    """A password as people choose them: a human one, or a word with digits and a sign."""
    if g.rng.random() < 0.5:
        return g.password()
    return g.pick(_WORDS) + g.digits(4) + g.pick(["!", "#", "", "?"]) + \
        g.s(2, string.ascii_lowercase)


def _t(*phrasings: str) -> list[Template]:
    return [one(p, _pw) for p in phrasings]


# fmt: off
PROSE_KINDS: dict[str, list[Template]] = {
    "prose_en": _t("my password is {}", "the password for the staging db is {} btw",
                   "password: {}", "I set the admin password to {}", "use the passphrase {} for the vault"),
    "prose_nl": _t("het wachtwoord is {}", "mijn wachtwoord is {}", "wachtwoord: {}",
                   "het wachtwoord van de database is {}", "ik heb het wachtwoord veranderd in {}"),
    "prose_de": _t("das Passwort ist {}", "mein Kennwort lautet {}", "Passwort: {}",
                   "das Passwort für die Datenbank ist {}", "ich habe das Passwort auf {} geändert"),
    "prose_fr": _t("le mot de passe est {}", "mon mot de passe : {}", "mot de passe = {}",
                   "le mot de passe de la base est {}", "mdp : {}"),
    "prose_es": _t("la contraseña es {}", "mi contraseña es {}", "contraseña: {}",
                   "la contraseña de la base es {}", "cambié la contraseña a {}"),
    "prose_pt": _t("a senha é {}", "minha senha é {}", "senha: {}", "a senha do banco é {}",
                   "mudei a senha para {}"),
    "prose_it": _t("la password è {}", "la mia password è {}", "password: {}",
                   "la password del database è {}", "la nuova password è {}"),
    "prose_ru": _t("пароль: {}", "мой пароль {}", "пароль от базы — {}", "пароль такой: {}",
                   "я поменял пароль на {}"),
    "prose_uk": _t("пароль: {}", "мій пароль {}", "пароль до бази — {}"),
    "prose_pl": _t("hasło to {}", "moje hasło: {}", "hasło do bazy to {}", "hasło jest {}",
                   "zmieniłem hasło na {}"),
    "prose_sv": _t("lösenordet är {}", "mitt lösenord är {}", "lösenord: {}",
                   "lösenordet till databasen är {}", "jag bytte lösenordet till {}"),
    "prose_tr": _t("şifrem {}", "şifre: {}", "veritabanı şifresi {}", "parolam {}",
                   "şifreyi {} olarak değiştirdim"),
    "prose_ja": _t("パスワードは {} です", "パスワード：{}", "DBのパスワードは{}です",
                   "パスワードを {} に変更しました"),
    "prose_zh": _t("密码是 {}", "我的密码：{}", "数据库密码为 {}", "密码改成了 {}"),
    "prose_ko": _t("비밀번호는 {}", "비밀번호: {}", "내 비밀번호는 {} 입니다", "비밀번호를 {}로 바꿨어요"),
    "prose_cs": _t("heslo je {}", "moje heslo: {}"),
    "prose_fi": _t("salasana on {}", "salasanani on {}"),
    "prose_da_no": _t("adgangskoden er {}", "passordet er {}", "mit kodeord er {}"),
}
# fmt: on
