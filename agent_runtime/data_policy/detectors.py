"""The built-in detectors of the data policy: what each one finds in a text, and nothing else.

:func:`scan` runs the named detectors over one text (the engine hands it every string of an answer
joined by :data:`SEPARATOR`, so one call covers a whole JSON value) and returns findings: a span, its
detector and a *key*, the value's canonical form (a card's digits, an email in lower case), which
numbers the placeholders so that one value written twice gets one number. The number-shaped
detectors share one pass that finds the runs of digits and then look only there; the others look
only around the literal each of their patterns needs ("@", "://", "eyJ", a phrase's keyword …).

Every pattern here stays linear: repetitions are capped or cannot overlap themselves, and no
character class crosses the NUL of :data:`SEPARATOR`, so a match never joins two strings of an
answer. Digit-based detectors use ASCII boundaries (``[A-Za-z0-9_]``), not ``\\w``: Chinese text
runs into numbers without a space ("电话13800138000").

Checksums and numbering plans come from well-kept libraries: python-stdnum (Luhn, ISO 13616
mod-97 and each country's BBAN structure, the GB 11643 check digit and birth date) and phonenumbers
(Google's libphonenumber metadata). The rest — secret formats, injection phrasings, markup — are
public formats and heuristics written here (docs/data-policy.md says what they catch and miss).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from ipaddress import ip_address
from urllib.parse import urlsplit

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn, numdb
from stdnum.cn import ric
from stdnum.exceptions import ValidationError

# Between the strings of one answer (engine): a line break so line-anchored patterns see each
# string's start, and a NUL that no pattern's character class accepts.
SEPARATOR = "\n\x00\n"

SECRETS = "secrets"
EMAIL = "email"
PHONE = "phone"
PAYMENT_CARD = "payment_card"
IBAN = "iban"
CN_RESIDENT_ID = "cn_resident_id"
IP_ADDRESS = "ip_address"
INJECTION = "injection"
EXTERNAL_MEDIA = "external_media"
# In the order the issue lists them; also the order findings are reported in.
BUILTIN_DETECTORS = (
    SECRETS,
    EMAIL,
    PHONE,
    PAYMENT_CARD,
    IBAN,
    CN_RESIDENT_ID,
    IP_ADDRESS,
    INJECTION,
    EXTERNAL_MEDIA,
)
# Number-shaped detectors compete for the same digits: a finding of a later one inside a finding of
# an earlier one is the same value read twice (a card's digits are not also a phone number).
NUMERIC_PRIORITY = (IBAN, CN_RESIDENT_ID, PAYMENT_CARD, IP_ADDRESS, PHONE)


@dataclass(frozen=True, slots=True)
class Finding:
    """One value found: ``text[start:end]``, by ``detector``; ``key`` is its canonical form."""

    start: int
    end: int
    detector: str
    key: str


@dataclass
class Scope:
    """What a scan may need beyond the text: the business system's own hosts (``external_media``),
    and the text in lower case, computed once for every detector that wants it."""

    own_hosts: tuple[str, ...] = ()
    _lower: tuple[str, str] | None = field(default=None, repr=False)

    def is_own(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(host == own or host.endswith("." + own) for own in self.own_hosts)

    def lower(self, text: str) -> str:
        if self._lower is None or self._lower[0] is not text:
            # U+0130 is the one character whose lower case is longer (two code points): positions in
            # the lowered text must be positions in the text.
            self._lower = (text, text.replace("\u0130", "I").lower())
        return self._lower[1]


# ASCII boundaries: a digit-shaped value must not continue a word, a number or an identifier.
_E = r"(?![A-Za-z0-9_])"
_DIGITS_RE = re.compile(r"\d")


def _digits(text: str) -> str:
    return "".join(_DIGITS_RE.findall(text))


_GROUP_RE = re.compile(r"[^ ]+")


def group_windows(value: str, *, min_group: int) -> list[tuple[int, int]]:
    """``value`` without a stray short number at either end, as (start, end) spans, longest first.

    A greedy candidate may have swallowed a neighbouring small number ("qty 2 4111 1111 1111 1111",
    "call 415-555-2671 x 3"): when the whole does not validate, it is tried without a first or last
    space-separated group shorter than ``min_group`` characters — too short to be part of the value.
    Longer groups are never dropped: a value is not looked for inside a longer run of digit groups
    (a parcel's tracking number holds many phone-shaped windows)."""
    groups = [(m.start(), m.end()) for m in _GROUP_RE.finditer(value)]
    if len(groups) < 2:
        return []
    first_short = groups[0][1] - groups[0][0] < min_group
    last_short = groups[-1][1] - groups[-1][0] < min_group
    windows = []
    if first_short:
        windows.append((groups[1][0], groups[-1][1]))
    if last_short:
        windows.append((groups[0][0], groups[-2][1]))
    if first_short and last_short and len(groups) > 2:
        windows.append((groups[1][0], groups[-2][1]))
    return windows


def _in_regions(
    pattern: re.Pattern[str], text: str, regions: Iterable[tuple[int, int]] | None
) -> Iterable[re.Match[str]]:
    """Matches of ``pattern`` inside each region; the whole text when ``regions`` is None. A region is
    searched in place (``pos``/``endpos``), so lookbehinds still see what precedes it."""
    if regions is None:
        yield from pattern.finditer(text)
        return
    last_end = 0
    for start, end in regions:
        for match in pattern.finditer(text, max(start, last_end), end):
            last_end = match.end()
            yield match


def looks_random(body: str) -> bool:
    """A generated token mixes digits, lower- and upper-case letters; prose and identifiers do not."""
    return (
        any(ch.isdigit() for ch in body)
        and any(ch.islower() for ch in body)
        and any(ch.isupper() for ch in body)
    )


# --- secrets ----------------------------------------------------------------------------------------
# Prefixed token formats, published by their issuers. The hub's own secrets (access, refresh,
# authorization code, Client Token: prefix + 43 base64url characters, agent_runtime.tokens) are
# secrets too; the public OAuth client ids (bhm_) are not.
_SECRET_TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9_/+-])(?:"
    r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z2-7]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{36,255}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{60,255}"  # GitHub fine-grained tokens
    r"|glpat-[A-Za-z0-9_-]{20,64}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,255}"  # Slack tokens
    r"|xapp-\d-[A-Za-z0-9-]{10,255}"  # Slack app tokens
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}"  # Stripe secret and restricted keys
    r"|whsec_[A-Za-z0-9]{24,255}"  # Stripe webhook secrets
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|GOCSPX-[A-Za-z0-9_-]{28}"  # Google OAuth client secrets
    r"|ya29\.[A-Za-z0-9_-]{20,2048}"  # Google OAuth access tokens
    r"|sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{20,255}"  # OpenAI-style, Anthropic
    r"|hf_[A-Za-z0-9]{30,64}"  # Hugging Face
    r"|npm_[A-Za-z0-9]{36}"  # npm
    r"|pypi-AgE[A-Za-z0-9_-]{50,2048}"  # PyPI
    r"|SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"  # SendGrid
    r"|(?:bha|bhr|bhc|bct)_[A-Za-z0-9_-]{43}"  # this hub's own secrets
    r")(?![A-Za-z0-9_-])"
)
_SLACK_WEBHOOK_RE = re.compile(
    r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,16}/B[A-Z0-9]{6,16}/[A-Za-z0-9]{16,64}"
)
_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN[ ]((?:[A-Z0-9]{1,16}[ ]){0,3})PRIVATE[ ]KEY(?:[ ]BLOCK)?-----"
    r"[^\x00]*?(?:-----END[ ](?:[A-Z0-9]{1,16}[ ]){0,3}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----|(?=\n\x00)|\Z)"
)
_JWT_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{2,16384}\.[A-Za-z0-9_-]{0,4096}"
    r"(?![A-Za-z0-9_-])"
)
# An opaque bearer credential written out as a header ("Authorization: Bearer …", "Bearer …").
_BEARER_RE = re.compile(r"(?i:bearer)[ \t]{1,8}([A-Za-z0-9._~+/-]{20,4096}=*)(?![A-Za-z0-9._~+/=-])")
# Credentials in a URL's userinfo (postgres://user:password@host).
_URL_CREDENTIALS_RE = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,31}://[^\s:/@\x00]{1,256}:[^\s/@\x00]{1,256}@"
    r"[A-Za-z0-9.-]{1,253}"
)
# AWS secret access keys have no prefix: only with their name beside them.
_AWS_SECRET_RE = re.compile(
    r"(?i:aws_?secret_?access_?key|secret_?access_?key)[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?"
    r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
)


