"""The credential corpus: realistic credentials of 60+ formats, each in the text it would arrive in.

`credential_corpus()` → `[(name, text, value)]`: `name` names the format and its context
(`github-classic-pat`, `github-classic-pat/json`), `text` a line or a few lines of prose, code
or configuration carrying the credential, `value` the secret material a scanner must hide (the
password of a database URL, the body of a private key, the token itself). Values are generated
as the issuer makes them: the right prefix, length and alphabet, the CRC32 checksum of GitHub
and npm tokens, JWTs signed with real HMAC, RSA and EC keys, private keys made by
`cryptography`, PyPI macaroons that decode. Random parts come from `random.Random(seed)`, so a
corpus is the same on every machine for one seed (counts asserted by the tests stay put); keys
are made fresh per process (their material does not change what a scanner sees).

`leaked(masked, value)` says whether a value survived masking: any 16 consecutive characters of
one of its non-blank pieces (a piece shorter than 16 when the value is one piece) still in the
text. A scanner that masks only a prefix of a long token (detect-secrets cuts Stripe keys at 24
characters) therefore misses it.

`PLATFORM_FORMATS` names the formats this platform issues (`ak_` API keys, `agt_` agent tokens,
`whsec_` webhook secrets, `tgtk_` claim keys); `platform_rules()` the scanner rule each must fire.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
from functools import lru_cache

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
BASE32 = string.ascii_uppercase + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
SEED = 29  # issue 29: the corpus the BENCHMARKS table and the recall tests measure
NEEDLE = 16  # characters of a value that, still visible after masking, count as a leak

# Formats with no shape of their own: only the variable or field naming them makes them a credential.
# (An Azure storage key is 64 bytes of base64 like any blob; `key-` + 32 hex is how many caches name an md5.)
KEYWORD_ONLY = frozenset({"mistral", "cohere", "datadog-api-key", "cloudflare-api-token", "azure-storage-connection-string", "mailgun"})

PLATFORM_FORMATS = {  # format name → the scanner's rule for it
    "api-key": "api-key",
    "agent-token": "agent-token",
    "webhook-secret": "webhook-secret",
    "claim-key": "claim-key",
}


class _Gen:
    """Random parts of credentials from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def hex(self, n: int) -> str:
        return self.s(n, HEX)

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + self.s(n - 1, string.digits)

    def bytes(self, n: int) -> bytes:
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def b64(self, n: int) -> str:
        return base64.b64encode(self.bytes(n)).decode()

    def b64url(self, n: int) -> str:
        return base64.urlsafe_b64encode(self.bytes(n)).decode().rstrip("=")

    def password(self, n: int = 20) -> str:
        """A password a person or a generator would set: letters, digits and a few URL-safe symbols."""
        body = self.s(n - 2, ALNUM) + self.rng.choice("!*-_.~") + self.rng.choice(string.digits)
        return "".join(self.rng.sample(body, len(body)))


def _base62(number: int, width: int) -> str:
    digits = string.digits + string.ascii_uppercase + string.ascii_lowercase
    out = ""
    while number:
        number, rest = divmod(number, 62)
        out = digits[rest] + out
    return out.rjust(width, "0")


def _checksummed(g: _Gen, prefix: str, body: int = 30) -> str:
    """A GitHub/npm-style token: `prefix` + `body` random base62 + 6 base62 of their CRC32."""
    random_part = g.s(body)
    return prefix + random_part + _base62(binascii.crc32(random_part.encode()), 6)


@lru_cache(maxsize=1)
def _keys() -> dict:
    """Private keys made once per process: RSA 2048, EC P-256, Ed25519."""
    return {"rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048), "ec": ec.generate_private_key(ec.SECP256R1()),
            "ed25519": ed25519.Ed25519PrivateKey.generate()}


