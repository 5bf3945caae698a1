"""Text preparation for the lexical lane on PostgreSQL full text search, Chinese included.

PostgreSQL has no Chinese text search configuration: its parser reads a run of Han characters as
one "word" (``退款政策`` is a single lexeme), so a query for ``退款`` would never match it. Han runs
are therefore segmented with jieba before PostgreSQL sees the text, and the segments are set apart
by spaces (also from adjacent Latin letters: ``iPhone15退款`` would otherwise be one token). All
other text is left untouched for the ``english`` configuration, which lowercases, drops English stop
words and stems (``refunds`` → ``refund``); Han words pass through ``english`` unchanged.

* Documents: :func:`lexical_document` uses jieba's search mode (``cut_for_search``), which emits
  each word plus the dictionary words inside long ones (``中华人民共和国`` also yields ``共和国``),
  so a query for a part of a compound still matches. Store
  ``to_tsvector('english', lexical_document(text))`` (see :func:`document_tsvector_sql_params`);
  the prepared text is an index input only, never shown.
* Queries: :func:`lexical_query` uses jieba's precise mode (``cut``) and returns distinct terms,
  without Chinese function words, at most :data:`MAX_QUERY_TERMS`.
* :func:`or_tsquery_sql_params` ORs one ``plainto_tsquery`` per term. ``plainto_tsquery`` treats
  its argument as plain text (no operators, quotes or prefixes), and every term is a bound
  parameter, so no user text ever becomes SQL or tsquery syntax. OR semantics matter: the AND of
  ``plainto_tsquery``/``websearch_to_tsquery`` on a whole question usually matches nothing.

Nothing here imports Django; the SQL fragments use ``%s`` placeholders for a DB-API cursor.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterable

with warnings.catch_warnings():
    # jieba imports pkg_resources when setuptools provides it, which newer setuptools deprecates.
    warnings.simplefilter("ignore", DeprecationWarning)
    import jieba

TS_CONFIG = "english"
MAX_QUERY_TERMS = 32
MAX_TERM_CHARS = 64

# CJK Unified Ideographs (with extensions A to H), compatibility ideographs and 〇.
_HAN_RUN = re.compile(r"[\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")
# A term: word characters, optionally joined by the in-word punctuation PostgreSQL's parser keeps
# together (e-mail, 3.14, don't); anything else separates terms, so "refund/return" gives two.
_TERM = re.compile(r"\w+(?:[-.'’]\w+)*")

# Chinese function words and question words: in an OR query they would match nearly every
# Chinese document. Only queries are filtered; documents keep everything.
# fmt: off
CHINESE_QUERY_STOPWORDS = frozenset((
    "的", "了", "着", "过", "是", "在", "和", "与", "及", "或", "而", "并", "也", "都", "就", "又",
    "还", "吗", "呢", "吧", "啊", "呀", "哦", "嘛", "么", "之", "其", "这", "那", "这个", "那个",
    "这些", "那些", "我", "你", "他", "她", "它", "我们", "你们", "他们", "她们", "它们", "您", "有",
    "没有", "要", "会", "能", "可以", "把", "被", "让", "给", "对", "从", "到", "为", "以", "于", "向",
    "由", "如何", "怎么", "怎样", "怎么样", "什么", "哪些", "哪个", "为什么", "请问", "一下", "一个",
    "是否",
))
# fmt: on

_tokenizer = jieba.Tokenizer()
jieba.setLogLevel(logging.WARNING)  # jieba logs its dictionary loading to stderr at DEBUG otherwise


def _segment(text: str, *, search_mode: bool) -> str:
    cut = _tokenizer.cut_for_search if search_mode else _tokenizer.cut

    def spaced(match: re.Match[str]) -> str:
        words = [word for word in cut(match.group()) if word.strip()]
        return " " + " ".join(words) + " "

    return _HAN_RUN.sub(spaced, text)


def lexical_document(text: str) -> str:
    """The text to feed ``to_tsvector('english', …)`` for a chunk or title: Han runs segmented."""
    if not isinstance(text, str):
        raise TypeError("text must be a string")
    return _segment(text, search_mode=True)


def lexical_query(text: str) -> list[str]:
    """Distinct search terms of a user query, in order, for :func:`or_tsquery_sql_params`.

    English words are returned as typed (PostgreSQL stems them and drops stop words); Han runs are
    segmented into words and Chinese function words removed. Terms longer than
    :data:`MAX_TERM_CHARS` (pasted hashes, base64) and terms past :data:`MAX_QUERY_TERMS` are dropped.
    """
    if not isinstance(text, str):
        raise TypeError("text must be a string")
    terms: list[str] = []
    seen: set[str] = set()
    for match in _TERM.finditer(_segment(text, search_mode=False)):
        term = match.group()
        key = term.casefold()
        if key in seen or term in CHINESE_QUERY_STOPWORDS or len(term) > MAX_TERM_CHARS:
            continue
        seen.add(key)
        terms.append(term)
        if len(terms) == MAX_QUERY_TERMS:
            break
    return terms


def or_tsquery_sql_params(terms: Iterable[str], *, config: str = TS_CONFIG) -> tuple[str, list[str]]:
    """A SQL expression of type ``tsquery`` matching documents that contain any of ``terms``.

    Returns ``(sql, params)``: ``sql`` is built only from constant text and ``%s`` placeholders,
    ``params`` holds the configuration name and the terms. No terms gives the empty tsquery, which
    matches nothing. A term that is only stop words or punctuation contributes an empty operand,
    which ``||`` ignores.
    """
    items = list(terms)
    if isinstance(terms, str) or not all(isinstance(term, str) for term in items):
        raise TypeError("terms must be an iterable of strings")
    if len(items) > MAX_QUERY_TERMS:
        raise ValueError(f"at most {MAX_QUERY_TERMS} terms")
    if not items:
        return "''::tsquery", []
    sql = "(" + " || ".join(["plainto_tsquery(%s::regconfig, %s)"] * len(items)) + ")"
    params: list[str] = []
    for term in items:
        params.extend((config, term))
    return sql, params


def document_tsvector_sql_params(text: str, *, config: str = TS_CONFIG) -> tuple[str, list[str]]:
    """``(sql, params)`` for the ``tsvector`` of a document text, prepared by :func:`lexical_document`."""
    return "to_tsvector(%s::regconfig, %s)", [config, lexical_document(text)]