def _jwt_header_ok(token: str) -> bool:
    header = token.split(".", 1)[0]
    try:
        data = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and ("alg" in data or "typ" in data or "enc" in data)


# Each prefixed format starts with one of these: the token pattern runs only if one is in the text
# (each find is one pass over the text; "k_" stands for sk_ and rk_, "bh" for this hub's bha_, bhr_
# and bhc_).
_SECRET_PREFIXES = (
    "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "AIza", "ghp_", "gho_",
    "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "xapp-", "k_", "whsec_", "GOCSPX-", "ya29.",
    "sk-", "hf_", "npm_", "pypi-", "SG.", "bh", "bct_",
)  # fmt: skip


def scan_secrets(text: str, scope: Scope) -> list[Finding]:
    found: list[Finding] = []
    if not any(prefix in text for prefix in _SECRET_PREFIXES):
        tokens: Iterable[re.Match[str]] = ()
    else:
        tokens = _SECRET_TOKEN_RE.finditer(text)
    for match in tokens:
        value = match.group()
        # "sk-" also starts words and names ("sk-learn-compatible-…"): generated keys look random.
        if value.startswith("sk-") and not looks_random(value[3:]):
            continue
        found.append(Finding(match.start(), match.end(), SECRETS, value))
    if "hooks.slack.com" in text:
        for match in _SLACK_WEBHOOK_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), SECRETS, match.group()))
    if "-----BEGIN" in text:
        for match in _PRIVATE_KEY_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), SECRETS, match.group()))
    for at in _occurrences(text, "eyJ"):
        match = _JWT_RE.match(text, at)
        if match is not None and _jwt_header_ok(match.group()):
            found.append(Finding(match.start(), match.end(), SECRETS, match.group()))
    lower = scope.lower(text)
    for at in _occurrences(lower, "bearer"):
        match = _BEARER_RE.match(text, at)
        if match is not None and looks_random(match.group(1)):
            found.append(Finding(match.start(1), match.end(1), SECRETS, match.group(1)))
    if "@" in text:
        for at in _occurrences(text, "://"):
            # The scheme is at most 32 characters before "://".
            match = _URL_CREDENTIALS_RE.search(text, max(0, at - 33), min(len(text), at + 1024))
            if match is not None and match.start() < at < match.end():
                found.append(Finding(match.start(), match.end(), SECRETS, match.group()))
    for at in _occurrences(lower, "secret"):
        match = _AWS_SECRET_RE.search(text, max(0, at - 16), min(len(text), at + 80))
        if match is not None:
            found.append(Finding(match.start(1), match.end(1), SECRETS, match.group(1)))
    return found


def _occurrences(text: str, needle: str) -> Iterable[int]:
    at = text.find(needle)
    while at != -1:
        yield at
        at = text.find(needle, at + 1)


# --- email ------------------------------------------------------------------------------------------
_EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)


# Up to this many "@", each is looked at alone; past it, one pass over the whole text is cheaper.
_EMAIL_ANCHORED_MAX = 32


def scan_email(text: str, scope: Scope) -> list[Finding]:
    found: list[Finding] = []
    if text.count("@", 0, len(text)) > _EMAIL_ANCHORED_MAX:
        return [Finding(m.start(), m.end(), EMAIL, m.group().lower()) for m in _EMAIL_RE.finditer(text)]
    at = text.find("@")
    while at != -1:
        # Only around each "@": a local part is at most 64 characters, a domain at most 253.
        start = max(at - 64, found[-1].end if found else 0)
        match = _EMAIL_RE.search(text, start, min(len(text), at + 256))
        while match is not None and match.end() <= at:
            match = _EMAIL_RE.search(text, match.end(), min(len(text), at + 256))
        if match is not None and match.start() < at < match.end():
            found.append(Finding(match.start(), match.end(), EMAIL, match.group().lower()))
            at = text.find("@", match.end())
        else:
            at = text.find("@", at + 1)
    return found


# --- payment cards ----------------------------------------------------------------------------------
# 13–19 digits, optionally grouped by single spaces or hyphens; then a known brand's IIN range and
# length, then Luhn. Luhn alone passes one random number in ten; the brand table cuts that further.
# Not after "+" (a number after a plus sign is an international phone number), nor after a digit
# and a separator: a card does not start in the middle of a longer run of digit groups.
_CARD_RE = re.compile(r"(?<![A-Za-z0-9_+])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![A-Za-z0-9_]|[ -]?\d)")