def _pem(kind: str) -> str:
    keys = _keys()
    enc = serialization.Encoding
    fmt = serialization.PrivateFormat
    none = serialization.NoEncryption()
    if kind == "rsa-pkcs1":
        return keys["rsa"].private_bytes(enc.PEM, fmt.TraditionalOpenSSL, none).decode().strip()
    if kind == "pkcs8":
        return keys["rsa"].private_bytes(enc.PEM, fmt.PKCS8, none).decode().strip()
    if kind == "ec":
        return keys["ec"].private_bytes(enc.PEM, fmt.TraditionalOpenSSL, none).decode().strip()
    if kind == "encrypted":
        return keys["ec"].private_bytes(enc.PEM, fmt.PKCS8, serialization.BestAvailableEncryption(b"hunter2-corpus")).decode().strip()
    if kind == "openssh":
        return keys["ed25519"].private_bytes(enc.PEM, fmt.OpenSSH, none).decode().strip()
    raise ValueError(kind)


def _body(pem: str) -> str:
    """The base64 lines of a PEM block (what must not survive; the header may)."""
    return "\n".join(line for line in pem.splitlines() if not line.startswith("-----") and ":" not in line)


def _jwts(g: _Gen) -> dict[str, str]:
    keys = _keys()
    now = 1767225600  # 2026-01-01
    claims = {"sub": f"user_{g.hex(12)}", "org": "shop", "iat": now, "exp": now + 3600, "scope": "runs:write sessions:read"}
    return {
        "hs256": jwt.encode(claims, g.hex(64), algorithm="HS256"),
        "rs256": jwt.encode({**claims, "iss": "https://auth.example.com/"}, keys["rsa"], algorithm="RS256", headers={"kid": g.hex(16)}),
        "es256": jwt.encode({**claims, "aud": "api"}, keys["ec"], algorithm="ES256"),
    }


def _pypi(g: _Gen) -> str:
    # A PyPI API token is `pypi-` + base64url of a macaroon whose location is pypi.org.
    identifier = json.dumps({"version": 1, "permissions": "user"}).encode()
    macaroon = b"\x02\x01\x08pypi.org\x02\x01" + bytes([len(identifier)]) + identifier + b"\x00\x02\x01\x20" + g.bytes(32) + b"\x00\x06\x20" + g.bytes(32)
    return "pypi-" + base64.urlsafe_b64encode(macaroon).decode().rstrip("=")


