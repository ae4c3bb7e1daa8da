"""Hard negatives that look most like secrets: publishable keys, account ids, prose.

Stripe publishable keys (``pk_live_…`` are meant for the browser), Twilio account and
message SIDs (``AC…``, ``SM…``: identifiers, the auth token is the secret), Stripe object
ids, AWS ARNs and account ids, Slack and Discord ids, UUIDs as request ids, and sentences
in many languages that speak about a password without stating one ("het wachtwoord is
vergeten", "пароль неверный", "şifre yanlış"). Prefixes are assembled from pieces. Merged
into :data:`redaction_negatives.NEGATIVES` by :func:`redaction_negatives.build_negatives`.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

HEX = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits

Item = Callable[[Any], str]

# fmt: off
ID_TEMPLATES: dict[str, list[Item]] = {
    "publishable_key": [
        lambda g: f"STRIPE_PUBLISHABLE_KEY=pk_live_{g.s(24)}",
        lambda g: f"const stripe = Stripe('pk_live_{g.s(99)}');",
        lambda g: f"NEXT_PUBLIC_STRIPE_KEY=pk_test_{g.s(24)}",
        lambda g: f"publishableKey: \"pk_live_{g.s(34)}\"",
        lambda g: f"the publishable key pk_live_{g.s(24)} goes into the checkout page",
        lambda g: f"mapboxgl.accessToken = 'p' + 'k.eyJ1IjoiYWNtZSIsImEiOiJ{g.s(10)}'",
        lambda g: f"ALGOLIA_APP_ID={g.s(10, string.ascii_uppercase + string.digits)}",
    ],
    "account_sid": [
        lambda g: "TWILIO_ACCOUNT_SID=A" + f"C{g.hex(32)}",
        lambda g: "account_sid = 'A" + f"C{g.hex(32)}'",
        lambda g: "Twilio account A" + f"C{g.hex(32)} sent message S" + f"M{g.hex(32)}",
        lambda g: "GET /2010-04-01/Accounts/A" + f"C{g.hex(32)}/Messages.json 200",
        lambda g: "messaging service M" + f"G{g.hex(32)} queued",
        lambda g: "call sid C" + f"A{g.hex(32)} completed in 42 s",
    ],
    "object_id": [
        lambda g: f"created customer cus_{g.s(14)} with payment intent pi_{g.s(24)}",
        lambda g: f"charge ch_{g.s(24)} refunded",
        lambda g: f"arn:aws:iam::{g.rng.randint(10**11, 10**12 - 1)}:role/deploy-ci",
        lambda g: f"AWS_ACCOUNT_ID={g.rng.randint(10**11, 10**12 - 1)}",
        lambda g: f"slack channel C{g.s(10, string.ascii_uppercase + string.digits)} user U{g.s(10, string.ascii_uppercase + string.digits)}",
        lambda g: f"discord guild {g.rng.randint(10**17, 10**18)} channel {g.rng.randint(10**17, 10**18)}",
        lambda g: f"request_id={g.uuid()} status=200 duration_ms=12",
        lambda g: f"trace {g.hex(32)} span {g.hex(16)}",
        lambda g: f"AZURE_TENANT_ID={g.uuid()}",
        lambda g: f"AZURE_CLIENT_ID={g.uuid()}",
        lambda g: f"GOOGLE_CLOUD_PROJECT=acme-prod-{g.rng.randint(100000, 999999)}",
        lambda g: f"order #{g.rng.randint(10**7, 10**8)} token bucket refilled",
    ],
    "env_non_secret": [
        lambda g: "API_TOKEN=",
        lambda g: "export API_TOKEN=${API_TOKEN}",
        lambda g: "DB_PASSWORD=changeme",
        lambda g: "STRIPE_SECRET_KEY=<your-secret-key>",
        lambda g: "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
        lambda g: "SECRET_KEY_FILE=/run/secrets/django_key",
        lambda g: f"MAX_TOKENS={g.rng.randint(256, 8192)}",
        lambda g: f"PASSWORD_MIN_LENGTH={g.rng.randint(8, 16)}",
        lambda g: "OPENAI_API_KEY=$OPENAI_API_KEY",
        lambda g: "TOKEN = Keyword",
        lambda g: "AUTH_TOKEN=xxxxxxxxxxxx",
        lambda g: "API_KEY=None",
        lambda g: "SESSION_SECRET=$(openssl rand -hex 32)",
        lambda g: "JWT_SECRET=your-jwt-secret-here",
        lambda g: "REDIS_PASSWORD=true",
    ],
    "prose_multilingual": [
        lambda g: "het wachtwoord is vergeten, kun je het resetten?",
        lambda g: "das Passwort ist abgelaufen, bitte neu setzen",
        lambda g: "le mot de passe est trop court",
        lambda g: "la contraseña es obligatoria en el formulario",
        lambda g: "a senha é obrigatória",
        lambda g: "la password è scaduta",
        lambda g: "пароль неверный, попробуй ещё раз",
        lambda g: "пароль от базы лежит в vault",
        lambda g: "hasło jest nieprawidłowe",
        lambda g: "lösenordet är fel",
        lambda g: "şifre yanlış, tekrar dene",
        lambda g: "şifremi unuttum",
        lambda g: "パスワードは 8 文字以上です",
        lambda g: "密码是必填项",
        lambda g: "비밀번호는 필수입니다",
        lambda g: "salasana on vanhentunut",
        lambda g: "the password is in 1Password under 'Stripe prod'",
        lambda g: "change the password in the admin panel",
        lambda g: "mdp : 0.95 discount factor",
        lambda g: "the api key is stored in Vault at secret/data/ci",
    ],
}
# fmt: on