def card_brand(digits: str) -> str | None:
    """The card brand whose IIN range and length ``digits`` fit, or None."""
    n = len(digits)
    two, three, four, six = int(digits[:2]), int(digits[:3]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4" and n in (13, 16, 19):
        return "visa"
    if (51 <= two <= 55 or 2221 <= four <= 2720) and n == 16:
        return "mastercard"
    if two in (34, 37) and n == 15:
        return "amex"
    if (four == 6011 or two == 65 or 644 <= three <= 649 or 622126 <= six <= 622925) and 16 <= n <= 19:
        return "discover"
    if 3528 <= four <= 3589 and 16 <= n <= 19:
        return "jcb"
    if two == 62 and 16 <= n <= 19:
        return "unionpay"
    if (300 <= three <= 305 or two in (36, 38, 39) or four == 3095) and 14 <= n <= 19:
        return "diners"
    if (two in (50, 56, 57, 58, 67) or three == 639 or four == 6304) and 12 <= n <= 19:
        return "maestro"
    if 2200 <= four <= 2204 and 16 <= n <= 19:
        return "mir"
    return None


def _card_digits(value: str) -> str | None:
    digits = value.replace(" ", "").replace("-", "")
    # One separator style per number ("4111 1111-1111 1111" is not how cards are written).
    if (" " in value and "-" in value) or not 12 <= len(digits) <= 19:
        return None
    return digits if card_brand(digits) and luhn.is_valid(digits) else None


def scan_payment_card(
    text: str, scope: Scope, regions: Iterable[tuple[int, int]] | None = None
) -> list[Finding]:
    found = []
    for match in _in_regions(_CARD_RE, text, regions):
        value = match.group()
        digits = _card_digits(value)
        if digits is not None:
            found.append(Finding(match.start(), match.end(), PAYMENT_CARD, digits))
            continue
        if " " in value:
            for start, end in group_windows(value, min_group=3):
                digits = _card_digits(value[start:end])
                if digits is not None:
                    found.append(Finding(match.start() + start, match.start() + end, PAYMENT_CARD, digits))
                    break
    return found


# --- IBAN -------------------------------------------------------------------------------------------
_IBAN_RE = re.compile(
    r"(?<![A-Za-z0-9_])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}(?![A-Za-z0-9_])"
    # Groups of four may run into an uppercase word ("… 3000 THEN"): the end is searched below.
)


# ISO 13616 reads letters as numbers: A = 10 … Z = 35.
_IBAN_LETTER_VALUES = {ord(letter): str(10 + i) for i, letter in enumerate(string.ascii_uppercase)}


def _iban_valid(compact: str) -> bool:
    # ISO 13616 mod-97 and the country's registered length and BBAN structure (stdnum's registry).
    # Country-specific national check digits are not required: a real IBAN always passes them, and
    # the registry structure already rules out almost every random match. The remainder is computed
    # here first, because most candidates fail it and stdnum's validation is slower.
    rearranged = (compact[4:] + compact[:4]).translate(_IBAN_LETTER_VALUES)
    if not rearranged.isdigit() or int(rearranged) % 97 != 1:
        return False
    try:
        stdnum_iban.validate(compact, check_country=False)
    except ValidationError:
        return False
    return True


# The countries that issue IBANs and the length of each one's IBANs (the ISO 13616 registry as
# python-stdnum ships it: the BBAN structure "4!n4!n12!c" is 20 characters, plus 4).
_IBAN_LENGTHS = {
    low: 4 + sum(int(n) for n in re.findall(r"(\d+)!", props.get("bban", "")))
    for _, low, _, props, _ in numdb.get("iban").prefixes
}
_IBAN_COUNTRIES = frozenset(_IBAN_LENGTHS)


def _iban_regions(text: str) -> list[tuple[int, int]]:
    """Where an IBAN may be: a country code and two check digits not inside a word, to an IBAN's
    greatest length."""
    result: list[tuple[int, int]] = []
    for match in _IBAN_START_RE.finditer(text):
        start = match.start()
        if (
            text[start : start + 2] in _IBAN_COUNTRIES
            and (start == 0 or not text[start - 1].isalnum())
            and (not result or start >= result[-1][1])
        ):
            result.append((start, min(len(text), start + 50)))
    return result


def scan_iban(text: str, scope: Scope, regions: Iterable[tuple[int, int]] | None = None) -> list[Finding]:
    found = []
    for match in _in_regions(_IBAN_RE, text, regions):
        value = match.group()
        # The country's IBAN length says where it ends (the match may run into a following word):
        # take that many characters, spaces aside, and require a boundary after them.
        length = _IBAN_LENGTHS.get(value[:2])
        if length is None:
            continue
        end, count = 0, 0
        while end < len(value) and count < length:
            if value[end] != " ":
                count += 1
            end += 1
        after = match.start() + end
        if count < length or (after < len(text) and (text[after].isalnum() or text[after] == "_")):
            continue
        compact = value[:end].replace(" ", "")
        if _iban_valid(compact):
            found.append(Finding(match.start(), after, IBAN, compact))
    return found


# --- Chinese resident identity numbers (GB 11643-1999) ------------------------------------------------
_CN_ID_RE = re.compile(r"(?<![A-Za-z0-9_+])(?<!\d[ -])\d{6}[ ]?\d{8}[ ]?\d{3}[0-9Xx]" + _E)
# The province-level prefix of the administrative division code (GB/T 2260).
_CN_PROVINCES = frozenset(
    [
        "11",
        "12",
        "13",
        "14",
        "15",
        "21",
        "22",
        "23",
        "31",
        "32",
        "33",
        "34",
        "35",
        "36",
        "37",
        "41",
        "42",
        "43",
        "44",
        "45",
        "46",
        "50",
        "51",
        "52",
        "53",
        "54",
        "61",
        "62",
        "63",
        "64",
        "65",
        "71",
        "81",
        "82",
        "83",
        "91",
    ]
)


def cn_resident_id_valid(number: str) -> bool:
    """18 characters, a province code, a real birth date between 1900 and today, the check digit."""
    if len(number) != 18 or number[:2] not in _CN_PROVINCES:
        return False
    try:
        if number[-1] != ric.calc_check_digit(number):
            return False
        born = ric.get_birth_date(number)
    except (ValidationError, ValueError):
        return False
    return date(1900, 1, 1) <= born <= date.today()


def scan_cn_resident_id(
    text: str, scope: Scope, regions: Iterable[tuple[int, int]] | None = None
) -> list[Finding]:
    found = []
    for match in _in_regions(_CN_ID_RE, text, regions):
        number = match.group().replace(" ", "").upper()
        if cn_resident_id_valid(number):
            found.append(Finding(match.start(), match.end(), CN_RESIDENT_ID, number))
    return found


# --- phone numbers ----------------------------------------------------------------------------------
# A candidate: an optional +country code, then digits in groups separated by one space, hyphen, dot
# or slash, optionally one group in parentheses. phonenumbers then decides. Numbers without "+" are
# read in the national formats of NATIONAL_REGIONS only (a bare digit string is an identifier far
# more often than a phone number, so a national number needs its separators — except a Chinese
# mobile number, usually written as 11 bare digits).
_PHONE_RE = re.compile(
    r"(?<![A-Za-z0-9_+.,/:#-])"
    r"(?:\+\d{1,3}[ .-]?)?"
    r"(?:\(\d{1,5}\)[ .-]?)?"
    r"\d{1,15}(?:[ ./-]\(?\d{1,8}\)?){0,6}"
    r"(?![A-Za-z0-9_]|[.,/:-]\d)"
)
# Dates and dotted quads (IPv4) are not phone numbers, whatever a numbering plan allows.
_NOT_PHONE_RE = re.compile(
    r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}|\d{4}[-./]\d{2}|\d{1,2}[./]\d{1,2}"
    r"|\d{1,3}(?:\.\d{1,3}){3}"
)
# National formats read for numbers written without "+": trunk-prefix ("0…") regions, then NANP.
TRUNK_REGIONS = ("GB", "DE", "FR", "JP", "AU", "IN", "CN")
NATIONAL_REGIONS = ("US", "CN", "GB", "DE", "FR", "JP", "AU", "IN")
_COUNTRY_CODES = {region: phonenumbers.country_code_for_region(region) for region in NATIONAL_REGIONS}