def _formats(g: _Gen) -> list[tuple[str, str, str]]:
    """Return `(name, text, value)` for every format, in its most usual context."""
    out: list[tuple[str, str, str]] = []

    def add(name: str, text: str, value: str) -> None:
        assert value in text or name.startswith(("private-key", "gcp-service-account")), name
        out.append((name, text, value))

    # -- the platform's own credentials ------------------------------------------------------
    ak = "ak_" + g.hex(48)
    add("api-key", f"curl -H 'Authorization: Bearer {ak}' https://agents.example.com/v1/agents", ak)
    agt = f"agt_weather-bot_{g.hex(16)}_{g.hex(48)}"
    add("agent-token", f"the agent connects with AGENTS_TOKEN={agt} from its host", agt)
    whsec = "whsec_" + g.b64(32)
    add("webhook-secret", f"verify deliveries with the signing secret {whsec} (Standard Webhooks)", whsec)
    claim = "tgtk_" + g.hex(64)
    add("claim-key", f"start the machine with: agents-runner daemon --claim-key {claim}", claim)

    # -- model providers ----------------------------------------------------------------------
    old = "sk-" + g.s(20) + "T3BlbkFJ" + g.s(20)
    add("openai-legacy", f"OPENAI_API_KEY={old}", old)
    proj = "sk-proj-" + g.s(74, URLSAFE) + "T3BlbkFJ" + g.s(74, URLSAFE)
    add("openai-project", f'client = OpenAI(api_key="{proj}")', proj)
    svc = "sk-svcacct-" + g.s(74, URLSAFE) + "T3BlbkFJ" + g.s(74, URLSAFE)
    add("openai-service-account", f"the CI job uses the service account key {svc} for evals", svc)
    admin = "sk-admin-" + g.s(74, URLSAFE) + "T3BlbkFJ" + g.s(74, URLSAFE)
    add("openai-admin", f"export OPENAI_ADMIN_KEY={admin}", admin)
    ant = "sk-ant-api03-" + g.s(93, URLSAFE) + "AA"
    add("anthropic-api", f"ANTHROPIC_API_KEY={ant}", ant)
    ant_admin = "sk-ant-admin01-" + g.s(93, URLSAFE) + "AA"
    add("anthropic-admin", f"x-api-key: {ant_admin}", ant_admin)
    aiza = "AIza" + g.s(35, URLSAFE)
    add("google-api-key", f'<script src="https://maps.googleapis.com/maps/api/js?key={aiza}&callback=initMap"></script>', aiza)
    gocspx = "GOCSPX-" + g.s(28, URLSAFE)
    add("google-oauth-client-secret", f'{{"web": {{"client_id": "{g.digits(12)}-{g.s(32, LOWER_ALNUM)}.apps.googleusercontent.com", "client_secret": "{gocspx}"}}}}', gocspx)
    hf = "hf_" + g.s(34, string.ascii_letters)
    add("huggingface", f"huggingface-cli login --token {hf}", hf)
    groq = "gsk_" + g.s(52)
    add("groq", f"GROQ_API_KEY={groq}", groq)
    xai = "xai-" + g.s(80)
    add("xai", f"XAI_API_KEY={xai}", xai)
    pplx = "pplx-" + g.s(48)
    add("perplexity", f"PERPLEXITY_API_KEY={pplx}", pplx)
    r8 = "r8_" + g.s(37)
    add("replicate", f"REPLICATE_API_TOKEN={r8}", r8)
    mistral = g.s(32)
    add("mistral", f"MISTRAL_API_KEY={mistral}", mistral)
    cohere = g.s(40)
    add("cohere", f'co = cohere.Client(api_key="{cohere}")', cohere)

    # -- code hosting and package registries ---------------------------------------------------
    for prefix, name, context in (("ghp_", "github-classic-pat", "git remote set-url origin https://x-access-token:{t}@github.com/shop/api.git"),
                                  ("gho_", "github-oauth", "GITHUB_TOKEN={t}"),
                                  ("ghu_", "github-user-to-server", "the app's user token is {t}"),
                                  ("ghs_", "github-server-to-server", "installation token: {t} (expires in an hour)"),
                                  ("ghr_", "github-refresh", "refresh_token={t}")):
        token = _checksummed(g, prefix)
        add(name, context.format(t=token), token)
    fine = "github_pat_" + g.s(22) + "_" + g.s(59)
    add("github-fine-grained-pat", f"gh auth login --with-token <<< {fine}", fine)
    glpat = "glpat-" + g.s(20, URLSAFE)
    add("gitlab-pat", f"GITLAB_TOKEN={glpat}", glpat)
    glrt = "glrt-" + g.s(20, URLSAFE)
    add("gitlab-runner", f"gitlab-runner register --token {glrt}", glrt)
    npm = _checksummed(g, "npm_")
    add("npm", f"//registry.npmjs.org/:_authToken={npm}", npm)
    pypi = _pypi(g)
    add("pypi", f"[pypi]\n  username = __token__\n  password = {pypi}", pypi)
    dckr = "dckr_pat_" + g.s(27, URLSAFE)
    add("docker-hub-pat", f"echo {dckr} | docker login -u shopbot --password-stdin", dckr)
    atlassian = "ATATT3xFfGF0" + g.s(170, URLSAFE) + "=" + g.hex(8).upper()
    add("atlassian-api-token", f"JIRA_API_TOKEN={atlassian}", atlassian)
    tfc = g.s(14) + ".atlasv1." + g.s(67)
    add("terraform-cloud", f'credentials "app.terraform.io" {{\n  token = "{tfc}"\n}}', tfc)
    pulumi = "pul-" + g.hex(40)
    add("pulumi", f"PULUMI_ACCESS_TOKEN={pulumi}", pulumi)

    # -- cloud --------------------------------------------------------------------------------
    akia = "AKIA" + g.s(16, BASE32)
    aws_secret = g.s(40, B64)
    add("aws-access-key-id", f"[default]\naws_access_key_id = {akia}\nregion = eu-west-1", akia)
    add("aws-secret-access-key", f"[default]\naws_access_key_id = {'AKIA' + g.s(16, BASE32)}\naws_secret_access_key = {aws_secret}", aws_secret)
    asia = "ASIA" + g.s(16, BASE32)
    sts_secret = g.s(40, B64)
    add("aws-session-credentials", f"export AWS_ACCESS_KEY_ID={asia}\nexport AWS_SECRET_ACCESS_KEY={sts_secret}", sts_secret)
    azure_key = g.b64(64)
    add("azure-storage-connection-string",
        f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=shopassets;AccountKey={azure_key};EndpointSuffix=core.windows.net", azure_key)
    azure_ad = g.s(3, ALNUM) + "8Q~" + g.s(31, ALNUM + "_.~-")
    add("azure-ad-client-secret", f'AZURE_CLIENT_ID={g.hex(8)}-{g.hex(4)}-{g.hex(4)}-{g.hex(4)}-{g.hex(12)}\nAZURE_CLIENT_SECRET="{azure_ad}"', azure_ad)
    do = "dop_v1_" + g.hex(64)
    add("digitalocean", f"doctl auth init --access-token {do}", do)
    alibaba = "LTAI" + g.s(20)
    add("alibaba-access-key-id", f"ALIBABA_CLOUD_ACCESS_KEY_ID={alibaba}", alibaba)
    vault = "hvs." + g.s(90, URLSAFE)
    add("hashicorp-vault", f"VAULT_TOKEN={vault} vault kv get secret/shop", vault)
    doppler = "dp.pt." + g.s(43)
    add("doppler", f"DOPPLER_TOKEN={doppler}", doppler)
    databricks = "dapi" + g.hex(32)
    add("databricks", f'DATABRICKS_TOKEN="{databricks}"', databricks)
    cloudflare = g.s(40, URLSAFE)
    add("cloudflare-api-token", f"CLOUDFLARE_API_TOKEN={cloudflare}", cloudflare)
    heroku = "HRKU-AA" + g.s(58, URLSAFE)
    add("heroku", f"HEROKU_API_KEY={heroku}", heroku)
    supabase = "sbp_" + g.hex(40)
    add("supabase", f"supabase login --token {supabase}", supabase)
    pscale = "pscale_tkn_" + g.s(43, URLSAFE)
    add("planetscale", f"PLANETSCALE_SERVICE_TOKEN={pscale}", pscale)
    account = {"type": "service_account", "project_id": "shop-prod", "private_key_id": g.hex(40),
               "private_key": _pem("pkcs8") + "\n", "client_email": "deploy@shop-prod.iam.gserviceaccount.com"}
    add("gcp-service-account", json.dumps(account, indent=2), json.dumps(_body(account["private_key"]))[1:-1])

    # -- messaging, payments, SaaS ---------------------------------------------------------------
    xoxb = f"xoxb-{g.digits(11)}-{g.digits(13)}-{g.s(24)}"
    add("slack-bot", f"SLACK_BOT_TOKEN={xoxb}", xoxb)
    xoxp = f"xoxp-{g.digits(11)}-{g.digits(11)}-{g.digits(13)}-{g.hex(32)}"
    add("slack-user", f"slack user token: {xoxp}", xoxp)
    xapp = f"xapp-1-A{g.s(10, UPPER_ALNUM)}-{g.digits(13)}-{g.hex(64)}"
    add("slack-app", f"SLACK_APP_TOKEN={xapp}", xapp)
    hook = f"https://hooks.slack.com/services/T{g.s(10, UPPER_ALNUM)}/B{g.s(10, UPPER_ALNUM)}/{g.s(24)}"
    add("slack-webhook", f"curl -X POST -d '{{\"text\":\"deployed\"}}' {hook}", hook)
    discord_hook = f"https://discord.com/api/webhooks/{g.digits(19)}/{g.s(68, URLSAFE)}"
    add("discord-webhook", f"DISCORD_WEBHOOK_URL={discord_hook}", discord_hook)
    # Discord: base64 of the bot's user id (a snowflake of 18-19 digits), a timestamp, an HMAC.
    discord_bot = base64.b64encode(g.digits(19).encode()).decode().rstrip("=") + "." + g.s(6, URLSAFE) + "." + g.s(38, URLSAFE)
    add("discord-bot", f"DISCORD_BOT_TOKEN={discord_bot}", discord_bot)
    telegram = f"{g.digits(10)}:AA{g.s(33, URLSAFE)}"
    add("telegram-bot", f"bot = telebot.TeleBot(\"{telegram}\")", telegram)
    teams = f"https://shop.webhook.office.com/webhookb2/{g.hex(8)}-{g.hex(4)}-{g.hex(4)}-{g.hex(4)}-{g.hex(12)}@{g.hex(8)}-{g.hex(4)}-{g.hex(4)}-{g.hex(4)}-{g.hex(12)}/IncomingWebhook/{g.hex(32)}/{g.hex(8)}-{g.hex(4)}-{g.hex(4)}-{g.hex(4)}-{g.hex(12)}"
    add("teams-webhook", f"post alerts to {teams}", teams)
    stripe_live = "sk_live_51" + g.s(97)
    add("stripe-live-secret", f"Stripe.api_key = '{stripe_live}'", stripe_live)
    stripe_restricted = "rk_live_51" + g.s(97)
    add("stripe-restricted", f"STRIPE_RESTRICTED_KEY={stripe_restricted}", stripe_restricted)
    stripe_test = "sk_test_51" + g.s(97)
    add("stripe-test-secret", f"STRIPE_SECRET_KEY={stripe_test}", stripe_test)
    twilio_sid = "AC" + g.hex(32)
    twilio_token = g.hex(32)
    add("twilio-auth-token", f"TWILIO_ACCOUNT_SID={twilio_sid}\nTWILIO_AUTH_TOKEN={twilio_token}", twilio_token)
    twilio_key = "SK" + g.hex(32)
    add("twilio-api-key", f"client = Client('{twilio_key}', api_secret, account_sid)", twilio_key)
    sendgrid = "SG." + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE)
    add("sendgrid", f"SENDGRID_API_KEY='{sendgrid}'", sendgrid)
    mailgun = "key-" + g.hex(32)
    add("mailgun", f"MAILGUN_API_KEY={mailgun}", mailgun)
    mailchimp = g.hex(32) + "-us" + str(g.rng.randint(1, 21))
    add("mailchimp", f"MAILCHIMP_API_KEY={mailchimp}", mailchimp)
    shopify = "shpat_" + g.hex(32)
    add("shopify-access-token", f"X-Shopify-Access-Token: {shopify}", shopify)
    square = "EAAA" + g.s(60, URLSAFE)
    add("square-access-token", f"SQUARE_ACCESS_TOKEN={square}", square)
    linear = "lin_api_" + g.s(40)
    add("linear", f"LINEAR_API_KEY={linear}", linear)
    notion = "ntn_" + g.digits(11) + g.s(35)
    add("notion", f"NOTION_TOKEN={notion}", notion)
    newrelic = "NRAK-" + g.s(27, UPPER_ALNUM)
    add("new-relic-user-key", f"NEW_RELIC_API_KEY={newrelic}", newrelic)
    datadog = g.hex(32)
    add("datadog-api-key", f"DD_API_KEY={datadog}", datadog)
    sentry = "sntryu_" + g.hex(64)
    add("sentry-user-token", f"SENTRY_AUTH_TOKEN={sentry}", sentry)
    grafana = "glsa_" + g.s(32) + "_" + g.hex(8)
    add("grafana-service-account", f"GRAFANA_TOKEN={grafana}", grafana)
    postman = "PMAK-" + g.hex(24) + "-" + g.hex(34)
    add("postman", f"POSTMAN_API_KEY={postman}", postman)
    age = "AGE-SECRET-KEY-1" + g.s(58, BECH32)
    add("age-secret-key", f"# created: 2026-01-01T00:00:00Z\n# public key: age1{g.s(58, BECH32.lower())}\n{age}", age)

    # -- tokens, keys and passwords in structure ----------------------------------------------
    for kind, token in _jwts(g).items():
        add(f"jwt-{kind}", f"Authorization: Bearer {token}", token)
    for kind in ("rsa-pkcs1", "pkcs8", "ec", "encrypted", "openssh"):
        pem = _pem(kind)
        add(f"private-key-{kind}", f"here is the deploy key:\n{pem}\nkeep it safe.", _body(pem))
    basic = base64.b64encode(f"deploy:{g.password(22)}".encode()).decode()
    add("basic-auth-header", f"Authorization: Basic {basic}", basic)
    for scheme, user, host in (("postgresql", "app", "db.internal:5432/shop"), ("mysql", "root", "mysql.internal:3306/orders"),
                               ("mongodb+srv", "shop-admin", "cluster0.x7k2p.mongodb.net/shop?retryWrites=true"),
                               ("redis", "", "cache.internal:6379/0"), ("amqp", "worker", "rabbit.internal:5672/%2f")):
        password = g.password(22)
        add(f"database-url-{scheme.split('+')[0]}", f"DATABASE_URL={scheme}://{user}:{password}@{host}", password)
    password = g.password(24)
    add("password-assignment", f'db:\n  host: db.internal\n  password: "{password}"', password)
    netrc = "ghp_" + g.s(36)
    add("netrc", f"machine github.com login shopbot password {netrc}", netrc)

    # -- issue 49: the nine formats the scanner did not know, and the partial masks ------------------
    # (appended last, so the values of every format above stay those of the same seed)
    mailgun_bare = "key-" + g.hex(32)
    add("mailgun-private-key", f"mg = Mailgun(domain='mg.shop.example', api_key='{mailgun_bare}')", mailgun_bare)
    doppler_st = "dp.st.prd." + g.s(40)
    add("doppler-service-token", f"doppler secrets download --token {doppler_st} --no-file", doppler_st)
    contentful = "CFPAT-" + g.s(43, URLSAFE)
    add("contentful-pat", f"contentful login --management-token {contentful}", contentful)
    notion_legacy = "secret_" + g.s(43)
    add("notion-integration-secret", f"const notion = new Client({{ auth: '{notion_legacy}' }})", notion_legacy)
    pinecone = "pcsk_" + g.s(5, LOWER_ALNUM) + "_" + g.s(63, ALNUM)
    add("pinecone", f"pc = Pinecone(api_key=\"{pinecone}\")", pinecone)
    tailscale = "tskey-auth-k" + g.s(10, ALNUM) + "CNTRL-" + g.s(33, ALNUM)
    add("tailscale-auth-key", f"tailscale up --authkey {tailscale}", tailscale)
    mapbox_claims = base64.urlsafe_b64encode(json.dumps({"u": "shop", "a": "cl" + g.s(23, LOWER_ALNUM)}, separators=(",", ":")).encode())
    mapbox = "sk." + mapbox_claims.decode().rstrip("=") + "." + g.s(22, URLSAFE)
    add("mapbox-secret-token", f"MAPBOX_DOWNLOADS_TOKEN: {mapbox}", mapbox)
    resend = "re_" + g.s(8) + "_" + g.s(24)
    add("resend", f"const resend = new Resend('{resend}');", resend)
    fcm = "AAAA" + g.s(7, URLSAFE) + ":APA91b" + g.s(134, URLSAFE)
    add("fcm-server-key", f"Authorization: key={fcm}", fcm)
    sig = base64.b64encode(g.bytes(32)).decode().replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    add("azure-sas-url", f"https://shopassets.blob.core.windows.net/exports/orders.csv?sv=2022-11-02&ss=b&srt=o&sp=r"
                         f"&se=2026-12-31T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={sig}", sig)
    django_key = "django-insecure-" + g.s(50, string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)")
    add("django-secret-key", f"SECRET_KEY = '{django_key}'", django_key)
    return out