def _valid_national(digits: str, region: str, first_group: str | None) -> phonenumbers.PhoneNumber | None:
    """``digits`` (without the trunk prefix) as a valid number of ``region`` whose area code is the
    group written first (people write the area code apart: "030 1234567", not "0301 234567")."""
    if digits.startswith("0"):
        return None
    number = phonenumbers.PhoneNumber(country_code=_COUNTRY_CODES[region], national_number=int(digits))
    if not phonenumbers.is_valid_number_for_region(number, region):
        return None
    if first_group is not None:
        formatted = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
        written = _digits(re.split(r"[ ./-]", formatted.strip("("), maxsplit=1)[0])
        if written.lstrip("0") != first_group.lstrip("0"):
            return None
    return number


def phone_number_of(candidate: str) -> phonenumbers.PhoneNumber | None:
    """The valid phone number ``candidate`` is written as, or None (the rules above)."""
    digits = _digits(candidate)
    if not 7 <= len(digits) <= 15:
        return None
    if candidate.startswith(("+", "00")):
        # "00" is the international prefix in most of the world: 0044 20 7946 0958.
        international = candidate if candidate.startswith("+") else "+" + candidate[2:]
        try:
            number = phonenumbers.parse(international, None)
        except phonenumbers.NumberParseException:
            return None
        return number if phonenumbers.is_valid_number(number) else None
    if _NOT_PHONE_RE.fullmatch(candidate):
        return None
    if len(digits) == 11 and digits[0] == "1" and digits[1] in "3456789" and candidate.isdigit():
        return _valid_national(digits, "CN", None)  # a Chinese mobile number, written bare
    groups = [group for group in re.split(r"[ ./()-]+", candidate) if group]
    if len(digits) == 11 and groups[0] == "1":
        groups = groups[1:]  # the NANP country code written in front: 1-415-555-2671
    if len(groups) < 2 or any(len(group) < 2 for group in groups):
        return None
    if digits[0] == "0":
        for region in TRUNK_REGIONS:
            number = _valid_national(digits[1:], region, groups[0])
            if number is not None:
                return number
        return None
    if len(digits) == 11 and digits[0] == "1":
        # 138 0013 8000 (a Chinese mobile number) or 1-415-555-2671 (NANP with its country code)
        cn = _valid_national(digits, "CN", groups[0]) if digits[1] in "3456789" else None
        return cn or _valid_national(digits[1:], "US", groups[0])
    if len(digits) == 10:
        return _valid_national(digits, "US", groups[0]) or _valid_national(digits, "IN", groups[0])
    return None


def scan_phone(text: str, scope: Scope, regions: Iterable[tuple[int, int]] | None = None) -> list[Finding]:
    found = []
    for match in _in_regions(_PHONE_RE, text, regions):
        value = match.group()
        if len(value) < 7:
            continue
        span = (0, len(value))
        number = phone_number_of(value)
        if number is None and " " in value and not value.startswith("+"):
            for start, end in group_windows(value, min_group=2):
                if end - start >= 7:
                    number = phone_number_of(value[start:end])
                    if number is not None:
                        span = (start, end)
                        break
        if number is not None:
            key = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
            found.append(Finding(match.start() + span[0], match.start() + span[1], PHONE, key))
    return found


# --- IP addresses -----------------------------------------------------------------------------------
_IPV4_RE = re.compile(r"(?<![A-Za-z0-9_.])(?:\d{1,3}\.){3}\d{1,3}(?![A-Za-z0-9_]|\.\d)")
# Four colon-separated hex groups in a row: the only way an uncompressed IPv6 address starts.
_IPV6_FULL_HINT_RE = re.compile(r":[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")
_IPV6_RE = re.compile(
    r"(?<![A-Za-z0-9_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?"
    r"(?![A-Za-z0-9_:]|\.\d)"
)


# Dotted numbers that are not addresses: "Section 4.2.1.3", "version 1.0.0.1", "build 10.0.1.2".
_NUMBERING_WORD_RE = re.compile(
    r"(?i:\b(?:section|sec|chapter|ch|clause|version|ver|release|rev|revision|step|figure|fig|table|item|"
    r"rule|article|art|para|paragraph|appendix|annex|build|v|no|nr)\.?|§)[ \t]?$"
)


def scan_ip_address(
    text: str, scope: Scope, regions: Iterable[tuple[int, int]] | None = None
) -> list[Finding]:
    found = []
    if "." in text:
        for match in _in_regions(_IPV4_RE, text, regions):
            if _NUMBERING_WORD_RE.search(text, max(0, match.start() - 12), match.start()):
                continue
            try:
                address = ip_address(match.group())
            except ValueError:
                continue
            found.append(Finding(match.start(), match.end(), IP_ADDRESS, str(address)))
    return found


def scan_ipv6(text: str, scope: Scope) -> list[Finding]:
    found = []
    if "::" in text or _IPV6_FULL_HINT_RE.search(text):
        for match in _IPV6_RE.finditer(text):
            value = match.group()
            # Clock times ("10:30:00") and the like are not addresses: IPv6 needs "::" or 8 groups.
            if "::" not in value and value.count(":") != 7:
                continue
            if value in ("::", ":::") or len(value) < 3:
                continue
            try:
                address = ip_address(value)
            except ValueError:
                continue
            found.append(Finding(match.start(), match.end(), IP_ADDRESS, str(address)))
    return found


# --- injection --------------------------------------------------------------------------------------
_IGNORE = r"(?:ignore|disregard|forget|skip|override|bypass|discard|drop|abandon)"
_PRIOR = (
    r"(?:previous|prior|preceding|above|earlier|foregoing|former|original|initial|existing|system|"
    r"developer|safety|old)"
)
_NOUN = (
    r"(?:instructions?|prompts?|messages?|rules?|directions?|directives?|guidelines?|guidance|context|"
    r"commands?|constraints?|polic(?:y|ies)|restrictions?|programming|settings|conversation|tasks?)"
)
_AI = r"(?:AI|assistant|model|chatbot|bot|DAN|language\s+model|LLM|agent|GPT|ChatGPT|Claude)"
_VERBS = ("ignor", "disregard", "forget", "skip", "overrid", "bypass", "discard", "drop", "abandon")
# What a message addressing the model names it: the phrase is tried around each (as whole words).
_AI_WORDS = ("ai", "assistant", "agent", "model", "llm", "chatbot")
_WHOLE_WORDS = frozenset({*_AI_WORDS, "dan", "evil"})


@dataclass(frozen=True)
class _Phrase:
    """An instruction-like phrasing: its pattern (case-insensitive), and the lower-case keywords one of
    which it always contains — the pattern is tried only in a window around each keyword found,
    ``before`` characters before it and ``after`` characters after it."""

    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    before: int = 0
    after: int = 200


def _phrase(pattern: str, keywords: Iterable[str], before: int = 0, after: int = 200) -> _Phrase:
    return _Phrase(re.compile(pattern, re.IGNORECASE), tuple(keywords), before, after)