def _variants(base: list[tuple[str, str, str]], g: _Gen) -> list[tuple[str, str, str]]:
    """Each single-line credential again in two more contexts: a JSON config and a chat sentence."""
    out = []
    for name, text, value in base:
        if "\n" in value or len(text.splitlines()) > 1 or name.startswith(("database-url", "basic-auth", "slack-webhook", "discord-webhook",
                                                                            "teams-webhook", "google-api-key", "gcp-", "azure-sas")):
            continue
        key = name.split("-")[0].upper() + "_KEY"
        out.append((f"{name}/json", json.dumps({"env": {key: value}, "region": "eu-west-1"}), value))
        if name not in KEYWORD_ONLY:  # a bare 32-hex or 40-letter value without its name is no credential to anyone
            out.append((f"{name}/prose", f"Sure — I found it in the logs: {value}. Rotate it before the release.", value))
    return out


@lru_cache(maxsize=4)
def _corpus(seed: int) -> tuple[tuple[str, str, str], ...]:
    g = _Gen(seed)
    base = _formats(g)
    return tuple(base + _variants(base, g))


def credential_corpus(seed: int = SEED) -> list[tuple[str, str, str]]:
    """Return `(name, text, value)` for every format and context (see module doc)."""
    return list(_corpus(seed))