_PHRASES = (
    # ignore / disregard / forget … (all) (the) previous … instructions
    _phrase(
        _IGNORE + r"(?:\s+(?:all|any|every|each|the|your|my|these|those|of|that|what|was|said)){0,4}\s+"
        + _PRIOR + r"(?:\s+[a-z]+){0,2}?\s+" + _NOUN + r"\b",
        _VERBS,
    ),
    _phrase(
        _IGNORE + r"\s+(?:all\s+)?(?:your|the\s+system'?s?)\s+(?:instructions|rules|guidelines|programming|"
        r"system\s+prompt|restrictions|constraints)\b",
        _VERBS,
    ),
    _phrase(_IGNORE + r"\s+(?:all|everything)\s+(?:above|before\s+this|you\s+(?:were|have\s+been)\s+told)\b",
            _VERBS),
    _phrase(
        r"you\s+are\s+now\s+(?:(?:an?|the|my|in)\s+)?(?:(?:new|unrestricted|unfiltered|uncensored|jailbroken|"
        r"evil|different|free|rogue|helpful)\s+)?(?:" + _AI + r"|(?:developer|god|admin|debug|jailbreak|DAN|"
        r"unrestricted)\s+mode|unrestricted|unfiltered|jailbroken|free\s+(?:from|of))\b",
        ("you are n",),
    ),
    _phrase(r"you\s+are\s+no\s+longer\s+(?:an?\s+)?(?:" + _AI + r"|bound|restricted|limited|required\s+to)\b",
            ("you are n",)),
    _phrase(
        r"from\s+now\s+on,?\s+(?:you|the\s+assistant)\s+(?:will|must|shall|should|are\s+to)\s+(?:act|behave|"
        r"respond|answer|reply|obey|ignore|pretend|only|always|never)\b",
        ("from now on",),
    ),
    _phrase(
        r"(?:act|behave|respond)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|"
        r"jailbroken|uncensored|evil|DAN)\b",
        ("act as", "behave as", "respond as"),
    ),
    _phrase(
        r"pretend\s+(?:to\s+be|you\s+are|that\s+you\s+are)\s+(?:an?\s+)?(?:unrestricted|unfiltered|different|"
        r"evil|DAN|jailbroken|the\s+system|the\s+developer|my\s+(?:developer|creator))\b",
        ("pretend",),
    ),
    _phrase(
        r"(?:new|updated|revised|real|actual|hidden|secret|important|additional)\s+(?:system\s+)?"
        r"instructions?\s*:",
        ("instruction",), before=40, after=20,
    ),
    _phrase(r"system\s+(?:prompt|override|instructions?)\s*:|system\s+override\b", ("system",)),
    _phrase(
        r"(?:reveal|print|show|output|repeat|leak|disclose|display|dump)\s+(?:me\s+)?(?:your\s+(?:(?:full|"
        r"entire|original|hidden|initial|secret)\s+)?(?:system\s+prompt|instructions|prompt|rules|guidelines)|"
        r"the\s+(?:(?:full|entire|original|hidden|initial)\s+)?system\s+prompt)\b",
        ("prompt", "instruction", "rules", "guidelines"), before=50, after=20,
    ),
    _phrase(
        r"(?:do\s+not|don'?t|never)\s+(?:tell|inform|alert|notify|mention\s+(?:this\s+)?to|reveal\s+(?:this\s+)?"
        r"to|show\s+(?:this\s+)?to|let)\s+the\s+user\b"
        r"|without\s+(?:telling|informing|notifying|alerting|asking)\s+the\s+user\b"
        r"|the\s+user\s+(?:must|should|will)\s+(?:not|never)\s+(?:know|see|find\s+out|notice)\b",
        ("the user",), before=40, after=40,
    ),
    _phrase(
        r"(?:attention|note|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:AI|assistant|"
        r"agent|model|LLM|chatbot|language\s+model)s?\b"
        r"|(?:attention|dear|hey|hello|hi)\s*,?\s+(?:the\s+)?(?:AI|assistant|agent|model|LLM|chatbot|"
        r"language\s+model)s?(?:\s+(?:assistant|agent|model)s?)?\s*[:,!]",
        _AI_WORDS, before=40, after=30,
    ),
    _phrase(
        r"(?:send|forward|email|post|upload|exfiltrate|transmit|leak)\s+(?:(?:all|the|this|any|every|of|"
        r"their|his|her|my)\s+){0,3}(?:(?:conversation|chat)(?:\s+(?:history|log|logs|transcript))?|"
        r"previous\s+messages|system\s+prompt|(?:user'?s?\s+|customer'?s?\s+)?(?:credentials|passwords?|"
        r"api\s+keys?|secrets|access\s+tokens|personal\s+data|private\s+data))\s+to\b",
        ("conversation", "chat", "messages", "prompt", "credentials", "password", "api key", "secrets",
         "access tokens", "personal data", "private data"),
        before=60, after=40,
    ),
    _phrase(r"\b(?:DAN|developer|god|jailbreak)\s+mode\s+(?:enabled|activated|on)\b|\bdo\s+anything\s+now\b",
            (" mode", "do anything now"), before=12, after=20),
    # Chinese
    _phrase(
        r"(?:忽略|无视|忽视|不要理会|别管|忘记|忘掉|抛弃|放弃|跳过)掉?(?:你)?(?:之前|以前|先前|此前|上面|上述|以上|前面|"
        r"前述|原来|原有|原先|所有|全部|一切)(?:的|所有的?|全部的?)?(?:所有|全部|一切)?的?(?:指令|指示|说明|"
        r"提示词?|规则|要求|设定|命令|约束|限制|对话|消息)"
        r"|(?:忽略|无视|忘记|忘掉)(?:你的|系统的?|开发者的?)(?:指令|指示|设定|规则|提示词?|限制|约束)",
        ("忽略", "无视", "忽视", "不要理会", "别管", "忘记", "忘掉", "抛弃", "放弃", "跳过"),
        after=30,
    ),
    _phrase(
        r"你现在(?:是|扮演|成为|作为)(?:一个|一名|一位)?(?:不受限制|没有限制|无限制|不受约束|全新|新的|邪恶)?的?"
        r"(?:AI|人工智能|助手|模型|机器人|DAN|系统|管理员|开发者)"
        r"|你(?:不再是|已不再是)(?:一个)?(?:AI|人工智能|助手|模型|受限)",
        ("你现在", "你不再", "你已不再"), after=30,
    ),
    _phrase(r"从现在(?:开始|起)[，,]?\s*你(?:就)?(?:是|将是|扮演|不再|必须忽略|只能听从|必须听从)",
            ("从现在",), after=20),
    _phrase(r"(?:不要|别|请勿|切勿|不得)(?:告诉|通知|告知|让)用户", ("用户",), before=4, after=2),
    _phrase(r"(?:新的?|真正的|更新的?|隐藏的?|重要的?)(?:系统)?(?:指令|指示)[:：]", ("指令", "指示"),
            before=6, after=3),
    # Not "系统提示：" / "系统消息：": that is how Chinese software labels its own notices.
    _phrase(r"系统(?:提示词|指令)[:：]", ("系统",), after=8),
    _phrase(
        r"(?:泄露|透露|输出|显示|打印|重复|告诉我)(?:你的|出你的|一下你的)?(?:系统提示词?|系统指令|初始指令|原始指令|"
        r"提示词)",
        ("提示", "指令"), before=10, after=4,
    ),
    _phrase(
        r"(?:发送|转发|上传|泄露)(?:所有|全部)?的?(?:对话|聊天记录|用户数据|密码|密钥|凭证)(?:到|给)"
        r"|把(?:所有|全部)?的?(?:对话|聊天记录|用户数据|密码|密钥|凭证|系统提示词?)(?:都|全部)?(?:发送|转发|上传|发)"
        r"(?:到|给)",
        ("对话", "聊天记录", "用户", "密码", "密钥", "凭证", "提示"), before=10, after=12,
    ),
)  # fmt: skip


# keyword -> the phrases tried around it (a keyword shared by phrases is looked for once)
_PHRASES_BY_KEYWORD: dict[str, list[_Phrase]] = {}
for _entry in _PHRASES:
    for _keyword in _entry.keywords:
        _PHRASES_BY_KEYWORD.setdefault(_keyword, []).append(_entry)
_ASCII_KEYWORDS = tuple(k for k in _PHRASES_BY_KEYWORD if k.isascii())
_OTHER_KEYWORDS = tuple(k for k in _PHRASES_BY_KEYWORD if not k.isascii())


def _scan_phrases(text: str, lower: str) -> list[tuple[int, int]]:
    """Spans of instruction-like phrases. A phrase that starts with its keyword is tried once at each
    occurrence; the others only in the windows around their keywords' occurrences, merged where they
    overlap — so the work stays linear in the text even when a keyword repeats on every word."""
    size = len(text)
    keywords = _ASCII_KEYWORDS
    if not text.isascii():
        present = set(text)
        keywords += tuple(keyword for keyword in _OTHER_KEYWORDS if keyword[0] in present)
    windows: dict[_Phrase, list[tuple[int, int]]] = {}
    spans: set[tuple[int, int]] = set()
    for keyword in keywords:
        at = lower.find(keyword)
        if at == -1:
            continue
        word = keyword[0].isascii() and keyword[0].isalpha()
        whole = keyword in _WHOLE_WORDS
        phrases = _PHRASES_BY_KEYWORD[keyword]
        while at != -1:
            after = at + len(keyword)
            # ASCII keywords start a word ("ai" in "email" is not one); some are whole words.
            if not (word and at and lower[at - 1].isascii() and lower[at - 1].isalpha()) and not (
                whole and after < size and lower[after].isascii() and lower[after].isalpha()
            ):
                for phrase in phrases:
                    if phrase.before:
                        windows.setdefault(phrase, []).append(
                            (max(0, at - phrase.before), min(size, after + phrase.after))
                        )
                    else:
                        # The phrase starts with its keyword: one attempt, there.
                        match = phrase.pattern.match(text, at, min(size, after + phrase.after))
                        if match is not None:
                            spans.add((match.start(), match.end()))
            at = lower.find(keyword, at + 1)
    for phrase, found in windows.items():
        found.sort()
        merged = [list(found[0])]
        for lo, hi in found[1:]:
            if lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        for lo, hi in merged:
            for match in phrase.pattern.finditer(text, lo, hi):
                spans.add((match.start(), match.end()))
    return sorted(spans)