def format_names(seed: int = SEED) -> set[str]:
    """Return the credential formats of the corpus (names without their `/context`)."""
    return {name.split("/")[0] for name, _, _ in _corpus(seed)}


def needles(value: str) -> list[str]:
    """Return the pieces of `value` whose survival is a leak (see `leaked`)."""
    pieces = [p for p in value.replace("\\n", "\n").split() if p]
    if len(pieces) == 1 and len(pieces[0]) < NEEDLE:
        return pieces
    out = []
    for piece in pieces:
        if len(piece) >= NEEDLE:
            out.extend(piece[i : i + NEEDLE] for i in range(len(piece) - NEEDLE + 1))
    return out


def leaked(masked: str, value: str) -> bool:
    """Return True when any needle of `value` is still in `masked` (the value was not hidden)."""
    return any(n in masked for n in needles(value))


def raw_values(text: str) -> list[str]:
    """Return the raw credential values `scan_text` finds in `text` (to grep for them afterwards)."""
    from sessions.scanner import raw_hits

    return raw_hits(text)


def as_json(value) -> str:
    """Return `value` as compact JSON (how it sits in a stored payload)."""
    return json.dumps(value, separators=(",", ":"))


# --- issue 49: every format in every position a reply, a payload or a page puts it ----------------

#: Marks a credential is written before or after in chat, Markdown and CJK text (issue 49's list, and
#: the word ends the scanner always knew).
PUNCTUATION = (".", ",", ";", "!", "?", ")", "]", ":", "-", "**", ">", "/", "|", "}", "=", "%", "#", "~", "\u00a0", "\u200b",
               "…", "—", "。", "、", "'", '"', "`")