# Fake role and tool tags, and chat-template control tokens.
_ANGLE_TAG_RE = re.compile(
    r"<(?:/?[ \t]{0,4}(?:system|assistant|developer|tool|tools|tool_call|tool_calls|tool_result|"
    r"tool_response|tool_use|function|function_call|function_calls|function_results|functions|invoke|"
    r"instructions?|system_prompt|im_start|im_end|admin)(?:[ \t][^<>\x00\n]{0,200})?[ \t]{0,4}/?>"
    r"|\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|"
    r"begin_of_text|end_of_text|tool|ipython)\|>"
    r"|</?SYS>>)",
    re.IGNORECASE,
)
_INST_TAG_RE = re.compile(r"\[/?INST\]", re.IGNORECASE)
# "### System:" / "### Instruction:" headings (the Alpaca-style template), on a line of their own.
_ROLE_HEADING_RE = re.compile(r"#{2,4}[ \t]?(?:system|instruction|response)s?:[ \t]*(?=\n|\Z)", re.IGNORECASE)
# Invisible characters: zero-width and word-joiner characters, bidirectional embeddings, overrides
# and isolates, Unicode tag characters (text that renders as nothing). ZWNJ and ZWJ have real uses
# in scripts and emoji sequences: they count only next to ASCII, where they have none. A byte order
# mark at the very start of a string is a file artifact, not hidden text.
_INVISIBLE_BMP = (
    "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u180e\ufeff"
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_INVISIBLE_RE = re.compile(
    "[\u200b\u2060-\u2064\u180e\ufeff\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]+"
    "|(?<=[\x20-\x7e])[\u200c\u200d]+|[\u200c\u200d]+(?=[\x20-\x7e])"
)
# An unclosed comment hides everything after it: it runs to the end of its string (so every attempt
# succeeds and the scan stays linear).
_HTML_COMMENT_RE = re.compile(r"<!--(?!-?>)[^\x00]*?(?:-->|(?=\n\x00)|\Z)")
_MARKDOWN_COMMENT_RE = re.compile(
    r"^[ ]{0,3}\[[^\]\n\x00]{0,100}\]:[ \t]{0,8}(?:#|<>)[ \t]{0,8}"
    r"(?:\([^\n\x00]{0,4096}\)|\"[^\n\x00]{0,4096}\"|'[^\n\x00]{0,4096}')[ \t]*$",
    re.MULTILINE,
)
# Elements hidden from a reader but read by the model: the hidden attribute or a hiding style.
_HIDDEN_ELEMENT_RE = re.compile(
    r"<([a-z][a-z0-9]{0,15})\b[^<>\x00]{0,1000}?(?:\shidden(?=[\s>/=])|\saria-hidden\s*=\s*[\"']?true|"
    r"style\s*=\s*[\"'][^\"'<>\x00]{0,500}?(?:display\s*:\s*none|visibility\s*:\s*hidden|"
    r"font-size\s*:\s*0(?![.\d]*[1-9])|opacity\s*:\s*0(?![.\d]*[1-9])))[^<>\x00]{0,1000}>",
    re.IGNORECASE,
)
# How far after a hidden element's opening tag its closing tag is looked for (the element's text is
# the hidden part); without one that near, the finding is the opening tag.
_HIDDEN_ELEMENT_MAX_CHARS = 4096


def _has_invisible(text: str) -> bool:
    if text.isascii():
        return False
    if any(char in text for char in _INVISIBLE_BMP):
        return True
    # Tag characters are astral: a text holds one only if it needs surrogate pairs in UTF-16.
    return len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text) and any(
        "\U000e0000" <= char <= "\U000e007f" for char in text
    )


def _starts_string(text: str, position: int) -> bool:
    return position == 0 or text.startswith(SEPARATOR, position - len(SEPARATOR))


def scan_injection(text: str, scope: Scope) -> list[Finding]:
    found: list[Finding] = []
    lower = scope.lower(text)
    for start, end in _scan_phrases(text, lower):
        found.append(Finding(start, end, INJECTION, " ".join(lower[start:end].split())))
    if "<" in text:
        for match in _ANGLE_TAG_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), INJECTION, match.group().lower()))
    if "inst]" in lower:
        for match in _INST_TAG_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), INJECTION, match.group().lower()))
    if "##" in text:
        for match in _ROLE_HEADING_RE.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            if match.start() - line_start <= 3 and not text[line_start : match.start()].strip(" \t"):
                found.append(Finding(match.start(), match.end(), INJECTION, match.group().lower()))
    if _has_invisible(text):
        for match in _INVISIBLE_RE.finditer(text):
            if match.group() == "\ufeff" and _starts_string(text, match.start()):
                continue
            found.append(Finding(match.start(), match.end(), INJECTION, match.group()))
    if "<!--" in text:
        for match in _HTML_COMMENT_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), INJECTION, match.group()))
    if "]:" in text:
        for match in _MARKDOWN_COMMENT_RE.finditer(text):
            found.append(Finding(match.start(), match.end(), INJECTION, match.group()))
    if "<" in text and (
        "hidden" in lower or "display" in lower or "font-size" in lower or "opacity" in lower
    ):
        for match in _HIDDEN_ELEMENT_RE.finditer(text):
            end = match.end()
            limit = min(len(text), end + _HIDDEN_ELEMENT_MAX_CHARS)
            close = lower.find("</" + match.group(1).lower(), end, limit)
            if close != -1 and text.find("\x00", end, close) == -1:
                closing = text.find(">", close, min(len(text), close + 24))
                if closing != -1:
                    end = closing + 1
            found.append(Finding(match.start(), end, INJECTION, text[match.start() : end]))
    return found