#: The marks no credential holds: a credential ends at one even with no blank after it.
WORD_MARKS = frozenset({"|", ">", "}", "'", '"', "`", "\u00a0", "\u200b", "…", "—", "。", "、"})
#: Formats whose value is a credential only beside its name or scheme: they are probed as their whole line.
IN_CONTEXT = KEYWORD_ONLY | {"aws-secret-access-key", "aws-session-credentials", "twilio-auth-token", "password-assignment",
                             "basic-auth-header", "azure-sas-url"}


def _unit(name: str, text: str, value: str) -> str | None:
    """The piece a probe places: the value, or for a value that needs its name the line holding it."""
    if "\n" in value or name.startswith(("private-key", "gcp-service-account")):
        return None  # a multi-line block is probed by the corpus as it is
    if name in IN_CONTEXT or name.startswith("database-url"):
        return next(line.strip() for line in text.splitlines() if value in line)
    return value


def probe_positions(unit: str) -> list[tuple[str, str]]:
    """Return `(position, text)` for `unit` in every position issue 49 lists (see `probe_corpus`)."""
    out = [("bare", unit)]
    for mark in PUNCTUATION:
        out += [(f"after {mark!r}", f"use {unit}{mark} here"), (f"after {mark!r} at the end", f"the key is {unit}{mark}"),
                (f"before {mark!r}", f"use {mark}{unit} here")]
        if mark in WORD_MARKS:  # a mark no credential holds also ends one with no blank after it (`密钥X。请`)
            out.append((f"between {mark!r}", f"key{mark}{unit}{mark}next"))
    out += [("bold", f"Your key is **{unit}**"), ("italic", f"your key is *{unit}*."), ("code", f"set `{unit}` first"),
            ("strike", f"~~{unit}~~ (rotated)"), ("fenced", f"```\n{unit}\n```"), ("quote", f"> {unit}"), ("list", f"- {unit}\n- next"),
            ("link", f"[the key]({unit})"), ("cjk", f"你的密钥是{unit}，请妥善保管。"), ("cjk colon", f"密钥：{unit}。"),
            ("japanese", f"キーは{unit}です")]
    if '"' not in unit:  # a whole `name = "value"` line is no one's object key
        out += [("json key", json.dumps({unit: "prod"})), ("json key, utf-8", json.dumps({unit: "本番"}, ensure_ascii=False)),
                ("json nested key", json.dumps({"env": {unit: 1}}))]
    if not any(c.isspace() for c in unit):
        out += [("url user-info", f"git clone https://deploy:{unit}@git.example.com/shop.git"),
                ("url user-info, token as user", f"https://{unit}:x-oauth-basic@github.com/shop/api.git")]
    return out