# --- external media ---------------------------------------------------------------------------------
_URL = r"(?:https?:)?//[^\s<>()\"'\x00]{1,4096}"
# Markdown images and links: ![alt](url "title"), [text](url), with the URL as group "url".
_MD_LINK_RE = re.compile(
    r"!?\[[^\]\n\x00]{0,1000}\]\([ \t]{0,8}<?(?P<url>" + _URL + r")>?(?:[ \t]{1,8}(?:\"[^\"\n\x00]{0,1000}\"|"
    r"'[^'\n\x00]{0,1000}'))?[ \t]{0,8}\)"
)
# Reference definitions ([id]: url) and autolinks (<https://…>).
_MD_REF_RE = re.compile(
    r"^[ ]{0,3}\[[^\]\n\x00]{1,1000}\]:[ \t]{0,8}<?(?P<url>" + _URL + r")>?", re.MULTILINE
)
_AUTOLINK_RE = re.compile(r"<(?P<url>https?://[^\s<>\x00]{1,4096})>")
_HTML_TAG_RE = re.compile(
    r"<(?:img|a|iframe|frame|source|video|audio|embed|object|link|script|image|input|track|area|form|"
    r"body|table|td|meta)\b[^<>\x00]{0,4096}>",
    re.IGNORECASE,
)
_HTML_URL_ATTR_RE = re.compile(
    r"\b(?P<name>src|href|data|poster|srcset|action|background|content|xlink:href|formaction)\s*=\s*"
    r"(?:\"(?P<dq>[^\"\x00]{0,4096})\"|'(?P<sq>[^'\x00]{0,4096})'|(?P<bare>[^\s>\x00]{1,4096}))",
    re.IGNORECASE,
)
_SRCSET_URL_RE = re.compile(r"(?:https?:)?//[^\s,\x00]{1,4096}")


def _external_url(url: str, scope: Scope) -> bool:
    """An absolute (or scheme-relative) http(s) URL to another host, carrying a query string."""
    try:
        parts = urlsplit(url if "://" in url else "https:" + url)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.query:
        return False
    host = parts.hostname
    return bool(host) and not scope.is_own(host)


def scan_external_media(text: str, scope: Scope) -> list[Finding]:
    if "//" not in text or "?" not in text:
        return []
    found: list[Finding] = []

    def add(start: int, end: int) -> None:
        url = text[start:end]
        if _external_url(url, scope):
            found.append(Finding(start, end, EXTERNAL_MEDIA, url))

    at = text.find("](")
    while at != -1:
        # A link ends its text with "](": look back for where it opened.
        opening = text.rfind("[", max(0, at - 1000), at)
        if opening != -1:
            begin = opening - 1 if opening and text[opening - 1] == "!" else opening
            match = _MD_LINK_RE.match(text, begin)
            if match is not None:
                add(match.start("url"), match.end("url"))
        at = text.find("](", at + 2)
    if "]:" in text:
        for match in _MD_REF_RE.finditer(text):
            add(match.start("url"), match.end("url"))
    if "<http" in text or "<HTTP" in text:
        for match in _AUTOLINK_RE.finditer(text):
            add(match.start("url"), match.end("url"))
    if "<" in text:
        for tag in _HTML_TAG_RE.finditer(text):
            for attr in _HTML_URL_ATTR_RE.finditer(tag.group()):
                group = next(name for name in ("dq", "sq", "bare") if attr.group(name) is not None)
                base = tag.start() + attr.start(group)
                value = attr.group(group)
                if attr.group("name").lower() == "srcset":
                    for url in _SRCSET_URL_RE.finditer(value):
                        add(base + url.start(), base + url.end())
                else:
                    add(base, base + len(value))
    return found


# --- all together -----------------------------------------------------------------------------------
# One pass finds every run of digits (with the separators numbers are written with); the
# number-shaped detectors then look only there. Six characters is the shortest run any of them needs.
_NUMBER_RUN_RE = re.compile(r"\d[\d ./()-]{5,4096}")
# Where an IBAN may begin: two capitals and its two check digits.
_IBAN_START_RE = re.compile(r"[A-Z]{2}\d\d")
NUMBER_DETECTORS = frozenset({PHONE, PAYMENT_CARD, IBAN, CN_RESIDENT_ID, IP_ADDRESS})
_NUMBER_SCANNERS = {
    PAYMENT_CARD: scan_payment_card,
    CN_RESIDENT_ID: scan_cn_resident_id,
    IBAN: scan_iban,
    PHONE: scan_phone,
    IP_ADDRESS: scan_ip_address,
}
_TEXT_SCANNERS = {
    SECRETS: scan_secrets,
    EMAIL: scan_email,
    INJECTION: scan_injection,
    EXTERNAL_MEDIA: scan_external_media,
}


# The shortest run of digits each number-shaped detector can use (a resident ID number's run may
# stop before its final X).
_SHORTEST_RUN = {PAYMENT_CARD: 13, CN_RESIDENT_ID: 17, PHONE: 7, IP_ADDRESS: 7}


def _plausible(name: str, text: str, runs: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """The regions (run start, run end plus lookahead) of the runs long enough for ``name``."""
    shortest = _SHORTEST_RUN[name]
    if name == IP_ADDRESS:
        return [(s, r) for s, e, r in runs if e - s >= shortest and text.count(".", s, e) >= 3]
    return [(s, r) for s, e, r in runs if e - s >= shortest]


def scan(text: str, scope: Scope, detectors: Iterable[str]) -> list[Finding]:
    """Every finding of the named built-in detectors in ``text`` (not yet resolved against each other)."""
    wanted = list(detectors)
    found: list[Finding] = []
    numbers = [name for name in wanted if name in NUMBER_DETECTORS]
    if numbers:
        # Each region reaches two characters past its run, so the detectors' lookaheads see what
        # follows (the X of a resident ID number, a letter that makes a digit run part of a word).
        size = len(text)
        runs = []
        for match in _NUMBER_RUN_RE.finditer(text):
            start = match.start()
            # A phone number may open with "+" or "(" (the run itself starts at a digit).
            while start and text[start - 1] in "+(" and match.start() - start < 2:
                start -= 1
            runs.append((start, match.end(), min(size, match.end() + 2)))
        for name in numbers:
            if name == IBAN:
                found.extend(scan_iban(text, scope, _iban_regions(text)))
            elif runs:
                found.extend(_NUMBER_SCANNERS[name](text, scope, _plausible(name, text, runs)))
        if IP_ADDRESS in numbers and ("::" in text or _IPV6_FULL_HINT_RE.search(text)):
            found.extend(scan_ipv6(text, scope))
    for name in wanted:
        if name in _TEXT_SCANNERS:
            found.extend(_TEXT_SCANNERS[name](text, scope))
    return found