@lru_cache(maxsize=2)
def _probes(seed: int) -> tuple[tuple[str, str, str], ...]:
    out = []
    for name, text, value in _corpus(seed):
        if "/" in name:
            continue
        unit = _unit(name, text, value)
        if unit is not None:
            out.extend((f"{name} {position}", probe, value) for position, probe in probe_positions(unit))
    return tuple(out)


def probe_corpus(seed: int = SEED) -> list[tuple[str, str, str]]:
    """Return `(name, text, value)`: every single-line format of the corpus × every position of issue 49.

    Positions: bare; after and before each mark of `PUNCTUATION` (mid-sentence, at the end, and
    between marks with no blank); Markdown emphasis, code and links; CJK and Japanese text; a JSON
    object key; a URL's user-info. Deterministic for one seed (`probe_corpus()` is the recall test's).
    """
    return list(_probes(seed))


def encoded_probes(seed: int = SEED) -> list[tuple[str, str, str]]:
    """Return `(name, text, value)`: credentials the way they are commonly encoded (issue 49).

    A URL with user-info base64'd and percent-encoded, an `Authorization: Basic` header, a
    credential as a percent-encoded query value, a base64 blob decoding to a URL with user-info.
    `value` is the encoded form (what must not survive).
    """
    from urllib.parse import quote

    g = _Gen(seed + 49)
    token = _checksummed(g, "ghp_")
    url = f"https://x-access-token:{token}@github.com/shop/api.git"
    b64 = base64.b64encode(url.encode()).decode()
    pct = quote(url, safe="")
    password = g.password(22)
    db = f"postgresql://app:{password}@db.internal:5432/shop"
    basic = base64.b64encode(f"deploy:{g.password(22)}".encode()).decode()
    key = "sk-proj-" + g.s(74, URLSAFE) + "T3BlbkFJ" + g.s(74, URLSAFE)
    return [
        ("url base64", f"REMOTE={b64}", b64),
        ("url base64, prose", f"the remote is {b64}. clone it", b64),
        ("url percent-encoded", f"https://ci.example.com/hook?remote={pct}&ref=main", token),
        ("url percent-encoded, alone", f"remote: {pct}", token),
        ("database url base64", f"DB_B64={base64.b64encode(db.encode()).decode()}", base64.b64encode(db.encode()).decode()),
        ("database url percent-encoded", f"?dsn={quote(db, safe='')}", quote(password, safe="")),
        ("basic header", f"Authorization: Basic {basic}", basic),
        ("query value", f"https://api.example.com/v1/models?api_key={quote(key, safe='')}&x=1", key),
        ("query value, token", f"GET /repos/shop/api?access_token={token} HTTP/1.1", token),
    ]


def platform_rules() -> dict[str, str]:
    """Return format name → the scanner rule that must report it (the platform's own credentials)."""
    return dict(PLATFORM_FORMATS)

